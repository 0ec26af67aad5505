"""``webFetch.fetchText``: one bounded GET for UTF-8 text, failing with the contract's codes."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Mapping
from typing import Any

import httpx

from ._errors import CapabilityError, web_fetch_error
from ._limits import (
    DEFAULT_WEB_FETCH_TIMEOUT_MS,
    MAX_WEB_FETCH_RESPONSE_BYTES,
    MAX_WEB_FETCH_TIMEOUT_MS,
)
from ._network import (
    BodyTooLarge,
    InvalidURL,
    NetworkPolicy,
    SafeTransport,
    parse_http_url,
    read_body,
)

__all__ = [
    "ACCEPT_BY_FORMAT",
    "BROWSER_USER_AGENT",
    "MAX_WEB_FETCH_REDIRECTS",
    "PLAIN_USER_AGENT",
    "WebFetch",
]

ACCEPT_BY_FORMAT: Mapping[str, str] = {
    "markdown": (
        "text/markdown;q=1.0, text/x-markdown;q=0.9, text/plain;q=0.8, text/html;q=0.7, */*;q=0.1"
    ),
    "text": (
        "text/plain;q=1.0, text/markdown;q=0.9, text/x-markdown;q=0.8, text/html;q=0.7, */*;q=0.1"
    ),
    "html": (
        "text/html;q=1.0, application/xhtml+xml;q=0.9, text/plain;q=0.8, text/markdown;q=0.7, "
        "*/*;q=0.1"
    ),
}
"""The ``Accept`` header sent for each ``WebFetchFormat``."""

BROWSER_USER_AGENT = (
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) "
    "Chrome/131.0.0.0 Safari/537.36"
)
"""The first request's ``User-Agent``."""

PLAIN_USER_AGENT = "worker-host"
"""The ``User-Agent`` of the one retry after a Cloudflare challenge."""

MAX_WEB_FETCH_REDIRECTS = 10
"""Redirects followed per attempt; one more fails with ``request_failed``."""

_REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
_TEXTUAL_APPLICATION_TYPES = frozenset(
    {"application/json", "application/xml", "application/javascript", "application/x-javascript"}
)


class WebFetch:
    """The host side of ``context.webFetch``, connecting only where ``policy`` allows.

    Building one loads the policy's TLS trust (a bad ``ca_bundle`` raises
    ``OSError`` here, for the operator). Each call uses its own connections and
    keeps no state (no cookies, no cache), so one instance can serve every
    session concurrently.
    """

    def __init__(self, policy: NetworkPolicy = NetworkPolicy()) -> None:  # noqa: B008  # frozen
        self._policy = policy
        self._tls = policy.tls_context()

    async def fetch_text(self, request: Mapping[str, Any]) -> dict[str, Any]:
        """Send one ``GET`` for ``request["url"]`` and return the body as UTF-8 text.

        ``request`` is the guest's untrusted JSON: ``url``, ``format``
        (``markdown``, ``text`` or ``html``; it only picks the ``Accept``
        header) and optionally ``timeoutMs``; other keys are ignored. Returns
        ``{"content", "contentType", "byteLength"}``: the body decoded as UTF-8
        (a leading BOM dropped), the raw ``Content-Type`` (``""`` when absent)
        and the body's size in bytes (BOM included).

        Redirects (301, 302, 303, 307, 308) are followed, at most
        ``MAX_WEB_FETCH_REDIRECTS``, each target checked by the URL rules and the
        network policy. A ``403`` with ``cf-mitigated: challenge`` is retried
        once with ``PLAIN_USER_AGENT``. The timeout covers everything, body and
        retry included.

        Raises ``CapabilityError`` (tag ``WebFetchError``) with ``invalid_url``,
        ``invalid_timeout``, ``request_failed`` (also for a missing or unknown
        ``format``, a refused or malformed redirect, too many redirects, a
        refused destination, a content coding other than gzip or deflate),
        ``timed_out``, ``http_status``, ``too_large``,
        ``unsupported_content_type`` or ``invalid_utf8``.
        """
        url, accept, timeout_seconds = _parse_request(request)
        try:
            async with asyncio.timeout(timeout_seconds):
                return await self._fetch(url, accept)
        except CapabilityError:
            raise
        except Exception as exc:
            raise _translate(exc) from exc

    async def _fetch(self, url: httpx.URL, accept: str) -> dict[str, Any]:
        # The transport directly, not an httpx client: no cookie jar, and no
        # redirect bookkeeping that would parse a Location before we check it.
        async with self._policy.transport(tls_context=self._tls) as transport:
            response = await _get(transport, url, _headers(accept, BROWSER_USER_AGENT))
            if _is_challenge(response):
                await response.aclose()
                response = await _get(transport, url, _headers(accept, PLAIN_USER_AGENT))
            try:
                return await _read_text(response)
            finally:
                await response.aclose()


