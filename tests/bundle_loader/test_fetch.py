"""fetch_bundle against real HTTPS and HTTP servers on loopback."""

from __future__ import annotations

import asyncio
import socket
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
import trustme

from bundle_loader import BundleLoaderError, FetchedBundle, FetchLimits, fetch_bundle, sha256_hex
from bundle_loader._fetch import _translate
from tests.support.https_server import LoopbackServer, ThrowawayCA

BUNDLE = b"export default { id: 'notes', setup() {} };\n"
BUNDLE_SHA256 = sha256_hex(BUNDLE)
MiB = 1024 * 1024


@pytest.fixture(autouse=True)
def _no_ambient_trust(monkeypatch: pytest.MonkeyPatch) -> None:
    # Trust must come only from what each test sets up.
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)


def fetch(url: str, **kwargs: Any) -> FetchedBundle:
    return asyncio.run(fetch_bundle(url, **kwargs))


def fetch_error(url: str, **kwargs: Any) -> BundleLoaderError:
    with pytest.raises(BundleLoaderError) as caught:
        fetch(url, **kwargs)
    assert str(caught.value) == caught.value.message
    assert "\n" not in caught.value.message
    return caught.value


def unused_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


# -- trust ---------------------------------------------------------------------


def test_fetches_over_https_trusting_ca_bundle(
    https_server: LoopbackServer, tls_ca: ThrowawayCA
) -> None:
    https_server.serve("/notes/worker.js", BUNDLE)
    url = https_server.url("/notes/worker.js")

    fetched = fetch(url, ca_bundle=tls_ca.ca_file)

    assert fetched == FetchedBundle(url=url, final_url=url, data=BUNDLE, sha256=BUNDLE_SHA256)
    assert repr(fetched) == (
        f"FetchedBundle(url={url!r}, final_url={url!r}, sha256={BUNDLE_SHA256!r})"
    )
    assert https_server.requests == ["/notes/worker.js"]


def test_ca_bundle_may_be_a_str(https_server: LoopbackServer, tls_ca: ThrowawayCA) -> None:
    https_server.serve("/worker.js", BUNDLE)
    assert fetch(https_server.url("/worker.js"), ca_bundle=str(tls_ca.ca_file)).data == BUNDLE


def test_honours_ssl_cert_file(
    https_server: LoopbackServer, tls_ca: ThrowawayCA, monkeypatch: pytest.MonkeyPatch
) -> None:
    https_server.serve("/worker.js", BUNDLE)
    monkeypatch.setenv("SSL_CERT_FILE", str(tls_ca.ca_file))

    assert fetch(https_server.url("/worker.js")).data == BUNDLE


def test_untrusted_server_is_request_failed(https_server: LoopbackServer) -> None:
    https_server.serve("/worker.js", BUNDLE)

    err = fetch_error(https_server.url("/worker.js"))

    assert err.code == "request_failed"
    assert err.message == "the server's TLS certificate could not be verified"
    assert https_server.requests == []


