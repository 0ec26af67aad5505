"""WebFetch.fetch_text against real HTTP and HTTPS servers on loopback, code by code."""

from __future__ import annotations

import asyncio
import gzip
import socket
import time
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest

from capabilities._errors import CapabilityError
from capabilities._limits import MAX_WEB_FETCH_RESPONSE_BYTES
from capabilities._network import NetworkPolicy
from capabilities._web_fetch import (
    ACCEPT_BY_FORMAT,
    BROWSER_USER_AGENT,
    MAX_WEB_FETCH_REDIRECTS,
    PLAIN_USER_AGENT,
    WebFetch,
    _translate,
)
from tests.support.https_server import LoopbackServer, ThrowawayCA

MiB = 1024 * 1024


@pytest.fixture
def web(tls_ca: ThrowawayCA) -> WebFetch:
    return WebFetch(NetworkPolicy(allow_loopback=True, ca_bundle=tls_ca.ca_file))


def fetch(web: WebFetch, url: str, format: str = "markdown", **extra: Any) -> dict[str, Any]:
    return asyncio.run(web.fetch_text({"url": url, "format": format, **extra}))


def fetch_code(web: WebFetch, request: dict[str, Any]) -> str:
    with pytest.raises(CapabilityError) as caught:
        asyncio.run(web.fetch_text(request))
    err = caught.value
    assert err.tag == "WebFetchError"
    assert str(err) == f"Web fetch failed: {err.code}"
    assert err.to_guest() == {"_tag": "WebFetchError", "code": err.code}
    return err.code


def failure(web: WebFetch, url: str, format: str = "markdown", **extra: Any) -> str:
    return fetch_code(web, {"url": url, "format": format, **extra})


def unused_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


# -- success -----------------------------------------------------------------------


def test_fetches_text_over_https(https_server: LoopbackServer, web: WebFetch) -> None:
    https_server.serve("/page.md", b"# Notes\n", content_type="text/markdown; charset=utf-8")

    result = fetch(web, https_server.url("/page.md"))

    assert result == {
        "content": "# Notes\n",
        "contentType": "text/markdown; charset=utf-8",
        "byteLength": 8,
    }
    (request,) = https_server.received
    assert (request.method, request.target) == ("GET", "/page.md")
    assert request.header("User-Agent") == BROWSER_USER_AGENT
    assert request.header("Accept-Encoding") == "identity"


def test_fetches_over_plain_http(http_server: LoopbackServer, web: WebFetch) -> None:
    http_server.serve("/t", b"plain", content_type="text/plain")
    assert fetch(web, http_server.url("/t"), "text")["content"] == "plain"


@pytest.mark.parametrize(
    ("format", "accept"),
    [
        (
            "markdown",
            "text/markdown;q=1.0, text/x-markdown;q=0.9, text/plain;q=0.8, text/html;q=0.7, "
            "*/*;q=0.1",
        ),
        (
            "text",
            "text/plain;q=1.0, text/markdown;q=0.9, text/x-markdown;q=0.8, text/html;q=0.7, "
            "*/*;q=0.1",
        ),
        (
            "html",
            "text/html;q=1.0, application/xhtml+xml;q=0.9, text/plain;q=0.8, "
            "text/markdown;q=0.7, */*;q=0.1",
        ),
    ],
)
def test_accept_header_per_format(
    https_server: LoopbackServer, web: WebFetch, format: str, accept: str
) -> None:
    https_server.serve("/p", b"x", content_type="text/html")

    fetch(web, https_server.url("/p"), format)

    assert https_server.received[0].header("Accept") == accept == ACCEPT_BY_FORMAT[format]


def test_byte_length_counts_bytes_of_multibyte_text(
    https_server: LoopbackServer, web: WebFetch
) -> None:
    text = "héllo ✓ 🎉 日本語"
    https_server.serve("/u", text.encode(), content_type="text/plain")

    result = fetch(web, https_server.url("/u"))

    assert result["content"] == text
    assert result["byteLength"] == len(text.encode()) == 25
    assert len(text) == 13  # code points, not bytes


def test_a_utf8_bom_is_dropped_from_content_but_counted(
    https_server: LoopbackServer, web: WebFetch
) -> None:
    https_server.serve("/bom", b"\xef\xbb\xbfhi", content_type="text/plain")

    assert fetch(web, https_server.url("/bom")) == {
        "content": "hi",
        "contentType": "text/plain",
        "byteLength": 5,
    }


