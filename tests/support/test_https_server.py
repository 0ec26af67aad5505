"""The shared loopback test servers behave as the fixtures promise."""

from __future__ import annotations

import ssl
import threading
import time
from collections.abc import Iterator

import httpx
import pytest

from tests.support.https_server import LoopbackServer, ThrowawayCA


@pytest.fixture
def client(tls_ca: ThrowawayCA) -> Iterator[httpx.Client]:
    with httpx.Client(verify=tls_ca.client_context(), trust_env=False) as c:
        yield c


def test_ca_file_is_a_pem_certificate(tls_ca: ThrowawayCA) -> None:
    assert tls_ca.ca_file.read_text().startswith("-----BEGIN CERTIFICATE-----")
    ssl.create_default_context(cafile=str(tls_ca.ca_file))


def test_serves_bytes_with_length_and_type(
    https_server: LoopbackServer, client: httpx.Client
) -> None:
    https_server.serve("/worker.js", b"export default {};")

    response = client.get(https_server.url("/worker.js"))

    assert https_server.url("/worker.js") == f"https://127.0.0.1:{https_server.port}/worker.js"
    assert response.status_code == 200
    assert response.content == b"export default {};"
    assert response.headers["content-type"] == "text/javascript"
    assert response.headers["content-length"] == "18"


def test_certificate_covers_localhost_and_ipv4(
    https_server: LoopbackServer, client: httpx.Client
) -> None:
    https_server.serve("/x", b"ok")
    assert client.get(f"https://localhost:{https_server.port}/x").content == b"ok"


def test_status_headers_and_content_type(
    https_server: LoopbackServer, client: httpx.Client
) -> None:
    https_server.serve(
        "/gone", b"{}", content_type="application/json", status=410, headers={"X-Extra": "1"}
    )

    response = client.get(https_server.url("/gone"))

    assert response.status_code == 410
    assert response.headers["content-type"] == "application/json"
    assert response.headers["x-extra"] == "1"


def test_routes_can_change_between_requests_and_requests_are_recorded(
    https_server: LoopbackServer, client: httpx.Client
) -> None:
    https_server.serve("/worker.js", b"one")
    assert client.get(https_server.url("/worker.js")).content == b"one"

    https_server.serve("/worker.js", b"two")
    assert client.get(https_server.url("/worker.js?v=2")).content == b"two"

    https_server.remove("/worker.js")
    assert client.get(https_server.url("/worker.js")).status_code == 404
    assert https_server.requests == ["/worker.js", "/worker.js?v=2", "/worker.js"]


def test_unknown_paths_are_404(https_server: LoopbackServer, client: httpx.Client) -> None:
    response = client.get(https_server.url("/nothing"))
    assert (response.status_code, response.content) == (404, b"not found\n")


def test_chunked_body_has_no_length(https_server: LoopbackServer, client: httpx.Client) -> None:
    body = bytes(range(256)) * 1000
    https_server.serve_chunked("/chunked", body, chunk_size=1000)

    response = client.get(https_server.url("/chunked"))

    assert response.content == body
    assert "content-length" not in response.headers
    assert response.headers["transfer-encoding"] == "chunked"
    assert https_server.body_bytes_sent("/chunked") == len(body)


def test_slow_body_streams_chunks_with_pauses(
    https_server: LoopbackServer, client: httpx.Client
) -> None:
    https_server.serve_slow("/slow", [b"a", b"b", b"c"], 0.1)
    started = time.monotonic()

    response = client.get(https_server.url("/slow"))

    assert response.content == b"abc"
    assert "content-length" not in response.headers
    assert time.monotonic() - started >= 0.3


def test_slow_body_can_declare_its_length(
    https_server: LoopbackServer, client: httpx.Client
) -> None:
    https_server.serve_slow("/slow", [b"ab", b"cd"], 0.01, declare_length=True)

    response = client.get(https_server.url("/slow"))

    assert response.content == b"abcd"
    assert response.headers["content-length"] == "4"


def test_redirect_sends_location_verbatim(
    https_server: LoopbackServer, client: httpx.Client
) -> None:
    https_server.redirect("/old", "/new?x=1", status=308)

    response = client.get(https_server.url("/old"))

    assert response.status_code == 308
    assert response.headers["location"] == "/new?x=1"


def test_head_sends_headers_only(https_server: LoopbackServer, client: httpx.Client) -> None:
    https_server.serve("/worker.js", b"12345")
    response = client.head(https_server.url("/worker.js"))
    assert (response.status_code, response.headers["content-length"], response.content) == (
        200,
        "5",
        b"",
    )


def test_plain_http_variant(http_server: LoopbackServer) -> None:
    http_server.serve("/worker.js", b"plain")
    with httpx.Client(trust_env=False) as plain:
        assert plain.get(http_server.url("/worker.js")).content == b"plain"
    assert http_server.base_url == f"http://127.0.0.1:{http_server.port}"


def test_requests_are_served_concurrently(
    https_server: LoopbackServer, tls_ca: ThrowawayCA
) -> None:
    https_server.serve_slow("/slow", [b"x"], 0.5)
    results: list[bytes] = []

    def get() -> None:
        with httpx.Client(verify=tls_ca.client_context(), trust_env=False) as c:
            results.append(c.get(https_server.url("/slow")).content)

    threads = [threading.Thread(target=get) for _ in range(4)]
    started = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert results == [b"x"] * 4
    assert time.monotonic() - started < 1.5


def test_rejects_misuse(https_server: LoopbackServer) -> None:
    with pytest.raises(ValueError, match="must start with '/'"):
        https_server.url("worker.js")
    with pytest.raises(ValueError, match="sets Content-Length and Transfer-Encoding itself"):
        https_server.serve("/x", b"", headers={"content-length": "99"})
    with pytest.raises(ValueError, match="not a redirect status"):
        https_server.redirect("/x", "/y", status=200)


def test_close_is_prompt_during_a_slow_response_and_safe_twice(
    tls_ca: ThrowawayCA,
) -> None:
    server = LoopbackServer(tls=tls_ca.server_context())
    server.serve_slow("/forever", [b"x"] * 100, 60.0)
    with (
        httpx.Client(verify=tls_ca.client_context(), trust_env=False) as c,
        c.stream("GET", server.url("/forever")) as response,
    ):
        assert response.status_code == 200
        started = time.monotonic()
        server.close()
        assert time.monotonic() - started < 2
    server.close()


def test_handlers_are_quiet(
    https_server: LoopbackServer, capfd: pytest.CaptureFixture[str]
) -> None:
    https_server.serve("/worker.js", b"x")
    # A client that does not trust the CA aborts the handshake on the server.
    with httpx.Client(trust_env=False) as untrusting, pytest.raises(httpx.ConnectError):
        untrusting.get(https_server.url("/worker.js"))
    https_server.wait_idle()

    assert capfd.readouterr() == ("", "")
