"""Fetching a bundle over HTTPS with limits, redirect checks and an integrity check."""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import ssl
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import httpx

from ._digest import normalize_sha256, sha256_hex
from ._errors import BundleLoaderError
from ._limits import FetchLimits
from ._trust import tls_context
from ._urls import check_bundle_url

_DEFAULT_LIMITS = FetchLimits()
# Ask for the file as stored: a compressed body would make the size cap apply
# to the wire bytes and let a small response inflate in memory.
_REQUEST_HEADERS = {"Accept": "*/*", "Accept-Encoding": "identity"}


@dataclass(frozen=True)
class FetchedBundle:
    """The bytes of a bundle and where they came from.

    ``url`` is the URL as requested, ``final_url`` the one that answered after
    redirects, ``sha256`` the lowercase hex digest of ``data``. ``data`` is
    left out of ``repr``.
    """

    url: str
    final_url: str
    data: bytes = field(repr=False)  # can be megabytes; keep it out of logs
    sha256: str


TransportFactory = Callable[[ssl.SSLContext], httpx.AsyncBaseTransport]


async def fetch_bundle(
    url: str,
    *,
    limits: FetchLimits = _DEFAULT_LIMITS,
    allow_http_loopback: bool = False,
    ca_bundle: str | os.PathLike[str] | None = None,
    expected_sha256: str | None = None,
    transport: TransportFactory | None = None,
) -> FetchedBundle:
    """Fetch the bundle at ``url`` with one ``GET`` and return its bytes and digest.

    TLS is always verified (see ``ca_bundle`` and ``SSL_CERT_FILE`` below).
    Redirects (301, 302, 303, 307, 308) are followed by hand, at most
    ``limits.max_redirects`` of them, and every target must pass
    ``check_bundle_url`` with the same ``allow_http_loopback``. The body may be
    at most ``limits.max_bytes``; the whole call must finish within
    ``limits.timeout_seconds``. Trust: exactly the PEM file ``ca_bundle`` if
    given, else the file in ``SSL_CERT_FILE`` if set, else certifi's bundle.
    Proxy and .netrc settings in the environment are ignored. ``transport``,
    when given, makes the connections (given the TLS context to verify with):
    a caller's network policy, such as one refusing private addresses.

    Failure codes: ``invalid_url`` (the URL or a redirect target breaks a
    rule), ``invalid_sha256`` (``expected_sha256`` is malformed),
    ``request_failed`` (DNS, connection, TLS, CA file, protocol, too many
    redirects), ``timed_out``, ``http_status`` (final status not 2xx),
    ``too_large`` (declared or streamed body over the cap) and
    ``integrity_mismatch`` (digest differs from ``expected_sha256``).
    """
    check_bundle_url(url, allow_http_loopback=allow_http_loopback)
    expected = None if expected_sha256 is None else normalize_sha256(expected_sha256)
    final_url, data = await fetch_checked_url(url, limits, allow_http_loopback, ca_bundle,
                                              transport=transport)
    digest = sha256_hex(data)
    if expected is not None and digest != expected:
        raise BundleLoaderError(
            "integrity_mismatch", f"bundle sha256 is {digest}, expected {expected}"
        )
    return FetchedBundle(url=url, final_url=final_url, data=data, sha256=digest)


async def fetch_checked_url(
    url: str,
    limits: FetchLimits,
    allow_http_loopback: bool,
    ca_bundle: str | os.PathLike[str] | None,
    *,
    noun: str = "bundle",
    not_found: BundleLoaderError | None = None,
    transport: TransportFactory | None = None,
) -> tuple[str, bytes]:
    """The shared fetch behind ``fetch_bundle``: return the final URL and the body.

    The caller has already passed ``url`` through ``check_bundle_url``. TLS,
    redirects, limits and error translation are as ``fetch_bundle`` documents;
    ``noun`` names the file in a ``too_large`` message, and ``not_found``, if
    given, is raised instead of ``http_status`` when the final status is 404.
    """
    context = tls_context(ca_bundle)
    with _translated_errors(limits):
        return await _download(url, limits, allow_http_loopback, context, noun, not_found,
                               None if transport is None else transport(context))