def test_missing_content_type_is_accepted(https_server: LoopbackServer, web: WebFetch) -> None:
    https_server.serve("/none", b"untyped", content_type=None)

    result = fetch(web, https_server.url("/none"))

    assert result == {"content": "untyped", "contentType": "", "byteLength": 7}


def test_content_type_is_echoed_raw(https_server: LoopbackServer, web: WebFetch) -> None:
    raw = 'Application/LD+JSON ;  Charset=UTF-8; profile="x"'
    https_server.serve("/j", b"{}", content_type=raw)

    assert fetch(web, https_server.url("/j"))["contentType"] == raw


@pytest.mark.parametrize(
    "content_type",
    [
        "text/plain",
        "text/html; charset=utf-8",
        "text/csv",
        "TEXT/Markdown",
        "application/json",
        "application/ld+json",
        "application/problem+json; charset=utf-8",
        "application/xml",
        "image/svg+xml",
        "application/atom+xml",
        "application/javascript",
        "application/x-javascript",
    ],
)
def test_textual_content_types_are_accepted(
    https_server: LoopbackServer, web: WebFetch, content_type: str
) -> None:
    https_server.serve("/t", b"ok", content_type=content_type)
    assert fetch(web, https_server.url("/t"))["contentType"] == content_type


def test_a_non_utf8_charset_label_is_not_refused_when_the_bytes_are_utf8(
    https_server: LoopbackServer, web: WebFetch
) -> None:
    https_server.serve("/l", b"ascii only", content_type="text/plain; charset=iso-8859-1")
    assert fetch(web, https_server.url("/l"))["content"] == "ascii only"


def test_any_2xx_is_success(https_server: LoopbackServer, web: WebFetch) -> None:
    https_server.serve("/created", b"made", content_type="text/plain", status=201)
    https_server.serve("/empty", b"", content_type="text/plain", status=204)
    assert fetch(web, https_server.url("/created"))["content"] == "made"
    assert fetch(web, https_server.url("/empty")) == {
        "content": "",
        "contentType": "text/plain",
        "byteLength": 0,
    }


def test_body_of_exactly_the_cap_is_accepted(https_server: LoopbackServer, web: WebFetch) -> None:
    https_server.serve("/max", b"a" * MAX_WEB_FETCH_RESPONSE_BYTES, content_type="text/plain")
    assert fetch(web, https_server.url("/max"))["byteLength"] == MAX_WEB_FETCH_RESPONSE_BYTES


def test_fragment_is_not_sent(https_server: LoopbackServer, web: WebFetch) -> None:
    https_server.serve("/f", b"ok", content_type="text/plain")
    fetch(web, https_server.url("/f?q=1#section"))
    assert https_server.requests == ["/f?q=1"]


def test_loopback_is_refused_by_default_and_allowed_when_opted_in(
    http_server: LoopbackServer,
) -> None:
    http_server.serve("/p", b"local", content_type="text/plain")
    port = http_server.port
    default = WebFetch()
    for url in (
        http_server.url("/p"),
        f"http://localhost:{port}/p",
        f"http://[::ffff:127.0.0.1]:{port}/p",
        f"http://2130706433:{port}/p",
        f"http://0.0.0.0:{port}/p",
    ):
        assert failure(default, url) == "request_failed", url
    assert http_server.requests == []

    opted_in = WebFetch(NetworkPolicy(allow_loopback=True))
    assert fetch(opted_in, http_server.url("/p"))["content"] == "local"
    assert fetch(opted_in, f"http://localhost:{port}/p")["content"] == "local"
    assert fetch(opted_in, f"http://2130706433:{port}/p")["content"] == "local"


# -- invalid_url, invalid_timeout and format ---------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        "",
        "not a url",
        "/relative/path",
        "example.com/page",
        "ftp://127.0.0.1/file",
        "file:///etc/passwd",
        "javascript:alert(1)",
        "data:text/plain,hi",
        "https:///no-host",
        "http://user:secret@127.0.0.1/",
        "http://user@127.0.0.1/",
        "http://@127.0.0.1/",
        "http://127.0.0.1:0/",
        "http://127.0.0.1:65536/",
        "http://[::1/",
        "http://[fe80::1%25eth0]/",
        "http://exa%20mple.com/",
        "http://a\\@127.0.0.1/",
        " http://127.0.0.1/",
        "http://127.0.0.1/\n",
        "http://127.0.0.1/a b",
        None,
        42,
        ["http://127.0.0.1/"],
    ],
)
def test_invalid_url(web: WebFetch, url: object) -> None:
    assert fetch_code(web, {"url": url, "format": "markdown"}) == "invalid_url"


