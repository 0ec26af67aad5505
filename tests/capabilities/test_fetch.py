"""PlainFetch (the guest's plain fetch) against real HTTP and HTTPS servers on loopback."""

from __future__ import annotations

import asyncio
import base64
import gzip
import json
import socket
import time
from collections.abc import Sequence
from typing import Any

import pytest

from capabilities._fetch import (
    BAD_REDIRECT,
    CONNECT_FAILED,
    MAX_FETCH_REDIRECTS,
    REDIRECT_REFUSED,
    TIMED_OUT,
    TLS_UNVERIFIED,
    TOO_LARGE,
    TOO_MANY_REDIRECTS,
    UNREACHABLE,
    FetchFailed,
    PlainFetch,
)
from capabilities._network import NetworkPolicy
from tests.support.https_server import LoopbackServer, ThrowawayCA

MiB = 1024 * 1024


@pytest.fixture
def policy(tls_ca: ThrowawayCA) -> NetworkPolicy:
    return NetworkPolicy(allow_loopback=True, ca_bundle=tls_ca.ca_file)


@pytest.fixture
def plain(policy: NetworkPolicy) -> PlainFetch:
    return PlainFetch(policy)


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def fetch(plain: PlainFetch, url: str, **request: Any) -> dict[str, Any]:
    return asyncio.run(plain.fetch({"url": url, **request}))


def failure(plain: PlainFetch, url: object, **request: Any) -> str:
    with pytest.raises(FetchFailed) as caught:
        asyncio.run(plain.fetch({"url": url, **request}))
    message = str(caught.value)
    assert "\n" not in message
    assert "127.0.0.1" not in message
    return message


def header_names(result: dict[str, Any]) -> list[str]:
    return [name for name, _ in result["headers"]]


def header(result: dict[str, Any], name: str) -> list[str]:
    return [value for n, value in result["headers"] if n == name]


def unused_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


# -- requests and responses --------------------------------------------------------


def test_get_returns_a_json_response(https_server: LoopbackServer, plain: PlainFetch) -> None:
    https_server.serve(
        "/api", b'{"ok": true}', content_type="application/json", headers={"X-Extra": "1"}
    )
    url = https_server.url("/api")

    result = fetch(plain, url)

    assert {k: v for k, v in result.items() if k not in ("headers", "body")} == {
        "url": url,
        "status": 200,
        "statusText": "OK",
        "redirected": False,
    }
    assert json.loads(base64.b64decode(result["body"])) == {"ok": True}
    assert header_names(result) == ["server", "date", "x-extra", "content-type", "content-length"]
    assert header(result, "content-type") == ["application/json"]
    assert header(result, "content-length") == ["12"]
    assert all(isinstance(pair, list) and len(pair) == 2 for pair in result["headers"])
    (received,) = https_server.received
    assert (received.method, received.body) == ("GET", b"")
    assert received.header("Accept") == "*/*"
    assert received.header("Accept-Encoding") == "identity"


def test_post_sends_headers_and_body(https_server: LoopbackServer, plain: PlainFetch) -> None:
    https_server.serve("/submit", b"thanks", content_type="text/plain", status=201)
    payload = json.dumps({"name": "notes", "data": "✓"}).encode()

    result = fetch(
        plain,
        https_server.url("/submit"),
        method="post",
        headers=[
            ["Content-Type", "application/json"],
            ["X-Trace", "a"],
            ["x-trace", "b"],
            ["User-Agent", "plugin/1.0"],
            ["Accept", "application/json"],
        ],
        body=b64(payload),
    )

    assert (result["status"], result["statusText"]) == (201, "Created")
    assert base64.b64decode(result["body"]) == b"thanks"
    (received,) = https_server.received
    assert (received.method, received.body) == ("POST", payload)
    assert [(k, v) for k, v in received.headers if k.lower() != "host"] == [
        ("Content-Type", "application/json"),
        ("X-Trace", "a"),
        ("x-trace", "b"),
        ("User-Agent", "plugin/1.0"),
        ("Accept", "application/json"),
        ("Accept-Encoding", "identity"),
        ("Content-Length", str(len(payload))),
    ]


@pytest.mark.parametrize(
    ("method", "sent"), [("delete", "DELETE"), ("Put", "PUT"), ("PATCH", "PATCH"), ("GET", "GET")]
)
def test_methods_are_normalized_as_fetch_does(
    http_server: LoopbackServer, plain: PlainFetch, method: str, sent: str
) -> None:
    http_server.serve("/m", b"", content_type="text/plain")
    fetch(plain, http_server.url("/m"), method=method)
    assert http_server.received[0].method == sent


