"""Where host capabilities may connect: a network policy and a transport that enforces it.

``NetworkPolicy`` classifies addresses (public, loopback, private) and refuses
everything but public unicast unless the operator opts in. ``SafeTransport`` is
an httpx transport that resolves each host name itself, checks every address
the name resolved to, and connects to exactly the address it checked, so DNS
rebinding between the check and the connect cannot happen. TLS keeps the
original host name for SNI and certificate checks, and the ``Host`` header is
the URL's. Because the check happens on every new connection, every redirect
hop is checked too, whoever follows it.

``parse_http_url`` holds the URL rules both fetches share, and ``read_body``
reads a streamed response under a byte cap, decoding a ``gzip``/``deflate``
content coding in bounded pieces.
"""

from __future__ import annotations

import asyncio
import ipaddress
import os
import re
import socket
import ssl
import urllib.parse
import zlib
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal

import httpcore
import httpx

__all__ = [
    "AddressKind",
    "BodyTooLarge",
    "IPAddress",
    "InvalidURL",
    "NetworkPolicy",
    "NetworkRefused",
    "ResolutionFailed",
    "Resolver",
    "SafeTransport",
    "UnsupportedContentEncoding",
    "classify_address",
    "parse_http_url",
    "read_body",
    "system_resolver",
]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
AddressKind = Literal["public", "loopback", "private"]
Resolver = Callable[[str, int], Awaitable[Sequence[str]]]
"""``(host, port) -> addresses``: IP address strings for a host name."""

_V4 = ipaddress.IPv4Network
_V6 = ipaddress.IPv6Network

# 0.0.0.0/8 counts as loopback: on Linux a connect to 0.0.0.0 reaches this
# host, so allowing private ranges must not open it.
_V4_LOOPBACK = (_V4("127.0.0.0/8"), _V4("0.0.0.0/8"))
# Everything that is not ordinary public unicast (IANA special-purpose
# registry, plus multicast and the reserved block). Anycast entries inside
# 192.0.0.0/24 are refused too: nothing a plugin needs lives there.
_V4_PRIVATE = (
    _V4("10.0.0.0/8"),
    _V4("100.64.0.0/10"),  # carrier-grade NAT
    _V4("169.254.0.0/16"),  # link-local, including cloud metadata 169.254.169.254
    _V4("172.16.0.0/12"),
    _V4("192.0.0.0/24"),  # IETF protocol assignments
    _V4("192.0.2.0/24"),  # documentation
    _V4("192.88.99.0/24"),  # 6to4 relay anycast
    _V4("192.168.0.0/16"),
    _V4("198.18.0.0/15"),  # benchmarking
    _V4("198.51.100.0/24"),  # documentation
    _V4("203.0.113.0/24"),  # documentation
    _V4("224.0.0.0/4"),  # multicast
    _V4("240.0.0.0/4"),  # reserved, including broadcast 255.255.255.255
)
_V6_GLOBAL_UNICAST = _V6("2000::/3")
_V6_PRIVATE_IN_GLOBAL = (
    _V6("2001::/23"),  # IETF protocol assignments, including Teredo 2001::/32
    _V6("2001:db8::/32"),  # documentation
    _V6("3fff::/20"),  # documentation
)
# Forms that carry an IPv4 address: judged by the address they carry.
_V6_IPV4_COMPATIBLE = _V6("::/96")
_V6_NAT64 = _V6("64:ff9b::/96")
_V6_6TO4 = _V6("2002::/16")

_LOOPBACK_NAMES = ("localhost",)  # and any name under .localhost (RFC 6761)
# A host name as httpx leaves it (lowercase, IDNA-encoded): no percent-escapes,
# no zone ids, nothing a resolver might read differently from the URL parser.
_HOST_NAME = re.compile(r"[a-z0-9_-]+(?:\.[a-z0-9_-]+)*\.?")
_UNSAFE_URL_CHARS = re.compile(r"[\x00-\x20\x7f\\]")


class InvalidURL(ValueError):
    """A URL breaks one of the rules of ``parse_http_url``; the message names the rule."""