def test_invalid_url_is_refused_before_any_request(
    https_server: LoopbackServer, web: WebFetch
) -> None:
    url = https_server.url("/p").replace("https://", "https://user:pw@")
    assert failure(web, url) == "invalid_url"
    assert https_server.requests == []


def test_a_request_that_is_not_an_object_is_invalid_url(web: WebFetch) -> None:
    assert fetch_code(web, "http://127.0.0.1/") == "invalid_url"  # type: ignore[arg-type]
    assert fetch_code(web, {}) == "invalid_url"


@pytest.mark.parametrize(
    "timeout_ms",
    [0, -1, 1.5, 120_001, 2**53, float("nan"), float("inf"), "1000", True, None, [1000]],
)
def test_invalid_timeout(https_server: LoopbackServer, web: WebFetch, timeout_ms: object) -> None:
    https_server.serve("/p", b"x", content_type="text/plain")
    assert failure(web, https_server.url("/p"), timeoutMs=timeout_ms) == "invalid_timeout"
    assert https_server.requests == []


@pytest.mark.parametrize("timeout_ms", [1000, 120_000, 5000.0])
def test_valid_timeouts(https_server: LoopbackServer, web: WebFetch, timeout_ms: float) -> None:
    https_server.serve("/p", b"x", content_type="text/plain")
    assert fetch(web, https_server.url("/p"), timeoutMs=timeout_ms)["content"] == "x"


@pytest.mark.parametrize("format", ["pdf", "", "MARKDOWN", None, 1])
def test_unknown_format_is_request_failed_before_any_request(
    https_server: LoopbackServer, web: WebFetch, format: object
) -> None:
    https_server.serve("/p", b"x", content_type="text/plain")
    assert fetch_code(web, {"url": https_server.url("/p"), "format": format}) == "request_failed"
    assert fetch_code(web, {"url": https_server.url("/p")}) == "request_failed"
    assert https_server.requests == []


def test_checks_run_url_then_format_then_timeout(web: WebFetch) -> None:
    assert fetch_code(web, {"url": "ftp://x/", "format": "pdf", "timeoutMs": 0}) == "invalid_url"
    assert (
        fetch_code(web, {"url": "http://127.0.0.1/", "format": "pdf", "timeoutMs": 0})
        == "request_failed"
    )


# -- redirects -------------------------------------------------------------------------


def test_follows_a_redirect_chain(https_server: LoopbackServer, web: WebFetch) -> None:
    https_server.redirect("/start", "/two")  # relative
    https_server.redirect("/two", https_server.url("/three"), status=301)
    https_server.redirect("/three", "/four?x=1", status=303)
    https_server.redirect("/four", "/end", status=307)
    https_server.redirect("/end", f"https://localhost:{https_server.port}/final", status=308)
    https_server.serve("/final", b"arrived", content_type="text/plain")

    assert fetch(web, https_server.url("/start"))["content"] == "arrived"
    assert https_server.requests == ["/start", "/two", "/three", "/four?x=1", "/end", "/final"]
    assert all(r.method == "GET" for r in https_server.received)


def test_redirect_between_https_and_http(
    https_server: LoopbackServer, http_server: LoopbackServer, web: WebFetch
) -> None:
    https_server.redirect("/down", http_server.url("/plain"))
    http_server.serve("/plain", b"downgraded", content_type="text/plain")
    assert fetch(web, https_server.url("/down"))["content"] == "downgraded"


def test_redirects_up_to_the_limit_are_followed(
    https_server: LoopbackServer, web: WebFetch
) -> None:
    for hop in range(MAX_WEB_FETCH_REDIRECTS):
        https_server.redirect(f"/r{hop}", f"/r{hop + 1}")
    https_server.serve(f"/r{MAX_WEB_FETCH_REDIRECTS}", b"made it", content_type="text/plain")
    assert fetch(web, https_server.url("/r0"))["content"] == "made it"


def test_too_many_redirects_is_request_failed(https_server: LoopbackServer, web: WebFetch) -> None:
    https_server.redirect("/loop", "/loop")

    assert failure(web, https_server.url("/loop")) == "request_failed"
    assert https_server.requests == ["/loop"] * (MAX_WEB_FETCH_REDIRECTS + 1)