def _parse_request(request: Mapping[str, Any]) -> tuple[httpx.URL, str, float]:
    if not isinstance(request, Mapping):
        raise web_fetch_error("invalid_url")
    try:
        url = parse_http_url(request.get("url"))
    except InvalidURL:
        raise web_fetch_error("invalid_url") from None
    format_ = request.get("format")
    accept = ACCEPT_BY_FORMAT.get(format_) if isinstance(format_, str) else None
    if accept is None:
        raise web_fetch_error("request_failed")
    if "timeoutMs" not in request:
        return url, accept, DEFAULT_WEB_FETCH_TIMEOUT_MS / 1000
    return url, accept, _timeout_ms(request["timeoutMs"]) / 1000


def _timeout_ms(value: object) -> int:
    # JSON numbers: 1000 and 1000.0 are the same JavaScript number.
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise web_fetch_error("invalid_timeout")
    if isinstance(value, float):
        if not math.isfinite(value) or not value.is_integer():
            raise web_fetch_error("invalid_timeout")
        value = int(value)
    if not 1 <= value <= MAX_WEB_FETCH_TIMEOUT_MS:
        raise web_fetch_error("invalid_timeout")
    return value


def _headers(accept: str, user_agent: str) -> dict[str, str]:
    return {
        "User-Agent": user_agent,
        "Accept": accept,
        "Accept-Language": "en-US,en;q=0.9",
        # The cap counts decoded bytes either way; asking for none keeps the
        # wire size and the decoded size the same for honest servers.
        "Accept-Encoding": "identity",
    }


async def _get(transport: SafeTransport, url: httpx.URL, headers: dict[str, str]) -> httpx.Response:
    """Follow redirects by hand; the caller closes the returned streaming response."""
    current = url
    for hop in range(MAX_WEB_FETCH_REDIRECTS + 1):
        response = await transport.handle_async_request(
            httpx.Request("GET", current, headers=headers)
        )
        locations = response.headers.get_list("location")
        if response.status_code not in _REDIRECT_STATUSES or not locations:
            return response
        await response.aclose()
        if hop == MAX_WEB_FETCH_REDIRECTS or len(locations) != 1:
            break
        try:
            current = parse_http_url(str(current.join(locations[0])))
        except (InvalidURL, httpx.InvalidURL):
            break
    raise web_fetch_error("request_failed")


def _is_challenge(response: httpx.Response) -> bool:
    return response.status_code == 403 and any(
        value.strip().lower() == "challenge" for value in response.headers.get_list("cf-mitigated")
    )


async def _read_text(response: httpx.Response) -> dict[str, Any]:
    if not response.is_success:
        raise web_fetch_error("http_status")
    content_type = _checked_content_type(response)
    body = await read_body(response, MAX_WEB_FETCH_RESPONSE_BYTES)
    try:
        content = body.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise web_fetch_error("invalid_utf8") from None
    return {"content": content, "contentType": content_type, "byteLength": len(body)}


def _checked_content_type(response: httpx.Response) -> str:
    """The raw ``Content-Type`` ("" when absent), if it names a textual type.

    The ``charset`` parameter is not consulted: the body must be UTF-8 whatever
    the label says, and is refused only if its bytes are not.
    """
    values = response.headers.get_list("content-type")
    if not values:
        return ""
    if any(value != values[0] for value in values):
        raise web_fetch_error("unsupported_content_type")  # conflicting headers
    raw = values[0]
    if not raw.strip():
        return raw
    essence = raw.split(";", 1)[0].strip().lower()
    kind, slash, subtype = essence.partition("/")
    textual = bool(slash and kind and subtype and "/" not in subtype) and (
        kind == "text"
        or essence in _TEXTUAL_APPLICATION_TYPES
        or subtype.endswith(("+json", "+xml"))
    )
    if not textual:
        raise web_fetch_error("unsupported_content_type")
    return raw


def _translate(exc: Exception) -> CapabilityError:
    """The one place where a foreign failure of a web fetch becomes a contract code."""
    if isinstance(exc, TimeoutError | httpx.TimeoutException):
        return web_fetch_error("timed_out")
    if isinstance(exc, BodyTooLarge):
        return web_fetch_error("too_large")
    # DNS, connection, TLS, protocol, a refused destination, an unusable
    # content coding (UnsupportedContentEncoding), anything else.
    return web_fetch_error("request_failed")