async def _download(
    url: str,
    limits: FetchLimits,
    allow_http_loopback: bool,
    context: ssl.SSLContext,
    noun: str,
    not_found: BundleLoaderError | None,
    transport: httpx.AsyncBaseTransport | None,
) -> tuple[str, bytes]:
    async with httpx.AsyncClient(
        transport=transport,
        verify=context,
        trust_env=False,
        follow_redirects=False,
        timeout=httpx.Timeout(limits.timeout_seconds),
        headers=_REQUEST_HEADERS,
    ) as client:
        async with asyncio.timeout(limits.timeout_seconds):
            current = url
            for hop in range(limits.max_redirects + 1):
                response = await client.send(client.build_request("GET", current), stream=True)
                try:
                    if response.has_redirect_location:
                        if hop == limits.max_redirects:
                            break
                        current = _redirect_target(response, allow_http_loopback)
                        continue
                    if response.status_code == 404 and not_found is not None:
                        raise not_found
                    if not response.is_success:
                        raise BundleLoaderError(
                            "http_status",
                            f"the server answered with HTTP status {response.status_code}",
                        )
                    return current, await _read_capped(response, limits.max_bytes, noun)
                finally:
                    await response.aclose()
    raise BundleLoaderError(
        "request_failed", f"too many redirects (the limit is {limits.max_redirects})"
    )


def _redirect_target(response: httpx.Response, allow_http_loopback: bool) -> str:
    # A Location that httpx cannot parse never gets here: httpx raises
    # RemoteProtocolError from InvalidURL while sending, and _translate
    # reports that as a refused redirect.
    target = str(response.url.join(response.headers["location"]))
    try:
        return check_bundle_url(target, allow_http_loopback=allow_http_loopback)
    except BundleLoaderError as err:
        raise BundleLoaderError("invalid_url", f"redirect refused: {err.message}") from err


async def _read_capped(response: httpx.Response, max_bytes: int, noun: str) -> bytes:
    """The body's exact bytes, refused past `max_bytes` while streaming.

    The request asks for `identity`; a server that compresses anyway is
    refused rather than decoded, because decoding (stacked codings
    included) could expand a few bytes into gigabytes before any cap.
    """
    encoding = response.headers.get("content-encoding", "identity").strip().lower()
    if encoding not in ("", "identity"):
        raise BundleLoaderError(
            "request_failed", f"the server sent a compressed {noun}, which is not accepted"
        )
    declared = response.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > max_bytes:
        raise _too_large(max_bytes, noun)
    body = bytearray()
    async for chunk in response.aiter_raw():
        body += chunk
        if len(body) > max_bytes:
            raise _too_large(max_bytes, noun)
    return bytes(body)


def _too_large(max_bytes: int, noun: str) -> BundleLoaderError:
    return BundleLoaderError(
        "too_large", f"the {noun} is larger than the limit of {max_bytes} bytes"
    )


@contextlib.contextmanager
def _translated_errors(limits: FetchLimits) -> Iterator[None]:
    """The one place where foreign exceptions from a fetch become ``BundleLoaderError``."""
    try:
        yield
    except BundleLoaderError:
        raise
    except Exception as exc:
        raise _translate(exc, limits) from exc


def _translate(exc: Exception, limits: FetchLimits) -> BundleLoaderError:
    if isinstance(exc, (TimeoutError, httpx.TimeoutException)):
        return BundleLoaderError(
            "timed_out",
            f"the request did not finish within the {limits.timeout_seconds:g}-second limit",
        )
    causes = list(_cause_chain(exc))
    # The requested URL already parsed in check_bundle_url, so an unparsable
    # URL met during the fetch can only be a redirect's Location.
    if any(isinstance(c, httpx.InvalidURL) for c in causes):
        return BundleLoaderError("invalid_url", "redirect refused: URL is not well-formed")
    if any(isinstance(c, ssl.SSLCertVerificationError) for c in causes):
        message = "the server's TLS certificate could not be verified"
    elif any(isinstance(c, ssl.SSLError) for c in causes):
        message = "the TLS connection to the server failed"
    elif any(isinstance(c, socket.gaierror) for c in causes):
        message = "could not resolve the server's host name"
    elif isinstance(exc, httpx.ConnectError):
        message = "could not connect to the server"
    elif isinstance(exc, httpx.TransportError):
        message = "the connection to the server failed"
    else:
        message = "the request failed"
    return BundleLoaderError("request_failed", message)


def _cause_chain(exc: BaseException) -> Iterator[BaseException]:
    # Follows __context__ too: httpx raises some errors `from None`.
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__