def test_head_has_no_body(https_server: LoopbackServer, plain: PlainFetch) -> None:
    https_server.serve("/h", b"12345", content_type="text/plain")
    result = fetch(plain, https_server.url("/h"), method="HEAD")
    assert (result["status"], result["body"], header(result, "content-length")) == (200, "", ["5"])


def test_error_statuses_are_responses_not_failures(
    https_server: LoopbackServer, plain: PlainFetch
) -> None:
    result = fetch(plain, https_server.url("/missing"))
    assert (result["status"], result["statusText"]) == (404, "Not Found")
    assert base64.b64decode(result["body"]) == b"not found\n"


def test_framing_and_connection_headers_from_the_guest_are_dropped(
    http_server: LoopbackServer, plain: PlainFetch
) -> None:
    http_server.serve("/p", b"ok", content_type="text/plain")

    fetch(
        plain,
        http_server.url("/p"),
        method="POST",
        body=b64(b"abc"),
        headers=[
            ["Host", "evil.test"],
            ["Content-Length", "999"],
            ["Transfer-Encoding", "chunked"],
            ["Connection", "close"],
            ["Accept-Encoding", "gzip"],
            ["Proxy-Authorization", "Basic eA=="],
            ["X-Kept", "  padded  "],
        ],
    )

    (received,) = http_server.received
    assert received.body == b"abc"
    assert received.header("Host") == f"127.0.0.1:{http_server.port}"
    assert received.header("Content-Length") == "3"
    assert received.header("Transfer-Encoding") is None
    assert received.header("Connection") is None
    assert received.header("Accept-Encoding") == "identity"
    assert received.header("Proxy-Authorization") is None
    assert received.header("X-Kept") == "padded"


def test_fragment_is_neither_sent_nor_returned(
    https_server: LoopbackServer, plain: PlainFetch
) -> None:
    https_server.serve("/f", b"", content_type="text/plain")
    result = fetch(plain, https_server.url("/f?a=1#top"))
    assert result["url"] == https_server.url("/f?a=1")
    assert https_server.requests == ["/f?a=1"]


def test_a_gzip_body_is_decoded_as_browsers_do(
    https_server: LoopbackServer, plain: PlainFetch
) -> None:
    https_server.serve(
        "/gz",
        gzip.compress(b"inflated"),
        content_type="text/plain",
        headers={"Content-Encoding": "gzip"},
    )
    result = fetch(plain, https_server.url("/gz"))
    assert base64.b64decode(result["body"]) == b"inflated"
    assert header(result, "content-encoding") == ["gzip"]


# -- malformed requests -------------------------------------------------------------


@pytest.mark.parametrize(
    ("request_", "message"),
    [
        ({"url": "ftp://127.0.0.1/"}, "fetch failed: URL must use http or https"),
        ({"url": "http://u:p@127.0.0.1/"}, "fetch failed: URL must not contain credentials"),
        ({"url": "/relative"}, "fetch failed: URL must use http or https"),
        ({"url": None}, "fetch failed: URL must be a string"),
        ({"url": "http://x/", "method": "CONNECT"}, "fetch failed: the method is not allowed"),
        ({"url": "http://x/", "method": "trace"}, "fetch failed: the method is not allowed"),
        (
            {"url": "http://x/", "method": "GE T"},
            "fetch failed: the method is not a valid HTTP method",
        ),
        ({"url": "http://x/", "method": 1}, "fetch failed: the method is not a valid HTTP method"),
        (
            {"url": "http://x/", "headers": {"a": "b"}},
            "fetch failed: headers must be a list of [name, value] pairs",
        ),
        (
            {"url": "http://x/", "headers": [["a", "b", "c"]]},
            "fetch failed: headers must be a list of [name, value] pairs",
        ),
        (
            {"url": "http://x/", "headers": [["a", 1]]},
            "fetch failed: headers must be a list of [name, value] pairs",
        ),
        (
            {"url": "http://x/", "headers": [["bad name", "v"]]},
            "fetch failed: a header name is not valid",
        ),
        (
            {"url": "http://x/", "headers": [["X", "a\r\nInjected: 1"]]},
            "fetch failed: a header value is not valid",
        ),
        (
            {"url": "http://x/", "headers": [["X", "✓"]]},
            "fetch failed: a header value is not valid",
        ),
        (
            {"url": "http://x/", "method": "POST", "body": "not base64!"},
            "fetch failed: the body must be a base64 string",
        ),
        (
            {"url": "http://x/", "method": "POST", "body": 12},
            "fetch failed: the body must be a base64 string",
        ),
        (
            {"url": "http://x/", "body": "aGk="},
            "fetch failed: a GET or HEAD request cannot have a body",
        ),
        (
            {"url": "http://x/", "redirect": "always"},
            "fetch failed: redirect must be 'follow', 'manual' or 'error'",
        ),
    ],
)
def test_malformed_requests_fail_before_any_request(
    plain: PlainFetch, request_: dict[str, Any], message: str
) -> None:
    with pytest.raises(FetchFailed) as caught:
        asyncio.run(plain.fetch(request_))
    assert str(caught.value) == message


