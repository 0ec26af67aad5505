"""The URL rules a bundle location must satisfy."""

from __future__ import annotations

import ipaddress
import urllib.parse

import httpx

from ._errors import BundleLoaderError

_LOOPBACK_NAMES = frozenset({"localhost"})
_MAX_PORT = 65535


def _invalid(rule: str) -> BundleLoaderError:
    return BundleLoaderError("invalid_url", rule)


def is_loopback_host(host: str) -> bool:
    """Whether ``host`` (as httpx parses it) is ``localhost``, 127.0.0.0/8 or ::1."""
    if host in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_bundle_url(url: str, *, allow_http_loopback: bool = False) -> str:
    """Check that ``url`` may be used to fetch a bundle, and return it unchanged.

    The URL must be an absolute ``https`` URL with a host, a port (if any) in
    1-65535, no credentials (any ``userinfo@``, even empty, is refused), no
    fragment (not even an empty ``#``), and no whitespace, control characters
    or backslashes. Plain ``http`` is accepted only when
    ``allow_http_loopback`` is true and the host is ``localhost``, in
    127.0.0.0/8 or ``::1``. Host names are not resolved, so this says nothing
    about where a public name points.

    Raises ``BundleLoaderError`` with code ``invalid_url``; its message names
    the rule that was broken and never repeats the URL.
    """
    if not isinstance(url, str):
        raise _invalid("URL must be a string")
    if any(ch <= " " or ch == "\x7f" or ch == "\\" for ch in url):
        raise _invalid("URL must not contain whitespace, control characters or backslashes")
    try:
        parsed = httpx.URL(url)
        authority = urllib.parse.urlsplit(url).netloc
    except (httpx.InvalidURL, ValueError):
        raise _invalid("URL is not well-formed") from None
    if parsed.scheme and parsed.scheme not in ("https", "http"):
        raise _invalid("URL must use https")
    if not parsed.is_absolute_url or not parsed.host:
        raise _invalid("URL must be absolute and include a host")
    if "@" in authority or parsed.userinfo:
        raise _invalid("URL must not contain credentials")
    if "#" in url:
        raise _invalid("URL must not contain a fragment")
    if parsed.port is not None and not 1 <= parsed.port <= _MAX_PORT:
        raise _invalid("URL port must be between 1 and 65535")
    if parsed.scheme == "http":
        if not allow_http_loopback:
            raise _invalid("URL must use https")
        if not is_loopback_host(parsed.host):
            raise _invalid("plain http is allowed only to a loopback host")
    return url
