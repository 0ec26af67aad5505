"""The host side of the guest's plain ``fetch`` / ``context.fetch``: bytes in, bytes out."""

from __future__ import annotations

import asyncio
import base64
import binascii
import re
import ssl
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal

import httpx

from ._network import (
    BodyTooLarge,
    InvalidURL,
    NetworkPolicy,
    NetworkRefused,
    ResolutionFailed,
    UnsupportedContentEncoding,
    parse_http_url,
    read_body,
)

__all__ = ["MAX_FETCH_REDIRECTS", "FetchFailed", "PlainFetch"]

MAX_FETCH_REDIRECTS = 20
"""Redirects followed in ``follow`` mode, as in the Fetch standard."""

RedirectMode = Literal["follow", "manual", "error"]

_REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
# Methods the Fetch standard upper-cases; others are sent as given.
_NORMALIZED_METHODS = frozenset({"DELETE", "GET", "HEAD", "OPTIONS", "POST", "PUT"})
_FORBIDDEN_METHODS = frozenset({"CONNECT", "TRACE", "TRACK"})
# Framing and connection headers belong to the host's HTTP client; a guest
# value is dropped silently, as browsers drop forbidden headers.
# Accept-Encoding is always identity (see _REQUIRED_HEADERS).
_DROPPED_REQUEST_HEADERS = frozenset(
    {
        "accept-encoding",
        "connection",
        "content-length",
        "expect",
        "host",
        "keep-alive",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
    }
)
_REQUIRED_HEADERS = ((b"Accept-Encoding", b"identity"),)
_DEFAULT_HEADERS = ((b"Accept", b"*/*"),)
# Dropped when a redirect turns the request into a GET without a body.
_BODY_HEADERS = frozenset(
    {b"content-encoding", b"content-language", b"content-location", b"content-type"}
)
# Dropped when a redirect leaves the origin.
_CREDENTIAL_HEADERS = frozenset({b"authorization", b"cookie"})


class FetchFailed(Exception):
    """A plain fetch failed. The message is one safe line: no host, address or OS error.

    The guest turns it into a ``TypeError``, as browsers do for network errors.
    """


# What a guest can learn. A refused destination and a name that does not
# resolve read the same, so a plugin cannot map internal DNS names.
UNREACHABLE = "fetch failed: the host could not be resolved or is not allowed"
CONNECT_FAILED = "fetch failed: could not connect to the server"
TLS_UNVERIFIED = "fetch failed: the server's TLS certificate could not be verified"
TLS_FAILED = "fetch failed: the TLS connection failed"
CONNECTION_FAILED = "fetch failed: the connection to the server failed"
TIMED_OUT = "fetch failed: the request timed out"
TOO_LARGE = "fetch failed: the response body is larger than the limit"
BAD_ENCODING = "fetch failed: the response uses an unsupported content encoding"
TOO_MANY_REDIRECTS = "fetch failed: too many redirects"
REDIRECT_REFUSED = "fetch failed: redirect mode is 'error'"
BAD_REDIRECT = "fetch failed: the redirect location is not a URL that may be fetched"
FAILED = "fetch failed"


@dataclass(frozen=True)
class _Request:
    url: httpx.URL
    method: str
    headers: tuple[tuple[bytes, bytes], ...]
    body: bytes | None
    redirect: RedirectMode