@pytest.mark.parametrize(
    "location",
    [
        "ftp://127.0.0.1/file",
        "file:///etc/passwd",
        "http://user:pw@127.0.0.1/",
        "http://[::1/",
        "http://10.0.0.1/",  # refused by the network policy, never connected to
        "http://169.254.169.254/latest/meta-data/",
        "http://[::ffff:169.254.169.254]/",
        "http://[fd00:ec2::254]/",
    ],
)
def test_refused_redirect_targets_are_request_failed(
    https_server: LoopbackServer, web: WebFetch, location: str
) -> None:
    https_server.redirect("/go", location)
    assert failure(web, https_server.url("/go")) == "request_failed"
    assert https_server.requests == ["/go"]


def test_a_hop_refused_by_the_policy_is_never_connected(
    http_server: LoopbackServer, https_server: LoopbackServer, tls_ca: ThrowawayCA
) -> None:
    # Both servers listen; the policy allows only the first one's port.
    http_server.redirect("/go", https_server.url("/elsewhere"))
    https_server.serve("/elsewhere", b"should not be reached", content_type="text/plain")
    policy = NetworkPolicy(
        allow_loopback=True, ca_bundle=tls_ca.ca_file, allowed_ports=frozenset({http_server.port})
    )

    assert failure(WebFetch(policy), http_server.url("/go")) == "request_failed"

    assert http_server.requests == ["/go"]
    assert https_server.requests == []


def test_redirect_without_location_is_the_final_response(
    https_server: LoopbackServer, web: WebFetch
) -> None:
    https_server.serve("/moved", b"gone", content_type="text/plain", status=301)
    assert failure(web, https_server.url("/moved")) == "http_status"


# -- http_status -----------------------------------------------------------------------


@pytest.mark.parametrize("status", [404, 500, 304, 401, 410])
def test_non_2xx_final_status_is_http_status(
    https_server: LoopbackServer, web: WebFetch, status: int
) -> None:
    https_server.serve("/s", b"body", content_type="text/plain", status=status)
    assert failure(web, https_server.url("/s")) == "http_status"


def test_unknown_path_is_http_status(https_server: LoopbackServer, web: WebFetch) -> None:
    assert failure(web, https_server.url("/missing")) == "http_status"


def test_redirect_chain_ending_in_404_is_http_status(
    https_server: LoopbackServer, web: WebFetch
) -> None:
    https_server.redirect("/a", "/nowhere")
    assert failure(web, https_server.url("/a")) == "http_status"


# -- the Cloudflare challenge -----------------------------------------------------------


def test_challenge_is_retried_once_with_a_plain_user_agent(
    https_server: LoopbackServer, web: WebFetch
) -> None:
    https_server.serve_challenge("/cf", b"real page", content_type="text/html")

    result = fetch(web, https_server.url("/cf"), "html")

    assert result == {"content": "real page", "contentType": "text/html", "byteLength": 9}
    agents = [r.header("User-Agent") for r in https_server.received]
    assert agents == [BROWSER_USER_AGENT, PLAIN_USER_AGENT]
    accepts = {r.header("Accept") for r in https_server.received}
    assert accepts == {ACCEPT_BY_FORMAT["html"]}


def test_challenge_retry_follows_redirects_again(
    https_server: LoopbackServer, web: WebFetch
) -> None:
    https_server.redirect("/start", "/cf")
    https_server.serve_challenge("/cf", b"ok", content_type="text/plain")

    assert fetch(web, https_server.url("/start"))["content"] == "ok"
    assert https_server.requests == ["/start", "/cf", "/start", "/cf"]


def test_a_second_challenge_is_http_status(https_server: LoopbackServer, web: WebFetch) -> None:
    https_server.serve_challenge("/cf", b"never", browser_marker="")

    assert failure(web, https_server.url("/cf")) == "http_status"
    agents = [r.header("User-Agent") for r in https_server.received]
    assert agents == [BROWSER_USER_AGENT, PLAIN_USER_AGENT]


def test_a_plain_403_is_not_retried(https_server: LoopbackServer, web: WebFetch) -> None:
    https_server.serve("/forbidden", b"no", content_type="text/plain", status=403)
    assert failure(web, https_server.url("/forbidden")) == "http_status"
    assert https_server.requests == ["/forbidden"]


# -- too_large -----------------------------------------------------------------------