def test_constructor_checks_its_limits() -> None:
    with pytest.raises(ValueError, match="max_response_bytes"):
        PlainFetch(max_response_bytes=-1)
    with pytest.raises(ValueError, match="timeout_seconds"):
        PlainFetch(timeout_seconds=0)


# -- redirect modes ----------------------------------------------------------------


def test_follow_turns_a_302_post_into_a_get_without_body(
    https_server: LoopbackServer, plain: PlainFetch
) -> None:
    https_server.redirect("/old", "/new", status=302)
    https_server.serve("/new", b"moved", content_type="text/plain")

    result = fetch(
        plain,
        https_server.url("/old"),
        method="POST",
        headers=[["Content-Type", "text/plain"], ["Authorization", "Bearer t"]],
        body=b64(b"data"),
    )

    assert (result["url"], result["redirected"], result["status"]) == (
        https_server.url("/new"),
        True,
        200,
    )
    first, second = https_server.received
    assert (first.method, first.body, second.method, second.body) == ("POST", b"data", "GET", b"")
    assert second.header("Content-Type") is None
    assert second.header("Authorization") == "Bearer t"  # same origin


@pytest.mark.parametrize("status", [307, 308])
def test_follow_keeps_method_and_body_on_307_and_308(
    https_server: LoopbackServer, plain: PlainFetch, status: int
) -> None:
    https_server.redirect("/old", "/new", status=status)
    https_server.serve("/new", b"", content_type="text/plain")

    fetch(plain, https_server.url("/old"), method="PUT", body=b64(b"data"))

    assert [(r.method, r.body) for r in https_server.received] == [("PUT", b"data")] * 2


def test_follow_turns_a_303_into_a_get(https_server: LoopbackServer, plain: PlainFetch) -> None:
    https_server.redirect("/old", "/new", status=303)
    https_server.serve("/new", b"", content_type="text/plain")
    fetch(plain, https_server.url("/old"), method="DELETE")
    assert [r.method for r in https_server.received] == ["DELETE", "GET"]


def test_credentials_are_dropped_when_a_redirect_leaves_the_origin(
    https_server: LoopbackServer, http_server: LoopbackServer, plain: PlainFetch
) -> None:
    https_server.redirect("/out", http_server.url("/in"))
    http_server.serve("/in", b"", content_type="text/plain")

    fetch(
        plain,
        https_server.url("/out"),
        headers=[["Authorization", "Bearer t"], ["Cookie", "s=1"], ["X-Other", "kept"]],
    )

    (arrived,) = http_server.received
    assert arrived.header("Authorization") is None
    assert arrived.header("Cookie") is None
    assert arrived.header("X-Other") == "kept"


def test_manual_returns_the_redirect_itself(
    https_server: LoopbackServer, plain: PlainFetch
) -> None:
    https_server.redirect("/old", "/new", status=301)
    url = https_server.url("/old")

    result = fetch(plain, url, redirect="manual")

    assert (result["url"], result["status"], result["redirected"]) == (url, 301, False)
    assert header(result, "location") == ["/new"]
    assert https_server.requests == ["/old"]


def test_manual_returns_even_a_redirect_that_could_not_be_followed(
    https_server: LoopbackServer, plain: PlainFetch
) -> None:
    https_server.redirect("/odd", "http://[::1/")
    result = fetch(plain, https_server.url("/odd"), redirect="manual")
    assert (result["status"], header(result, "location")) == (302, ["http://[::1/"])


def test_null_means_absent(https_server: LoopbackServer, plain: PlainFetch) -> None:
    https_server.serve("/p", b"x", content_type="text/plain")
    result = fetch(
        plain, https_server.url("/p"), method=None, headers=None, body=None, redirect=None
    )
    assert result["status"] == 200
    assert https_server.received[0].method == "GET"