class PlainFetch:
    """The guest's ``fetch``, connecting only where ``policy`` allows.

    ``max_response_bytes`` caps the body after any content decoding and
    ``timeout_seconds`` the whole call, redirects and body included. No
    cookies, cache or credentials are kept between calls. Building one loads
    the policy's TLS trust (a bad ``ca_bundle`` raises ``OSError`` here); bad
    limits raise ``ValueError``.
    """

    def __init__(
        self,
        policy: NetworkPolicy = NetworkPolicy(),  # noqa: B008  # frozen, so safe to share
        *,
        max_response_bytes: int = 32 * 1024 * 1024,
        timeout_seconds: float = 60.0,
    ) -> None:
        if max_response_bytes < 0:
            raise ValueError("max_response_bytes must not be negative")
        if not timeout_seconds > 0:
            raise ValueError("timeout_seconds must be positive")
        self._policy = policy
        self._max_bytes = max_response_bytes
        self._timeout = timeout_seconds
        self._tls = policy.tls_context()

    async def fetch(self, request: Mapping[str, Any]) -> dict[str, Any]:
        """Perform one guest ``fetch`` and return the response.

        ``request``: ``url`` (absolute http/https, no credentials), ``method``
        (default ``GET``; ``CONNECT``, ``TRACE`` and ``TRACK`` are refused),
        ``headers`` as ``[[name, value], ...]`` (framing and connection headers
        are dropped; ``Accept-Encoding`` is always ``identity``; ``Accept``
        defaults to ``*/*``), ``body`` as base64 (not with GET or HEAD) and
        ``redirect``: ``follow`` (default, up to ``MAX_FETCH_REDIRECTS``),
        ``manual`` (the 3xx response is returned as it is, as Workers do) or
        ``error``. Redirects change the method and drop the body as the Fetch
        standard says, and drop ``Authorization`` and ``Cookie`` when they
        leave the origin.

        Returns ``{"url", "status", "statusText", "headers", "body",
        "redirected"}``: the final URL without fragment, the status and raw
        reason phrase, the response headers as ``[[lowercase name, value]]`` in
        wire order, the body as base64 and whether a redirect was followed.

        Raises ``FetchFailed`` for a malformed request, a refused or
        unresolvable destination, a network, TLS or protocol failure, a
        timeout, a body over the cap, or a redirect that may not be followed.
        """
        parsed = _parse_request(request)
        try:
            async with asyncio.timeout(self._timeout):
                return await self._fetch(parsed)
        except FetchFailed:
            raise
        except Exception as exc:
            raise _translate(exc) from exc

    async def _fetch(self, request: _Request) -> dict[str, Any]:
        # The transport directly, not an httpx client: no cookie jar, and no
        # redirect bookkeeping that would parse a Location in manual mode.
        async with self._policy.transport(tls_context=self._tls) as transport:
            redirected = False
            for hop in range(MAX_FETCH_REDIRECTS + 1):
                response = await transport.handle_async_request(
                    httpx.Request(
                        request.method, request.url, headers=request.headers, content=request.body
                    )
                )
                try:
                    if request.redirect == "manual" or (location := _location(response)) is None:
                        return await self._result(response, request, redirected)
                    if request.redirect == "error":
                        raise FetchFailed(REDIRECT_REFUSED)
                    if hop == MAX_FETCH_REDIRECTS:
                        raise FetchFailed(TOO_MANY_REDIRECTS)
                    request = _redirected(request, response.status_code, location)
                    redirected = True
                finally:
                    await response.aclose()
        raise AssertionError("unreachable: the loop returns or raises")

    async def _result(
        self, response: httpx.Response, request: _Request, redirected: bool
    ) -> dict[str, Any]:
        # HEAD, 1xx, 204 and 304 answers have no body, whatever Content-Length says.
        bodiless = request.method == "HEAD" or response.status_code in (204, 304) or (
            100 <= response.status_code < 200)
        body = b"" if bodiless else await read_body(response, self._max_bytes)
        reason = response.extensions.get("reason_phrase", b"")
        return {
            "url": str(request.url.copy_with(fragment=None)),
            "status": response.status_code,
            "statusText": reason.decode("latin-1") if isinstance(reason, bytes) else "",
            "headers": [
                [name.decode("latin-1").lower(), value.decode("latin-1")]
                for name, value in response.headers.raw
            ],
            "body": base64.b64encode(body).decode("ascii"),
            "redirected": redirected,
        }


def _location(response: httpx.Response) -> str | None:
    """The redirect target, or None when the response is not a followable redirect."""
    if response.status_code not in _REDIRECT_STATUSES:
        return None
    locations = response.headers.get_list("location")
    if not locations:
        return None
    if len(locations) > 1:
        raise FetchFailed(BAD_REDIRECT)
    return locations[0]


def _redirected(request: _Request, status: int, location: str) -> _Request:
    """The next request of a redirect chain (the Fetch standard's HTTP-redirect fetch)."""
    try:
        url = parse_http_url(str(request.url.join(location)))
    except (InvalidURL, httpx.InvalidURL):
        raise FetchFailed(BAD_REDIRECT) from None
    headers = request.headers
    method, body = request.method, request.body
    if (status in (301, 302) and method == "POST") or (
        status == 303 and method not in ("GET", "HEAD")
    ):
        method, body = "GET", None
        headers = tuple(h for h in headers if h[0].lower() not in _BODY_HEADERS)
    if _origin(url) != _origin(request.url):
        headers = tuple(h for h in headers if h[0].lower() not in _CREDENTIAL_HEADERS)
    return replace(request, url=url, method=method, headers=headers, body=body)