def parse_http_url(value: object) -> httpx.URL:
    """Parse an absolute ``http:``/``https:`` URL that a capability may fetch.

    The URL must be a string without whitespace, control characters or
    backslashes (refused, not cleaned up), parse, use ``http`` or ``https``,
    name a host (a DNS name or an IP literal, IPv6 without a zone id), use a
    port in 1-65535 if it has one, and carry no credentials (any ``@`` in the
    authority, even an empty ``user@``). A fragment is allowed and never sent.
    Raises ``InvalidURL``; its message never repeats the URL.
    """
    if not isinstance(value, str):
        raise InvalidURL("URL must be a string")
    if _UNSAFE_URL_CHARS.search(value):
        raise InvalidURL("URL must not contain whitespace, control characters or backslashes")
    try:
        url = httpx.URL(value)
        authority = urllib.parse.urlsplit(value).netloc
    except (httpx.InvalidURL, ValueError):
        raise InvalidURL("URL is not well-formed") from None
    if url.scheme not in ("http", "https"):
        raise InvalidURL("URL must use http or https")
    host = url.raw_host.decode("ascii")  # IDNA-encoded, as it is resolved and sent
    if not host:
        raise InvalidURL("URL must include a host")
    if "@" in authority or url.userinfo:
        raise InvalidURL("URL must not contain credentials")
    if ":" in host:
        if "%" in host or _ip_literal(host) is None:
            raise InvalidURL("URL host is not well-formed")
    elif not _HOST_NAME.fullmatch(host):
        raise InvalidURL("URL host is not well-formed")
    if url.port is not None and not 1 <= url.port <= 65535:
        raise InvalidURL("URL port must be between 1 and 65535")
    return url


def classify_address(address: IPAddress | str) -> AddressKind:
    """Classify one IP address as ``public``, ``loopback`` or ``private``.

    ``loopback`` is 127.0.0.0/8, ``::1`` and the addresses that reach this host
    when connected to (0.0.0.0/8 and ``::``). ``private`` is everything else
    that is not public unicast: RFC 1918, carrier-grade NAT, link-local
    (including the cloud metadata address 169.254.169.254 and fe80::/10),
    unique-local fc00::/7, site-local, multicast, documentation, benchmarking
    and reserved ranges, and any IPv6 address outside 2000::/3. IPv6 forms that
    embed an IPv4 address (IPv4-mapped, IPv4-compatible, NAT64 64:ff9b::/96,
    6to4 2002::/16) are judged by the embedded address. A string that is not an
    IP address raises ``ValueError``.
    """
    ip = ipaddress.ip_address(address) if isinstance(address, str) else address
    if isinstance(ip, ipaddress.IPv4Address):
        return _classify_v4(ip)
    if ip.ipv4_mapped is not None:
        return _classify_v4(ip.ipv4_mapped)
    if ip.is_unspecified or ip.is_loopback:
        return "loopback"
    if ip in _V6_IPV4_COMPATIBLE or ip in _V6_NAT64:
        return _classify_v4(ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF))
    if ip.sixtofour is not None:
        return _classify_v4(ip.sixtofour)
    if ip not in _V6_GLOBAL_UNICAST or any(ip in net for net in _V6_PRIVATE_IN_GLOBAL):
        return "private"
    return "public"


def _classify_v4(ip: ipaddress.IPv4Address) -> AddressKind:
    if any(ip in net for net in _V4_LOOPBACK):
        return "loopback"
    if any(ip in net for net in _V4_PRIVATE):
        return "private"
    return "public"


def _is_loopback_name(host: str) -> bool:
    name = host.lower().removesuffix(".")
    return name in _LOOPBACK_NAMES or name.endswith(".localhost")


class NetworkRefused(httpx.ConnectError):
    """The network policy refused a destination; no connection was attempted.

    A ``httpx.ConnectError`` so that any httpx caller treats it as a failed
    connection. The message names the rule, never the host or the address.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(f"the network policy refused the destination: {reason}")
        self.reason = reason


class ResolutionFailed(httpx.ConnectError):
    """A host name did not resolve to any usable address. The message is safe."""

    def __init__(self) -> None:
        super().__init__("the host name could not be resolved")


async def system_resolver(host: str, port: int) -> Sequence[str]:
    """Resolve ``host`` with the system's ``getaddrinfo``, run off the event loop."""
    loop = asyncio.get_running_loop()
    infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP)
    return [str(info[4][0]) for info in infos]