def test_declared_length_over_the_cap_fails_before_reading(
    https_server: LoopbackServer, web: WebFetch
) -> None:
    # The body would take a minute; only the header can explain a fast failure.
    chunks = [b"x" * MAX_WEB_FETCH_RESPONSE_BYTES, b"x"]
    https_server.serve_slow("/big", chunks, 60.0, content_type="text/plain", declare_length=True)
    started = time.monotonic()

    assert failure(web, https_server.url("/big")) == "too_large"

    assert time.monotonic() - started < 10
    assert https_server.body_bytes_sent("/big") == 0


def test_oversized_body_with_content_length_stops_early(
    https_server: LoopbackServer, web: WebFetch
) -> None:
    body = b"x" * (64 * MiB)
    https_server.serve("/big", body, content_type="text/plain")

    assert failure(web, https_server.url("/big")) == "too_large"

    https_server.wait_idle()
    assert https_server.body_bytes_sent("/big") < len(body) // 2


def test_oversized_chunked_body_stops_early(https_server: LoopbackServer, web: WebFetch) -> None:
    body = b"x" * (64 * MiB)
    https_server.serve_chunked("/huge", body, content_type="text/plain")

    assert failure(web, https_server.url("/huge")) == "too_large"

    https_server.wait_idle()
    # Socket buffers absorb a few MiB at most; the client hung up long before the end.
    assert https_server.body_bytes_sent("/huge") < len(body) // 2


def test_one_byte_over_the_cap_without_length_is_too_large(
    https_server: LoopbackServer, web: WebFetch
) -> None:
    body = b"y" * (MAX_WEB_FETCH_RESPONSE_BYTES + 1)
    https_server.serve_chunked("/over", body, content_type="text/plain")
    assert failure(web, https_server.url("/over")) == "too_large"


# -- content codings ----------------------------------------------------------------------


def test_asks_for_identity_but_decodes_gzip_and_counts_decoded_bytes(
    https_server: LoopbackServer, web: WebFetch
) -> None:
    text = "compressed ✓ " * 100
    https_server.serve(
        "/gz",
        gzip.compress(text.encode()),
        content_type="text/plain",
        headers={"Content-Encoding": "gzip"},
    )

    result = fetch(web, https_server.url("/gz"))

    assert result["content"] == text
    assert result["byteLength"] == len(text.encode())


@pytest.mark.parametrize("wrap", [zlib.compress, lambda data: zlib.compress(data)[2:-4]])
def test_deflate_with_and_without_zlib_framing(
    https_server: LoopbackServer, web: WebFetch, wrap: Any
) -> None:
    https_server.serve(
        "/d", wrap(b"deflated"), content_type="text/plain", headers={"Content-Encoding": "deflate"}
    )
    assert fetch(web, https_server.url("/d"))["content"] == "deflated"


def test_a_compression_bomb_is_too_large(https_server: LoopbackServer, web: WebFetch) -> None:
    bomb = gzip.compress(b"\0" * (256 * MiB), compresslevel=9)
    assert len(bomb) < MiB
    https_server.serve(
        "/bomb", bomb, content_type="text/plain", headers={"Content-Encoding": "gzip"}
    )

    assert failure(web, https_server.url("/bomb")) == "too_large"


@pytest.mark.parametrize("coding", ["br", "zstd", "gzip, gzip", "compress"])
def test_other_content_codings_are_request_failed(
    https_server: LoopbackServer, web: WebFetch, coding: str
) -> None:
    https_server.serve(
        "/c", b"whatever", content_type="text/plain", headers={"Content-Encoding": coding}
    )
    assert failure(web, https_server.url("/c")) == "request_failed"


# -- unsupported_content_type and invalid_utf8 ----------------------------------------------


@pytest.mark.parametrize(
    "content_type",
    [
        "image/png",
        "application/octet-stream",
        "application/pdf",
        "video/mp4",
        "application/jsonx",
        "text",
        "/plain",
        "text/",
        "multipart/form-data; boundary=x",
    ],
)
def test_binary_content_types_are_refused(
    https_server: LoopbackServer, web: WebFetch, content_type: str
) -> None:
    https_server.serve("/bin", b"\x89PNG", content_type=content_type)
    assert failure(web, https_server.url("/bin")) == "unsupported_content_type"


def test_content_type_is_checked_before_reading_the_body(
    https_server: LoopbackServer, web: WebFetch
) -> None:
    https_server.serve_slow("/png", [b"\x89PNG"] * 3, 60.0, content_type="image/png")
    started = time.monotonic()

    assert failure(web, https_server.url("/png")) == "unsupported_content_type"

    assert time.monotonic() - started < 10
    assert https_server.body_bytes_sent("/png") == 0