def _origin(url: httpx.URL) -> tuple[str, str, int | None]:
    default = {"http": 80, "https": 443}.get(url.scheme)
    return (url.scheme, url.host, url.port or default)


def _parse_request(request: Mapping[str, Any]) -> _Request:
    if not isinstance(request, Mapping):
        raise FetchFailed("fetch failed: the request is not an object")
    try:
        url = parse_http_url(request.get("url"))
    except InvalidURL as err:
        raise FetchFailed(f"fetch failed: {err}") from None
    # A missing key and null mean the same: the guest's `undefined`.
    method = _method(_optional(request, "method", "GET"))
    headers = _request_headers(_optional(request, "headers", []))
    body = _body(request.get("body"))
    if body is not None and method in ("GET", "HEAD"):
        raise FetchFailed("fetch failed: a GET or HEAD request cannot have a body")
    redirect = _optional(request, "redirect", "follow")
    if redirect not in ("follow", "manual", "error"):
        raise FetchFailed("fetch failed: redirect must be 'follow', 'manual' or 'error'")
    return _Request(url, method, headers, body, redirect)


def _optional(request: Mapping[str, Any], key: str, default: object) -> Any:
    value = request.get(key)
    return default if value is None else value


def _method(value: object) -> str:
    if not isinstance(value, str) or not _TOKEN.fullmatch(value):
        raise FetchFailed("fetch failed: the method is not a valid HTTP method")
    upper = value.upper()
    if upper in _FORBIDDEN_METHODS:
        raise FetchFailed("fetch failed: the method is not allowed")
    return upper if upper in _NORMALIZED_METHODS else value


def _request_headers(value: object) -> tuple[tuple[bytes, bytes], ...]:
    if not isinstance(value, list):
        raise FetchFailed("fetch failed: headers must be a list of [name, value] pairs")
    headers: list[tuple[bytes, bytes]] = []
    for pair in value:
        if not (
            isinstance(pair, list | tuple)
            and len(pair) == 2
            and isinstance(pair[0], str)
            and isinstance(pair[1], str)
        ):
            raise FetchFailed("fetch failed: headers must be a list of [name, value] pairs")
        name, raw_value = pair
        if not _TOKEN.fullmatch(name):
            raise FetchFailed("fetch failed: a header name is not valid")
        # The Fetch standard strips leading and trailing HTTP whitespace.
        header_value = raw_value.strip(" \t\r\n")
        if any(ch in header_value for ch in "\r\n\0"):
            raise FetchFailed("fetch failed: a header value is not valid")
        try:
            encoded = header_value.encode("latin-1")
        except UnicodeEncodeError:
            raise FetchFailed("fetch failed: a header value is not valid") from None
        lowered = name.lower()
        if lowered in _DROPPED_REQUEST_HEADERS or lowered.startswith("proxy-"):
            continue
        headers.append((name.encode("ascii"), encoded))
    present = {name.lower() for name, _ in headers}
    defaults = [h for h in _DEFAULT_HEADERS if h[0].lower() not in present]
    return (*headers, *defaults, *_REQUIRED_HEADERS)


def _body(value: object) -> bytes | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise FetchFailed("fetch failed: the body must be a base64 string")
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise FetchFailed("fetch failed: the body must be a base64 string") from None


def _translate(exc: Exception) -> FetchFailed:
    """The one place where a foreign failure of a plain fetch becomes ``FetchFailed``."""
    causes = list(_cause_chain(exc))
    if isinstance(exc, TimeoutError | httpx.TimeoutException):
        message = TIMED_OUT
    elif isinstance(exc, BodyTooLarge):
        message = TOO_LARGE
    elif isinstance(exc, UnsupportedContentEncoding):
        message = BAD_ENCODING
    elif isinstance(exc, NetworkRefused | ResolutionFailed):
        message = UNREACHABLE
    elif any(isinstance(c, ssl.SSLCertVerificationError) for c in causes):
        message = TLS_UNVERIFIED
    elif any(isinstance(c, ssl.SSLError) for c in causes):
        message = TLS_FAILED
    elif isinstance(exc, httpx.ConnectError):
        message = CONNECT_FAILED
    elif isinstance(exc, httpx.TransportError):
        message = CONNECTION_FAILED
    else:
        message = FAILED
    return FetchFailed(message)


def _cause_chain(exc: BaseException) -> Iterator[BaseException]:
    # Follows __context__ too: httpx and httpcore raise some errors `from None`.
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__