@dataclass(frozen=True)
class NetworkPolicy:
    """Which destinations host capabilities may connect to.

    By default only public unicast addresses are allowed. ``allow_loopback``
    opens 127.0.0.0/8, ``::1``, 0.0.0.0/8, ``::`` and the names ``localhost``
    and ``*.localhost``; ``allow_private`` opens every other non-public range
    (see ``classify_address``). ``allowed_ports``, when given, is the only set
    of ports allowed. ``ca_bundle`` is a PEM file trusted in addition to the
    default roots (certifi); TLS verification is always on. ``resolver`` turns a
    host name into addresses (default: ``system_resolver``); tests inject one.
    """

    allow_loopback: bool = False
    allow_private: bool = False
    allowed_ports: frozenset[int] | None = None
    ca_bundle: str | os.PathLike[str] | None = None
    resolver: Resolver | None = field(default=None, compare=False, repr=False)

    def allows_address(self, address: IPAddress | str) -> bool:
        """Whether a connection to ``address`` is allowed (ports aside)."""
        kind = classify_address(address)
        if kind == "loopback":
            return self.allow_loopback
        if kind == "private":
            return self.allow_private
        return True

    def allows_port(self, port: int) -> bool:
        """Whether ``port`` is allowed (1-65535, and in ``allowed_ports`` if set)."""
        if not 1 <= port <= 65535:
            return False
        return self.allowed_ports is None or port in self.allowed_ports

    async def check(self, host: str, port: int) -> tuple[IPAddress, ...]:
        """Resolve ``host`` and return the addresses a connection may use, in order.

        An IP literal is not resolved. ``localhost`` and ``*.localhost`` are
        refused without resolving unless loopback is allowed. Every address the
        name resolves to must be allowed, or the whole host is refused: a name
        that answers one public and one private address is refused.

        Raises ``NetworkRefused`` (port, loopback or private address) or
        ``ResolutionFailed`` (the resolver failed or returned nothing usable).
        """
        if not self.allows_port(port):
            raise NetworkRefused("port not allowed")
        literal = _ip_literal(host)
        if literal is not None:
            addresses: tuple[IPAddress, ...] = (literal,)
        else:
            if _is_loopback_name(host) and not self.allow_loopback:
                raise NetworkRefused("loopback address")
            addresses = await self._resolve(host, port)
        for address in addresses:
            if not self.allows_address(address):
                raise NetworkRefused(f"{classify_address(address)} address")
        return addresses

    def tls_context(self) -> ssl.SSLContext:
        """A verifying client context: certifi's roots plus ``ca_bundle`` if set.

        A ``ca_bundle`` that cannot be read or parsed raises ``OSError`` or
        ``ssl.SSLError``: a host configuration error, meant for the operator.
        """
        context = httpx.create_ssl_context(verify=True, trust_env=False)
        if self.ca_bundle is not None:
            context.load_verify_locations(cafile=os.fspath(self.ca_bundle))
        return context

    def transport(
        self,
        *,
        tls_context: ssl.SSLContext | None = None,
        network_backend: httpcore.AsyncNetworkBackend | None = None,
    ) -> SafeTransport:
        """An httpx transport that connects only where this policy allows.

        ``tls_context`` defaults to a fresh ``tls_context()``; pass one to share
        it between transports. ``network_backend`` is what finally opens the
        TCP connection (default: httpcore's anyio backend); it only ever
        receives checked IP addresses, never a host name.
        """
        return SafeTransport(
            self,
            tls_context=self.tls_context() if tls_context is None else tls_context,
            network_backend=network_backend,
        )

    async def _resolve(self, host: str, port: int) -> tuple[IPAddress, ...]:
        resolver = self.resolver or system_resolver
        try:
            answers = await resolver(host, port)
        except (OSError, UnicodeError) as exc:
            raise ResolutionFailed() from exc
        addresses: list[IPAddress] = []
        for answer in answers:
            try:
                address = ipaddress.ip_address(answer)
            except ValueError as exc:
                raise ResolutionFailed() from exc
            if address not in addresses:
                addresses.append(address)
        if not addresses:
            raise ResolutionFailed()
        return tuple(addresses)