def test_invalid_utf8_is_refused(https_server: LoopbackServer, web: WebFetch) -> None:
    for body in (b"\xff\xfe\x00h", b"caf\xe9", b"\xed\xa0\x80", b"ok\xe2\x82"):
        https_server.serve("/bad", body, content_type="text/plain; charset=utf-8")
        assert failure(web, https_server.url("/bad")) == "invalid_utf8", body


# -- timed_out --------------------------------------------------------------------------


def test_slow_body_past_the_timeout_is_timed_out(
    https_server: LoopbackServer, web: WebFetch
) -> None:
    # Every chunk arrives well within the limit; only the whole body is too slow.
    https_server.serve_slow("/slow", [b"x"] * 20, 0.2, content_type="text/plain")
    started = time.monotonic()

    assert failure(web, https_server.url("/slow"), timeoutMs=1000) == "timed_out"

    assert 0.9 < time.monotonic() - started < 3.5


def test_timeout_covers_every_redirect_hop(https_server: LoopbackServer, web: WebFetch) -> None:
    https_server.redirect("/a", "/b")
    https_server.serve_slow("/b", [b"x"] * 3, 0.6, content_type="text/plain")
    assert failure(web, https_server.url("/a"), timeoutMs=500) == "timed_out"


def test_slow_body_within_the_timeout_is_fine(https_server: LoopbackServer, web: WebFetch) -> None:
    https_server.serve_slow("/slow", [b"ab", b"cd"], 0.05, content_type="text/plain")
    assert fetch(web, https_server.url("/slow"), timeoutMs=5000)["content"] == "abcd"


# -- request_failed ----------------------------------------------------------------------


def test_connection_refused_is_request_failed(web: WebFetch) -> None:
    assert failure(web, f"http://127.0.0.1:{unused_port()}/") == "request_failed"


def test_untrusted_certificate_is_request_failed(https_server: LoopbackServer) -> None:
    https_server.serve("/p", b"x", content_type="text/plain")
    untrusting = WebFetch(NetworkPolicy(allow_loopback=True))
    assert failure(untrusting, https_server.url("/p")) == "request_failed"


def test_tls_to_a_plain_http_server_is_request_failed(
    http_server: LoopbackServer, web: WebFetch
) -> None:
    url = http_server.url("/p").replace("http://", "https://")
    assert failure(web, url) == "request_failed"


def test_unresolvable_name_is_request_failed() -> None:
    async def resolver(host: str, port: int) -> Sequence[str]:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    web = WebFetch(NetworkPolicy(resolver=resolver))
    assert failure(web, "https://nowhere.test/") == "request_failed"


def test_ports_outside_the_policy_are_request_failed(http_server: LoopbackServer) -> None:
    http_server.serve("/p", b"x", content_type="text/plain")
    web = WebFetch(NetworkPolicy(allow_loopback=True, allowed_ports=frozenset({443})))
    assert failure(web, http_server.url("/p")) == "request_failed"
    assert http_server.requests == []


def test_a_bad_ca_bundle_fails_at_construction(tmp_path: Path) -> None:
    with pytest.raises(OSError):
        WebFetch(NetworkPolicy(ca_bundle=tmp_path / "missing.pem"))


# -- the translation boundary --------------------------------------------------------------


def test_failures_keep_their_cause_for_the_operator(http_server: LoopbackServer) -> None:
    with pytest.raises(CapabilityError) as caught:
        asyncio.run(WebFetch().fetch_text({"url": http_server.url("/p"), "format": "text"}))
    assert caught.value.code == "request_failed"
    assert isinstance(caught.value.__cause__, httpx.ConnectError)
    assert "127.0.0.1" not in str(caught.value)


@pytest.mark.parametrize(
    ("exc", "code"),
    [
        (RuntimeError("/srv/secret"), "request_failed"),
        (httpx.RemoteProtocolError("peer closed"), "request_failed"),
        (httpx.ReadTimeout("read timed out"), "timed_out"),
        (TimeoutError(), "timed_out"),
        (OSError(13, "Permission denied: /etc/ssl"), "request_failed"),
    ],
)
def test_foreign_errors_become_safe_codes(exc: Exception, code: str) -> None:
    err = _translate(exc)
    assert (err.tag, err.code, str(err)) == ("WebFetchError", code, f"Web fetch failed: {code}")