def test_empty_ssl_cert_file_means_unset(
    https_server: LoopbackServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    https_server.serve("/worker.js", BUNDLE)
    monkeypatch.setenv("SSL_CERT_FILE", "")

    err = fetch_error(https_server.url("/worker.js"))

    assert err.message == "the server's TLS certificate could not be verified"


def test_ca_bundle_wins_over_ssl_cert_file_and_is_trusted_exactly(
    https_server: LoopbackServer,
    tls_ca: ThrowawayCA,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    https_server.serve("/worker.js", BUNDLE)
    other_ca = tmp_path / "other-ca.pem"
    trustme.CA().cert_pem.write_to_path(str(other_ca))
    url = https_server.url("/worker.js")

    monkeypatch.setenv("SSL_CERT_FILE", str(other_ca))
    assert fetch(url, ca_bundle=tls_ca.ca_file).data == BUNDLE

    monkeypatch.setenv("SSL_CERT_FILE", str(tls_ca.ca_file))
    err = fetch_error(url, ca_bundle=other_ca)
    assert (err.code, err.message) == (
        "request_failed",
        "the server's TLS certificate could not be verified",
    )


def test_unreadable_trust_files_are_request_failed_without_the_path(
    https_server: LoopbackServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = https_server.url("/worker.js")
    missing = tmp_path / "missing-ca.pem"
    not_pem = tmp_path / "not-a-ca.pem"
    not_pem.write_text("not a certificate\n")

    err = fetch_error(url, ca_bundle=missing)
    assert (err.code, err.message) == (
        "request_failed",
        "could not load the trusted CA certificates from ca_bundle",
    )
    err = fetch_error(url, ca_bundle=not_pem)
    assert err.message == "could not load the trusted CA certificates from ca_bundle"

    monkeypatch.setenv("SSL_CERT_FILE", str(missing))
    err = fetch_error(url)
    assert (err.code, err.message) == (
        "request_failed",
        "could not load the trusted CA certificates from SSL_CERT_FILE",
    )
    assert https_server.requests == []


def test_tls_to_a_plain_http_server_is_request_failed(
    http_server: LoopbackServer, tls_ca: ThrowawayCA
) -> None:
    url = f"https://127.0.0.1:{http_server.port}/worker.js"

    err = fetch_error(url, ca_bundle=tls_ca.ca_file)

    assert (err.code, err.message) == ("request_failed", "the TLS connection to the server failed")


def test_connection_refused_is_request_failed(tls_ca: ThrowawayCA) -> None:
    err = fetch_error(f"https://127.0.0.1:{unused_port()}/worker.js", ca_bundle=tls_ca.ca_file)

    assert (err.code, err.message) == ("request_failed", "could not connect to the server")


UNKNOWN_HOST = "bundle-loader-test.invalid"


@pytest.fixture
def unknown_host(monkeypatch: pytest.MonkeyPatch) -> str:
    """A host name whose lookup fails here, without asking any DNS server."""
    real_getaddrinfo = socket.getaddrinfo

    def getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
        if host == UNKNOWN_HOST:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return real_getaddrinfo(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    return UNKNOWN_HOST


def test_unknown_host_is_request_failed(unknown_host: str) -> None:
    err = fetch_error(f"https://{unknown_host}/worker.js")

    assert (err.code, err.message) == ("request_failed", "could not resolve the server's host name")


# -- URL rules -------------------------------------------------------------------


def test_credentials_in_url_are_refused_before_any_request(
    https_server: LoopbackServer, tls_ca: ThrowawayCA
) -> None:
    https_server.serve("/worker.js", BUNDLE)
    url = https_server.url("/worker.js").replace("https://", "https://deploy:hunter2@")

    err = fetch_error(url, ca_bundle=tls_ca.ca_file)

    assert (err.code, err.message) == ("invalid_url", "URL must not contain credentials")
    assert https_server.requests == []


def test_plain_http_to_loopback_only_when_opted_in(http_server: LoopbackServer) -> None:
    http_server.serve("/worker.js", BUNDLE)
    url = http_server.url("/worker.js")

    err = fetch_error(url)
    assert (err.code, err.message) == ("invalid_url", "URL must use https")
    assert http_server.requests == []

    fetched = fetch(url, allow_http_loopback=True)
    assert (fetched.data, fetched.final_url) == (BUNDLE, url)
    assert http_server.requests == ["/worker.js"]


def test_plain_http_via_localhost_name(http_server: LoopbackServer) -> None:
    http_server.serve("/worker.js", BUNDLE)
    url = f"http://localhost:{http_server.port}/worker.js"
    assert fetch(url, allow_http_loopback=True).data == BUNDLE


# -- redirects -------------------------------------------------------------------


def test_follows_a_redirect_chain(https_server: LoopbackServer, tls_ca: ThrowawayCA) -> None:
    https_server.redirect("/latest", "/v2")  # relative Location
    https_server.redirect("/v2", https_server.url("/v2/worker.js"), status=301)
    https_server.redirect("/v2/worker.js", https_server.url("/blobs/abc?x=1"), status=307)
    https_server.serve("/blobs/abc", BUNDLE)
    url = https_server.url("/latest")

    fetched = fetch(url, ca_bundle=tls_ca.ca_file)

    assert (fetched.url, fetched.final_url) == (url, https_server.url("/blobs/abc?x=1"))
    assert fetched.data == BUNDLE
    assert https_server.requests == ["/latest", "/v2", "/v2/worker.js", "/blobs/abc?x=1"]


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_follows_every_redirect_status(
    status: int, https_server: LoopbackServer, tls_ca: ThrowawayCA
) -> None:
    https_server.redirect("/old", "/new", status=status)
    https_server.serve("/new", BUNDLE)

    assert fetch(https_server.url("/old"), ca_bundle=tls_ca.ca_file).data == BUNDLE


def test_redirect_up_to_the_limit_is_followed(
    https_server: LoopbackServer, tls_ca: ThrowawayCA
) -> None:
    for hop in range(3):
        https_server.redirect(f"/{hop}", f"/{hop + 1}")
    https_server.serve("/3", BUNDLE)

    fetched = fetch(
        https_server.url("/0"), ca_bundle=tls_ca.ca_file, limits=FetchLimits(max_redirects=3)
    )

    assert fetched.final_url == https_server.url("/3")


def test_too_many_redirects_is_request_failed(
    https_server: LoopbackServer, tls_ca: ThrowawayCA
) -> None:
    for hop in range(3):
        https_server.redirect(f"/{hop}", f"/{hop + 1}")
    https_server.serve("/3", BUNDLE)

    err = fetch_error(
        https_server.url("/0"), ca_bundle=tls_ca.ca_file, limits=FetchLimits(max_redirects=2)
    )

    assert (err.code, err.message) == ("request_failed", "too many redirects (the limit is 2)")
    assert https_server.requests == ["/0", "/1", "/2"]


def test_redirect_loop_is_request_failed(https_server: LoopbackServer, tls_ca: ThrowawayCA) -> None:
    https_server.redirect("/a", "/b")
    https_server.redirect("/b", "/a")

    err = fetch_error(https_server.url("/a"), ca_bundle=tls_ca.ca_file)

    assert (err.code, err.message) == ("request_failed", "too many redirects (the limit is 5)")
    assert https_server.requests == ["/a", "/b", "/a", "/b", "/a", "/b"]


def test_no_redirects_allowed(https_server: LoopbackServer, tls_ca: ThrowawayCA) -> None:
    https_server.redirect("/a", "/b")
    https_server.serve("/b", BUNDLE)

    err = fetch_error(
        https_server.url("/a"), ca_bundle=tls_ca.ca_file, limits=FetchLimits(max_redirects=0)
    )

    assert (err.code, err.message) == ("request_failed", "too many redirects (the limit is 0)")
    assert https_server.requests == ["/a"]


@pytest.mark.parametrize("allow_http_loopback", [False, True])
def test_redirect_downgrade_to_public_http_is_refused(
    allow_http_loopback: bool, https_server: LoopbackServer, tls_ca: ThrowawayCA
) -> None:
    https_server.redirect("/worker.js", "http://plugins.example/worker.js")

    err = fetch_error(
        https_server.url("/worker.js"),
        ca_bundle=tls_ca.ca_file,
        allow_http_loopback=allow_http_loopback,
    )

    assert err.code == "invalid_url"
    assert err.message == (
        "redirect refused: plain http is allowed only to a loopback host"
        if allow_http_loopback
        else "redirect refused: URL must use https"
    )


def test_redirect_to_http_loopback_only_when_opted_in(
    https_server: LoopbackServer, http_server: LoopbackServer, tls_ca: ThrowawayCA
) -> None:
    http_server.serve("/worker.js", BUNDLE)
    https_server.redirect("/worker.js", http_server.url("/worker.js"))
    url = https_server.url("/worker.js")

    err = fetch_error(url, ca_bundle=tls_ca.ca_file)
    assert (err.code, err.message) == ("invalid_url", "redirect refused: URL must use https")
    assert http_server.requests == []

    fetched = fetch(url, ca_bundle=tls_ca.ca_file, allow_http_loopback=True)
    assert (fetched.data, fetched.final_url) == (BUNDLE, http_server.url("/worker.js"))


@pytest.mark.parametrize(
    ("location", "message"),
    [
        (
            "https://deploy:hunter2@plugins.example/worker.js",
            "redirect refused: URL must not contain credentials",
        ),
        ("ftp://plugins.example/worker.js", "redirect refused: URL must use https"),
        (
            "https://plugins.example/worker.js#v2",
            "redirect refused: URL must not contain a fragment",
        ),
        ("https://[::1/worker.js", "redirect refused: URL is not well-formed"),
    ],
)
def test_every_redirect_target_is_checked(
    location: str, message: str, https_server: LoopbackServer, tls_ca: ThrowawayCA
) -> None:
    https_server.redirect("/worker.js", location)

    err = fetch_error(https_server.url("/worker.js"), ca_bundle=tls_ca.ca_file)

    assert (err.code, err.message) == ("invalid_url", message)


# -- status, size, time ------------------------------------------------------------


@pytest.mark.parametrize("status", [404, 410, 500, 304])
def test_non_2xx_final_status_is_http_status_without_the_body(
    status: int, https_server: LoopbackServer, tls_ca: ThrowawayCA
) -> None:
    body = b"" if status == 304 else b"secret stack trace"
    https_server.serve("/worker.js", body, status=status)

    err = fetch_error(https_server.url("/worker.js"), ca_bundle=tls_ca.ca_file)

    assert err.code == "http_status"
    assert err.message == f"the server answered with HTTP status {status}"


def test_unknown_path_is_http_status_404(https_server: LoopbackServer, tls_ca: ThrowawayCA) -> None:
    err = fetch_error(https_server.url("/nothing-here.js"), ca_bundle=tls_ca.ca_file)
    assert (err.code, err.message) == ("http_status", "the server answered with HTTP status 404")


def test_body_of_exactly_max_bytes_is_accepted(
    https_server: LoopbackServer, tls_ca: ThrowawayCA
) -> None:
    https_server.serve("/fixed", BUNDLE)
    https_server.serve_chunked("/chunked", BUNDLE, chunk_size=7)
    limits = FetchLimits(max_bytes=len(BUNDLE))

    for path in ("/fixed", "/chunked"):
        assert fetch(https_server.url(path), ca_bundle=tls_ca.ca_file, limits=limits).data == BUNDLE


def test_empty_body_is_a_bundle_too(https_server: LoopbackServer, tls_ca: ThrowawayCA) -> None:
    https_server.serve("/empty", b"")
    fetched = fetch(https_server.url("/empty"), ca_bundle=tls_ca.ca_file)
    assert (fetched.data, fetched.sha256) == (b"", sha256_hex(b""))


def test_declared_length_over_the_cap_is_too_large_before_reading(
    https_server: LoopbackServer, tls_ca: ThrowawayCA
) -> None:
    # The body would take a minute to arrive; only the header can explain a fast failure.
    https_server.serve_slow("/big", [b"x" * 600, b"x" * 600], 60.0, declare_length=True)
    started = time.monotonic()

    err = fetch_error(
        https_server.url("/big"), ca_bundle=tls_ca.ca_file, limits=FetchLimits(max_bytes=1000)
    )

    assert time.monotonic() - started < 10
    assert (err.code, err.message) == (
        "too_large",
        "the bundle is larger than the limit of 1000 bytes",
    )
    assert https_server.body_bytes_sent("/big") == 0


def test_large_body_with_length_is_too_large(
    https_server: LoopbackServer, tls_ca: ThrowawayCA
) -> None:
    body = b"x" * (64 * MiB)
    https_server.serve("/big", body)

    err = fetch_error(
        https_server.url("/big"), ca_bundle=tls_ca.ca_file, limits=FetchLimits(max_bytes=MiB)
    )

    assert (err.code, err.message) == (
        "too_large",
        f"the bundle is larger than the limit of {MiB} bytes",
    )
    https_server.wait_idle()
    assert https_server.body_bytes_sent("/big") < len(body) // 2


def test_chunked_body_over_the_cap_stops_early(
    https_server: LoopbackServer, tls_ca: ThrowawayCA
) -> None:
    body = b"x" * (64 * MiB)
    https_server.serve_chunked("/huge", body)

    err = fetch_error(
        https_server.url("/huge"), ca_bundle=tls_ca.ca_file, limits=FetchLimits(max_bytes=MiB)
    )

    assert (err.code, err.message) == (
        "too_large",
        f"the bundle is larger than the limit of {MiB} bytes",
    )
    https_server.wait_idle()
    # Socket buffers absorb a few MiB at most; the client hung up long before the end.
    assert https_server.body_bytes_sent("/huge") < len(body) // 2


def test_slow_body_past_the_deadline_is_timed_out(
    https_server: LoopbackServer, tls_ca: ThrowawayCA
) -> None:
    # Each chunk arrives well within the limit; only the whole request is too slow.
    https_server.serve_slow("/slow", [b"x"] * 20, 0.2)
    started = time.monotonic()

    err = fetch_error(
        https_server.url("/slow"),
        ca_bundle=tls_ca.ca_file,
        limits=FetchLimits(timeout_seconds=1.0),
    )

    elapsed = time.monotonic() - started
    assert (err.code, err.message) == (
        "timed_out",
        "the request did not finish within the 1-second limit",
    )
    assert 0.9 < elapsed < 3.5


def test_deadline_covers_all_redirect_hops(
    https_server: LoopbackServer, tls_ca: ThrowawayCA
) -> None:
    https_server.redirect("/a", "/b")
    https_server.serve_slow("/b", [b"x"] * 3, 0.6)

    err = fetch_error(
        https_server.url("/a"), ca_bundle=tls_ca.ca_file, limits=FetchLimits(timeout_seconds=0.5)
    )

    assert (err.code, err.message) == (
        "timed_out",
        "the request did not finish within the 0.5-second limit",
    )


def test_slow_body_within_the_deadline_is_fine(
    https_server: LoopbackServer, tls_ca: ThrowawayCA
) -> None:
    https_server.serve_slow("/slow", [b"ab", b"", b"cd"], 0.05)
    assert fetch(https_server.url("/slow"), ca_bundle=tls_ca.ca_file).data == b"abcd"


# -- integrity -----------------------------------------------------------------------


def test_expected_sha256_match_in_any_accepted_form(
    https_server: LoopbackServer, tls_ca: ThrowawayCA
) -> None:
    https_server.serve("/worker.js", BUNDLE)

    fetched = fetch(
        https_server.url("/worker.js"),
        ca_bundle=tls_ca.ca_file,
        expected_sha256="SHA256:" + BUNDLE_SHA256.upper(),
    )

    assert fetched.sha256 == BUNDLE_SHA256


def test_expected_sha256_mismatch_is_integrity_mismatch(
    https_server: LoopbackServer, tls_ca: ThrowawayCA
) -> None:
    https_server.serve("/worker.js", BUNDLE)
    expected = sha256_hex(b"what was pinned")

    err = fetch_error(
        https_server.url("/worker.js"), ca_bundle=tls_ca.ca_file, expected_sha256=expected
    )

    assert err.code == "integrity_mismatch"
    assert err.message == f"bundle sha256 is {BUNDLE_SHA256}, expected {expected}"


def test_changed_file_at_the_same_url_fails_the_pin(
    https_server: LoopbackServer, tls_ca: ThrowawayCA
) -> None:
    https_server.serve("/worker.js", BUNDLE)
    url = https_server.url("/worker.js")
    pinned = fetch(url, ca_bundle=tls_ca.ca_file).sha256

    https_server.serve("/worker.js", BUNDLE + b"// changed\n")
    err = fetch_error(url, ca_bundle=tls_ca.ca_file, expected_sha256=pinned)

    assert err.code == "integrity_mismatch"


def test_malformed_expected_sha256_is_refused_before_any_request(
    https_server: LoopbackServer, tls_ca: ThrowawayCA
) -> None:
    https_server.serve("/worker.js", BUNDLE)

    err = fetch_error(
        https_server.url("/worker.js"), ca_bundle=tls_ca.ca_file, expected_sha256="abc123"
    )

    assert err.code == "invalid_sha256"
    assert https_server.requests == []


# -- the translation boundary ------------------------------------------------------


def test_foreign_errors_keep_their_cause_but_not_their_text(unknown_host: str) -> None:
    err = fetch_error(f"https://{unknown_host}/worker.js")
    assert isinstance(err.__cause__, httpx.ConnectError)
    assert "bundle-loader-test" not in err.message


@pytest.mark.parametrize(
    ("exc", "code", "message"),
    [
        (RuntimeError("/srv/secret/path"), "request_failed", "the request failed"),
        (
            httpx.RemoteProtocolError("peer closed /srv"),
            "request_failed",
            "the connection to the server failed",
        ),
        (
            httpx.ReadTimeout("read timed out"),
            "timed_out",
            "the request did not finish within the 30-second limit",
        ),
        (TimeoutError(), "timed_out", "the request did not finish within the 30-second limit"),
    ],
)
def test_unmapped_foreign_errors_become_safe_codes(exc: Exception, code: str, message: str) -> None:
    err = _translate(exc, FetchLimits())
    assert (err.code, err.message) == (code, message)


def test_a_compressed_body_is_refused_without_being_decoded(
    https_server: LoopbackServer, tls_ca: ThrowawayCA
) -> None:
    import gzip

    bomb = gzip.compress(gzip.compress(b"\0" * (64 * 1024 * 1024)))
    https_server.serve("/bomb.mjs", bomb, headers={"Content-Encoding": "gzip, gzip"})
    err = fetch_error(https_server.url("/bomb.mjs"), ca_bundle=tls_ca.ca_file)
    assert (err.code, err.message) == (
        "request_failed", "the server sent a compressed bundle, which is not accepted"
    )