def _ip_literal(host: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(host.removeprefix("[").removesuffix("]"))
    except ValueError:
        return None


class _PolicyBackend(httpcore.AsyncNetworkBackend):
    """Resolves and checks the host itself, then connects the inner backend to the IP."""

    def __init__(self, policy: NetworkPolicy, inner: httpcore.AsyncNetworkBackend) -> None:
        self._policy = policy
        self._inner = inner

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        try:
            async with asyncio.timeout(timeout):
                addresses = await self._policy.check(host, port)
        except TimeoutError as exc:
            raise httpcore.ConnectTimeout("resolving the host name timed out") from exc
        failure: Exception | None = None
        for address in addresses:
            try:
                # The checked address itself: the OS never sees the name, so
                # it cannot look it up again and get another answer.
                return await self._inner.connect_tcp(
                    str(address),
                    port,
                    timeout=timeout,
                    local_address=local_address,
                    socket_options=socket_options,
                )
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                failure = exc
        assert failure is not None  # check() never returns an empty tuple
        raise failure

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        raise NetworkRefused("unix sockets are not allowed")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


# Most specific first: the first match wins.
_HTTPCORE_ERRORS: tuple[tuple[type[Exception], type[httpx.TransportError]], ...] = (
    (httpcore.ConnectTimeout, httpx.ConnectTimeout),
    (httpcore.ReadTimeout, httpx.ReadTimeout),
    (httpcore.WriteTimeout, httpx.WriteTimeout),
    (httpcore.PoolTimeout, httpx.PoolTimeout),
    (httpcore.TimeoutException, httpx.TimeoutException),
    (httpcore.ConnectError, httpx.ConnectError),
    (httpcore.ReadError, httpx.ReadError),
    (httpcore.WriteError, httpx.WriteError),
    (httpcore.NetworkError, httpx.NetworkError),
    (httpcore.UnsupportedProtocol, httpx.UnsupportedProtocol),
    (httpcore.LocalProtocolError, httpx.LocalProtocolError),
    (httpcore.RemoteProtocolError, httpx.RemoteProtocolError),
    (httpcore.ProtocolError, httpx.ProtocolError),
)


def _as_httpx_error(exc: Exception) -> Exception:
    for source, target in _HTTPCORE_ERRORS:
        if isinstance(exc, source):
            mapped = target(str(exc))
            mapped.__cause__ = exc
            return mapped
    return exc


class _ResponseStream(httpx.AsyncByteStream):
    def __init__(self, response: httpcore.Response) -> None:
        self._response = response

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for part in self._response.aiter_stream():
                yield part
        except Exception as exc:
            mapped = _as_httpx_error(exc)
            if mapped is exc:
                raise
            raise mapped from exc

    async def aclose(self) -> None:
        await self._response.aclose()


class SafeTransport(httpx.AsyncBaseTransport):
    """An HTTP/1.1 transport whose every connection is checked by a ``NetworkPolicy``.

    No proxies, no environment settings, no connection retries. Refused
    destinations raise ``NetworkRefused``, unresolvable names
    ``ResolutionFailed`` (both ``httpx.ConnectError``); other failures are the
    usual httpx exceptions. Build one with ``NetworkPolicy.transport()`` and
    close it (``aclose`` or ``async with``), as httpx clients do.
    """

    def __init__(
        self,
        policy: NetworkPolicy,
        *,
        tls_context: ssl.SSLContext,
        network_backend: httpcore.AsyncNetworkBackend | None = None,
    ) -> None:
        inner = network_backend if network_backend is not None else httpcore.AnyIOBackend()
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=tls_context,
            http1=True,
            http2=False,
            retries=0,
            network_backend=_PolicyBackend(policy, inner),
        )

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        assert isinstance(request.stream, httpx.AsyncByteStream)
        core_request = httpcore.Request(
            method=request.method,
            url=httpcore.URL(
                scheme=request.url.raw_scheme,
                host=request.url.raw_host,
                port=request.url.port,
                target=request.url.raw_path,
            ),
            headers=request.headers.raw,
            content=request.stream,
            extensions=request.extensions,
        )
        try:
            response = await self._pool.handle_async_request(core_request)
        except Exception as exc:
            mapped = _as_httpx_error(exc)
            if mapped is exc:
                raise
            raise mapped from exc
        return httpx.Response(
            status_code=response.status,
            headers=response.headers,
            stream=_ResponseStream(response),
            extensions=response.extensions,
            request=request,
        )

    async def aclose(self) -> None:
        await self._pool.aclose()


