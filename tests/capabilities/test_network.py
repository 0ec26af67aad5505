"""NetworkPolicy and SafeTransport: address classes, resolution, rebinding, redirect hops.

The classification and check tests make no connection at all. The transport
tests run a guard backend that records every connection the transport asks
for and only ever opens real ones to loopback; a non-loopback request fails in
the guard, never on the network.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import ssl
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import TypeVar

import httpcore
import httpx
import pytest

from capabilities._network import (
    AddressKind,
    InvalidURL,
    NetworkPolicy,
    NetworkRefused,
    ResolutionFailed,
    classify_address,
    parse_http_url,
)
from tests.support.https_server import LoopbackServer, ThrowawayCA

T = TypeVar("T")

LOOPBACK = NetworkPolicy(allow_loopback=True)
PRIVATE = NetworkPolicy(allow_private=True)


def run(awaitable: Awaitable[T]) -> T:
    async def main() -> T:
        return await awaitable

    return asyncio.run(main())


class RecordingResolver:
    """Answers from a script, one answer per call (the last one repeats), and records calls."""

    def __init__(self, *answers: Sequence[str] | Exception) -> None:
        self._answers = list(answers)
        self.calls: list[tuple[str, int]] = []

    async def __call__(self, host: str, port: int) -> Sequence[str]:
        self.calls.append((host, port))
        answer = self._answers[min(len(self.calls), len(self._answers)) - 1]
        if isinstance(answer, Exception):
            raise answer
        return answer


async def numeric_resolver(host: str, port: int) -> Sequence[str]:
    """The system resolver restricted to numeric hosts: it can never send a DNS query."""
    infos = await asyncio.get_running_loop().getaddrinfo(
        host, port, type=socket.SOCK_STREAM, flags=socket.AI_NUMERICHOST
    )
    return [str(info[4][0]) for info in infos]


def must_not_resolve() -> Callable[[str, int], Awaitable[Sequence[str]]]:
    async def resolver(host: str, port: int) -> Sequence[str]:
        raise AssertionError(f"resolver called for {host!r}")

    return resolver


class GuardBackend(httpcore.AsyncNetworkBackend):
    """Records each connection asked for; opens real ones to loopback IPs only.

    A host name (rather than an IP) reaching it fails the test: the transport
    must hand over the address it checked.
    """

    def __init__(self) -> None:
        self.connects: list[tuple[str, int]] = []
        self._real = httpcore.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        self.connects.append((host, port))
        if not ipaddress.ip_address(host).is_loopback:
            raise httpcore.ConnectError("test guard: no connections off loopback")
        return await self._real.connect_tcp(
            host, port, timeout=timeout, local_address=local_address, socket_options=socket_options
        )

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        raise AssertionError("unix sockets are never used")

    async def sleep(self, seconds: float) -> None:
        await self._real.sleep(seconds)


async def get(
    policy: NetworkPolicy,
    url: str,
    guard: GuardBackend,
    *,
    tls: ssl.SSLContext | None = None,
    follow_redirects: bool = False,
) -> httpx.Response:
    transport = policy.transport(tls_context=tls, network_backend=guard)
    async with httpx.AsyncClient(
        transport=transport, trust_env=False, follow_redirects=follow_redirects
    ) as client:
        response = await client.get(url)
        await response.aread()
        return response


# -- classification: pure, no connections ---------------------------------------

CLASSIFICATION: list[tuple[str, AddressKind]] = [
    # IPv4 public
    ("8.8.8.8", "public"),
    ("1.1.1.1", "public"),
    ("93.184.216.34", "public"),
    ("172.32.0.1", "public"),
    ("100.128.0.1", "public"),
    ("223.255.255.255", "public"),
    # IPv4 loopback and "this host"
    ("127.0.0.1", "loopback"),
    ("127.255.255.254", "loopback"),
    ("0.0.0.0", "loopback"),
    ("0.1.2.3", "loopback"),
    # IPv4 private, link-local, metadata, CGNAT, special, multicast, reserved
    ("10.0.0.1", "private"),
    ("172.16.0.1", "private"),
    ("172.31.255.255", "private"),
    ("192.168.1.1", "private"),
    ("169.254.169.254", "private"),
    ("169.254.0.1", "private"),
    ("100.64.0.1", "private"),
    ("100.127.255.255", "private"),
    ("192.0.0.8", "private"),
    ("192.0.2.1", "private"),
    ("192.88.99.1", "private"),
    ("198.18.0.1", "private"),
    ("198.51.100.1", "private"),
    ("203.0.113.1", "private"),
    ("224.0.0.1", "private"),
    ("239.255.255.250", "private"),
    ("240.0.0.1", "private"),
    ("255.255.255.255", "private"),
    # IPv6 public
    ("2606:4700:4700::1111", "public"),
    ("2001:4860:4860::8888", "public"),
    # IPv6 loopback and unspecified
    ("::1", "loopback"),
    ("::", "loopback"),
    # IPv6 private, link-local, ULA, site-local, multicast, documentation, reserved
    ("fe80::1", "private"),
    ("fe80::1%2", "private"),
    ("fc00::1", "private"),
    ("fd00:ec2::254", "private"),  # AWS metadata over IPv6
    ("fec0::1", "private"),
    ("ff02::1", "private"),
    ("ff0e::1", "private"),
    ("2001:db8::1", "private"),
    ("2001::1", "private"),  # Teredo
    ("3fff::1", "private"),
    ("100::1", "private"),  # discard-only
    ("5f00::1", "private"),  # outside 2000::/3
    # IPv6 forms carrying an IPv4 address are judged by it
    ("::ffff:127.0.0.1", "loopback"),
    ("::ffff:7f00:1", "loopback"),
    ("::ffff:0.0.0.0", "loopback"),
    ("::ffff:169.254.169.254", "private"),
    ("::ffff:a9fe:a9fe", "private"),
    ("::ffff:10.0.0.1", "private"),
    ("::ffff:8.8.8.8", "public"),
    ("::127.0.0.1", "loopback"),  # IPv4-compatible
    ("::10.0.0.1", "private"),
    ("64:ff9b::127.0.0.1", "loopback"),  # NAT64
    ("64:ff9b::a9fe:a9fe", "private"),
    ("64:ff9b::8.8.8.8", "public"),
    ("2002:7f00:1::", "loopback"),  # 6to4
    ("2002:a9fe:a9fe::1", "private"),
    ("2002:808:808::1", "public"),
]


@pytest.mark.parametrize(("address", "kind"), CLASSIFICATION)
def test_address_classification(address: str, kind: AddressKind) -> None:
    assert classify_address(address) == kind
    assert classify_address(ipaddress.ip_address(address)) == kind


@pytest.mark.parametrize(("address", "kind"), CLASSIFICATION)
def test_each_class_is_allowed_only_by_its_own_switch(address: str, kind: AddressKind) -> None:
    allowed = {
        "default": NetworkPolicy().allows_address(address),
        "loopback": LOOPBACK.allows_address(address),
        "private": PRIVATE.allows_address(address),
        "both": NetworkPolicy(allow_loopback=True, allow_private=True).allows_address(address),
    }
    expected = {
        "public": {"default": True, "loopback": True, "private": True, "both": True},
        "loopback": {"default": False, "loopback": True, "private": False, "both": True},
        "private": {"default": False, "loopback": False, "private": True, "both": True},
    }[kind]
    assert allowed == expected


def test_classify_refuses_non_addresses() -> None:
    with pytest.raises(ValueError):
        classify_address("localhost")


# -- check(): resolution and refusal, still without connecting --------------------


@pytest.mark.parametrize(
    ("host", "address"),
    [
        ("2130706433", "127.0.0.1"),  # decimal
        ("0x7f000001", "127.0.0.1"),  # hex
        ("017700000001", "127.0.0.1"),  # octal
        ("0x7f.0.0.1", "127.0.0.1"),
        ("0177.0.0.1", "127.0.0.1"),
        ("127.1", "127.0.0.1"),  # short form
        ("0", "0.0.0.0"),
        ("0x0", "0.0.0.0"),
    ],
)
def test_loopback_spellings_as_the_resolver_sees_them(host: str, address: str) -> None:
    refused = NetworkPolicy(resolver=numeric_resolver)
    with pytest.raises(NetworkRefused) as caught:
        run(refused.check(host, 80))
    assert caught.value.reason == "loopback address"
    assert str(caught.value) == "the network policy refused the destination: loopback address"

    opted_in = NetworkPolicy(allow_loopback=True, resolver=numeric_resolver)
    assert run(opted_in.check(host, 80)) == (ipaddress.ip_address(address),)


@pytest.mark.parametrize(
    "host",
    ["2852039166", "0xa9fea9fe", "0xa9.0xfe.0xa9.0xfe", "0251.0376.0251.0376", "012.0.0.1"],
)
def test_metadata_and_private_spellings_are_refused(host: str) -> None:
    with pytest.raises(NetworkRefused) as caught:
        run(NetworkPolicy(resolver=numeric_resolver).check(host, 80))
    assert caught.value.reason == "private address"


def test_a_public_spelling_passes_the_check() -> None:
    policy = NetworkPolicy(resolver=numeric_resolver)
    assert run(policy.check("0x08080808", 443)) == (ipaddress.ip_address("8.8.8.8"),)


@pytest.mark.parametrize(
    ("host", "reason"),
    [
        ("127.0.0.1", "loopback address"),
        ("0.0.0.0", "loopback address"),
        ("::", "loopback address"),
        ("::1", "loopback address"),
        ("[::1]", "loopback address"),
        ("::ffff:127.0.0.1", "loopback address"),
        ("169.254.169.254", "private address"),
        ("[fe80::1]", "private address"),
        ("10.1.2.3", "private address"),
    ],
)
def test_ip_literals_are_checked_without_resolving(host: str, reason: str) -> None:
    policy = NetworkPolicy(resolver=must_not_resolve())
    with pytest.raises(NetworkRefused) as caught:
        run(policy.check(host, 80))
    assert caught.value.reason == reason
    assert host.strip("[]") not in str(caught.value)


@pytest.mark.parametrize("host", ["localhost", "LOCALHOST", "localhost.", "api.localhost"])
def test_localhost_names_are_refused_before_any_lookup(host: str) -> None:
    policy = NetworkPolicy(resolver=must_not_resolve())
    with pytest.raises(NetworkRefused) as caught:
        run(policy.check(host, 80))
    assert caught.value.reason == "loopback address"


def test_localhost_resolves_when_loopback_is_allowed() -> None:
    resolver = RecordingResolver(["127.0.0.1", "::1"])
    policy = NetworkPolicy(allow_loopback=True, resolver=resolver)
    assert run(policy.check("localhost", 8080)) == (
        ipaddress.ip_address("127.0.0.1"),
        ipaddress.ip_address("::1"),
    )
    assert resolver.calls == [("localhost", 8080)]


def test_a_name_resolving_to_loopback_is_refused() -> None:
    policy = NetworkPolicy(resolver=RecordingResolver(["127.0.0.1"]))
    with pytest.raises(NetworkRefused) as caught:
        run(policy.check("rebind.test", 80))
    assert caught.value.reason == "loopback address"


def test_every_resolved_address_must_be_allowed() -> None:
    policy = NetworkPolicy(resolver=RecordingResolver(["8.8.8.8", "10.0.0.1"]))
    with pytest.raises(NetworkRefused) as caught:
        run(policy.check("mixed.test", 443))
    assert caught.value.reason == "private address"


def test_allowed_answers_come_back_in_order_without_duplicates() -> None:
    policy = NetworkPolicy(resolver=RecordingResolver(["8.8.4.4", "8.8.8.8", "8.8.4.4"]))
    assert run(policy.check("dns.test", 443)) == (
        ipaddress.ip_address("8.8.4.4"),
        ipaddress.ip_address("8.8.8.8"),
    )


@pytest.mark.parametrize(
    "answer",
    [socket.gaierror(socket.EAI_NONAME, "Name or service not known"), [], ["not-an-address"]],
)
def test_unusable_resolutions_fail(answer: Sequence[str] | Exception) -> None:
    policy = NetworkPolicy(resolver=RecordingResolver(answer))
    with pytest.raises(ResolutionFailed) as caught:
        run(policy.check("nowhere.test", 80))
    assert str(caught.value) == "the host name could not be resolved"
    assert isinstance(caught.value, httpx.ConnectError)


def test_ports() -> None:
    policy = NetworkPolicy(allowed_ports=frozenset({443}))
    assert run(policy.check("8.8.8.8", 443)) == (ipaddress.ip_address("8.8.8.8"),)
    for port in (80, 0, 65536):
        with pytest.raises(NetworkRefused) as caught:
            run(policy.check("8.8.8.8", port))
        assert caught.value.reason == "port not allowed"
    assert not NetworkPolicy().allows_port(0)
    assert NetworkPolicy().allows_port(65535)


def test_policy_is_a_frozen_value_and_the_resolver_is_not_part_of_it() -> None:
    assert NetworkPolicy(resolver=numeric_resolver) == NetworkPolicy()
    assert "resolver" not in repr(NetworkPolicy(resolver=numeric_resolver))
    with pytest.raises(AttributeError):
        NetworkPolicy().allow_loopback = True  # type: ignore[misc]


# -- URL rules shared by both fetches ---------------------------------------------


@pytest.mark.parametrize(
    ("url", "normalized"),
    [
        ("https://Example.COM/a?b=1#frag", "https://example.com/a?b=1#frag"),
        ("http://bücher.example/", "http://xn--bcher-kva.example/"),
        ("http://[::1]:8080/", "http://[::1]:8080/"),
        ("http://a_b.example.", "http://a_b.example."),
        ("http://2130706433/", "http://2130706433/"),  # a name here; the resolver decides
    ],
)
def test_accepted_urls(url: str, normalized: str) -> None:
    assert str(parse_http_url(url)) == normalized


@pytest.mark.parametrize(
    ("url", "rule"),
    [
        (None, "URL must be a string"),
        ("http://x/a b", "URL must not contain whitespace, control characters or backslashes"),
        ("http://x\\@y/", "URL must not contain whitespace, control characters or backslashes"),
        ("http://[::1/", "URL is not well-formed"),
        ("http://127.000.0.1/", "URL is not well-formed"),
        ("ws://x/", "URL must use http or https"),
        ("//x/", "URL must use http or https"),
        ("http:///x", "URL must include a host"),
        ("http://@x/", "URL must not contain credentials"),
        ("http://u:p@x/", "URL must not contain credentials"),
        ("http://exa%20mple.com/", "URL host is not well-formed"),
        ("http://[fe80::1%25eth0]/", "URL host is not well-formed"),
        ("http://x:0/", "URL port must be between 1 and 65535"),
    ],
)
def test_refused_urls_name_the_rule(url: object, rule: str) -> None:
    with pytest.raises(InvalidURL) as caught:
        parse_http_url(url)
    assert str(caught.value) == rule


# -- the transport: connects to exactly what it checked ---------------------------


def test_dns_rebinding_cannot_redirect_the_connection() -> None:
    # Public at the first lookup, loopback at every later one.
    resolver = RecordingResolver(["93.184.216.34"], ["127.0.0.1"])
    policy = NetworkPolicy(resolver=resolver)
    guard = GuardBackend()

    # The connection goes to the address that was checked, and only the
    # transport looked the name up: the connector got an IP, not the name.
    with pytest.raises(httpx.ConnectError, match="test guard"):
        run(get(policy, "http://rebind.test:8080/", guard))
    assert guard.connects == [("93.184.216.34", 8080)]
    assert resolver.calls == [("rebind.test", 8080)]

    # The next lookup answers loopback: refused before any connection.
    with pytest.raises(NetworkRefused):
        run(get(policy, "http://rebind.test:8080/", guard))
    assert guard.connects == [("93.184.216.34", 8080)]
    assert resolver.calls == [("rebind.test", 8080)] * 2


def test_a_name_resolving_to_loopback_never_connects(http_server: LoopbackServer) -> None:
    http_server.serve("/", b"secret")
    guard = GuardBackend()
    policy = NetworkPolicy(resolver=RecordingResolver(["127.0.0.1"]))

    with pytest.raises(NetworkRefused):
        run(get(policy, f"http://app.test:{http_server.port}/", guard))

    assert guard.connects == []
    assert http_server.requests == []


def test_the_host_header_keeps_the_name(http_server: LoopbackServer) -> None:
    http_server.serve("/", b"hello", content_type="text/plain")
    guard = GuardBackend()
    policy = NetworkPolicy(allow_loopback=True, resolver=RecordingResolver(["127.0.0.1"]))

    response = run(get(policy, f"http://app.test:{http_server.port}/", guard))

    assert response.content == b"hello"
    assert guard.connects == [("127.0.0.1", http_server.port)]
    assert http_server.received[0].header("Host") == f"app.test:{http_server.port}"


def test_tls_uses_the_name_for_sni_and_verification(tls_ca: ThrowawayCA) -> None:
    server_names: list[str | None] = []
    context = tls_ca.server_context()
    context.sni_callback = lambda _sock, name, _ctx: server_names.append(name)
    resolver = RecordingResolver(["127.0.0.1"])
    policy = NetworkPolicy(allow_loopback=True, ca_bundle=tls_ca.ca_file, resolver=resolver)
    with LoopbackServer(tls=context) as server:
        server.serve("/", b"hello")
        guard = GuardBackend()

        # The certificate names localhost; the connection goes to 127.0.0.1.
        response = run(get(policy, f"https://localhost:{server.port}/", guard))
        assert response.content == b"hello"
        assert guard.connects == [("127.0.0.1", server.port)]
        assert server_names == ["localhost"]
        assert server.received[0].header("Host") == f"localhost:{server.port}"

        # Had the transport verified the IP it connected to, this would pass:
        # the certificate covers 127.0.0.1 but not app.test.
        with pytest.raises(httpx.ConnectError) as caught:
            run(get(policy, f"https://app.test:{server.port}/", guard))
        causes: list[BaseException] = []
        cause: BaseException | None = caught.value
        while cause is not None and len(causes) < 10:
            causes.append(cause)
            cause = cause.__cause__ or cause.__context__
        verify_errors = [c for c in causes if isinstance(c, ssl.SSLCertVerificationError)]
        assert verify_errors and "app.test" in str(verify_errors[0])
        assert server_names == ["localhost", "app.test"]


def test_resolved_addresses_are_tried_in_order(http_server: LoopbackServer) -> None:
    http_server.serve("/", b"v4")
    guard = GuardBackend()
    # The server listens on 127.0.0.1 only, so ::1 refuses the connection.
    policy = NetworkPolicy(allow_loopback=True, resolver=RecordingResolver(["::1", "127.0.0.1"]))

    response = run(get(policy, f"http://dual.test:{http_server.port}/", guard))

    assert response.content == b"v4"
    assert guard.connects == [("::1", http_server.port), ("127.0.0.1", http_server.port)]


@pytest.mark.parametrize(
    "target",
    [
        "http://10.0.0.1:{port}/x",
        "http://169.254.169.254/latest/meta-data/",
        "http://[::ffff:192.168.0.1]/",
        "http://[fd00:ec2::254]/",
        "http://metadata.test/computeMetadata/v1/",
    ],
)
def test_a_redirect_to_a_refused_target_is_refused_at_the_hop(
    http_server: LoopbackServer, target: str
) -> None:
    # Even httpx's own redirect following is checked: every hop is a new
    # connection through the policy.
    http_server.redirect("/go", target.format(port=http_server.port))
    guard = GuardBackend()
    resolver = RecordingResolver(["169.254.169.254"])
    policy = NetworkPolicy(allow_loopback=True, resolver=resolver)

    with pytest.raises(NetworkRefused):
        run(get(policy, http_server.url("/go"), guard, follow_redirects=True))

    assert guard.connects == [("127.0.0.1", http_server.port)]
    assert http_server.requests == ["/go"]


def test_the_default_backend_connects_for_real(http_server: LoopbackServer) -> None:
    http_server.serve("/", b"real")

    async def main() -> bytes:
        async with httpx.AsyncClient(transport=LOOPBACK.transport(), trust_env=False) as client:
            return (await client.get(http_server.url("/"))).content

    assert run(main()) == b"real"