def test_error_mode_fails_on_a_redirect(https_server: LoopbackServer, plain: PlainFetch) -> None:
    https_server.redirect("/old", "/new")
    assert failure(plain, https_server.url("/old"), redirect="error") == REDIRECT_REFUSED
    assert https_server.requests == ["/old"]


def test_error_mode_is_fine_without_a_redirect(
    https_server: LoopbackServer, plain: PlainFetch
) -> None:
    https_server.serve("/p", b"x", content_type="text/plain")
    assert fetch(plain, https_server.url("/p"), redirect="error")["status"] == 200


def test_too_many_redirects(https_server: LoopbackServer, plain: PlainFetch) -> None:
    https_server.redirect("/loop", "/loop")
    assert failure(plain, https_server.url("/loop")) == TOO_MANY_REDIRECTS
    assert https_server.requests == ["/loop"] * (MAX_FETCH_REDIRECTS + 1)


@pytest.mark.parametrize("location", ["ftp://127.0.0.1/", "http://u:p@127.0.0.1/", "http://[::1/"])
def test_a_redirect_to_a_url_that_may_not_be_fetched(
    https_server: LoopbackServer, plain: PlainFetch, location: str
) -> None:
    https_server.redirect("/go", location)
    assert failure(plain, https_server.url("/go")) == BAD_REDIRECT


# -- the network policy ---------------------------------------------------------------


def test_loopback_is_refused_by_default(http_server: LoopbackServer) -> None:
    http_server.serve("/p", b"x", content_type="text/plain")
    default = PlainFetch()
    for url in (http_server.url("/p"), f"http://localhost:{http_server.port}/p"):
        assert failure(default, url) == UNREACHABLE
    assert http_server.requests == []


@pytest.mark.parametrize(
    "location",
    ["http://10.0.0.1/", "http://169.254.169.254/latest/meta-data/", "http://[fe80::1]/"],
)
def test_a_redirect_to_a_private_address_is_refused_at_the_hop(
    https_server: LoopbackServer, plain: PlainFetch, location: str
) -> None:
    https_server.redirect("/go", location)
    assert failure(plain, https_server.url("/go")) == UNREACHABLE
    assert https_server.requests == ["/go"]


def test_refused_and_unresolvable_read_the_same() -> None:
    async def resolver(host: str, port: int) -> Sequence[str]:
        if host == "internal.test":
            return ["10.0.0.7"]
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    plain = PlainFetch(NetworkPolicy(resolver=resolver))
    assert failure(plain, "https://internal.test/") == UNREACHABLE
    assert failure(plain, "https://nowhere.test/") == UNREACHABLE


# -- limits and failures ----------------------------------------------------------------


def test_a_response_over_the_cap_fails(https_server: LoopbackServer, policy: NetworkPolicy) -> None:
    small = PlainFetch(policy, max_response_bytes=1000)
    https_server.serve("/exact", b"a" * 1000, content_type="text/plain")
    https_server.serve("/over", b"a" * 1001, content_type="text/plain")
    https_server.serve_chunked("/huge", b"a" * (64 * MiB), content_type="text/plain")

    assert len(base64.b64decode(fetch(small, https_server.url("/exact"))["body"])) == 1000
    assert failure(small, https_server.url("/over")) == TOO_LARGE
    assert failure(small, https_server.url("/huge")) == TOO_LARGE
    https_server.wait_idle()
    assert https_server.body_bytes_sent("/huge") < 32 * MiB


def test_timeout_fails(https_server: LoopbackServer, policy: NetworkPolicy) -> None:
    https_server.serve_slow("/slow", [b"x"] * 20, 0.2, content_type="text/plain")
    quick = PlainFetch(policy, timeout_seconds=0.5)
    started = time.monotonic()

    assert failure(quick, https_server.url("/slow")) == TIMED_OUT

    assert 0.4 < time.monotonic() - started < 3


def test_connection_refused(plain: PlainFetch) -> None:
    assert failure(plain, f"http://127.0.0.1:{unused_port()}/") == CONNECT_FAILED


def test_untrusted_certificate(https_server: LoopbackServer) -> None:
    https_server.serve("/p", b"x", content_type="text/plain")
    untrusting = PlainFetch(NetworkPolicy(allow_loopback=True))
    assert failure(untrusting, https_server.url("/p")) == TLS_UNVERIFIED