class BodyTooLarge(Exception):
    """A response body, declared or read (after decoding), is over the cap."""


class UnsupportedContentEncoding(Exception):
    """A response uses a content coding other than identity, gzip or deflate."""


async def read_body(response: httpx.Response, max_bytes: int) -> bytes:
    """Read a streamed ``response`` body, at most ``max_bytes`` of it after decoding.

    A declared ``Content-Length`` over the cap fails before reading; otherwise
    reading stops as soon as the cap is passed. A ``gzip``, ``x-gzip`` or
    ``deflate`` content coding is decoded, never producing more than the cap
    plus one byte in memory, so a compression bomb fails early; any other
    coding raises ``UnsupportedContentEncoding`` before reading.
    """
    codings = [
        c.strip().lower()
        for value in response.headers.get_list("content-encoding")
        for c in value.split(",")
        if c.strip() and c.strip().lower() != "identity"
    ]
    if len(codings) > 1 or (codings and codings[0] not in _DECODERS):
        raise UnsupportedContentEncoding()
    declared = response.headers.get("content-length")
    if declared is not None and declared.strip().isdigit() and int(declared) > max_bytes:
        raise BodyTooLarge()
    decoder = _DECODERS[codings[0]]() if codings else None
    body = bytearray()
    async for raw in response.aiter_raw():
        if decoder is None:
            body += raw
        else:
            decoder.feed(raw, body, max_bytes + 1 - len(body))
        if len(body) > max_bytes:
            raise BodyTooLarge()
    if decoder is not None:
        decoder.finish(body, max_bytes + 1 - len(body))
        if len(body) > max_bytes:
            raise BodyTooLarge()
    return bytes(body)


class _ZlibDecoder:
    """Streaming decompression whose output per call is bounded by ``room``."""

    def __init__(self, wbits: int, *, raw_fallback: bool = False) -> None:
        self._inflate = zlib.decompressobj(wbits)
        self._raw_fallback = raw_fallback  # "deflate" is sometimes sent without zlib framing
        self._started = False

    def feed(self, data: bytes, out: bytearray, room: int) -> None:
        try:
            self._drain(data, out, room)
        except zlib.error:
            if not self._raw_fallback or self._started:
                raise
            self._inflate = zlib.decompressobj(-zlib.MAX_WBITS)
            self._raw_fallback = False
            self._drain(data, out, room)
        self._started = True

    def finish(self, out: bytearray, room: int) -> None:
        if room > 0:
            out += self._inflate.flush()[:room]

    def _drain(self, data: bytes, out: bytearray, room: int) -> None:
        while data and room > 0 and not self._inflate.eof:
            piece = self._inflate.decompress(data, room)
            out += piece
            room -= len(piece)
            data = self._inflate.unconsumed_tail


_DECODERS: dict[str, Callable[[], _ZlibDecoder]] = {
    "gzip": lambda: _ZlibDecoder(16 + zlib.MAX_WBITS),
    "x-gzip": lambda: _ZlibDecoder(16 + zlib.MAX_WBITS),
    "deflate": lambda: _ZlibDecoder(zlib.MAX_WBITS, raw_fallback=True),
}
