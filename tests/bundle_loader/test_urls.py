from __future__ import annotations

import pytest

from bundle_loader import BundleLoaderError, check_bundle_url


@pytest.mark.parametrize(
    "url",
    [
        "https://plugins.example/notes/worker.js",
        "https://plugins.example:8443/worker.js",
        "https://plugins.example",
        "https://plugins.example/worker.js?version=3&sig=abc",
        "HTTPS://Plugins.Example/worker.js",
        "https://127.0.0.1/worker.js",
        "https://[2001:db8::1]/worker.js",
        "https://bücher.example/worker.js",
    ],
)
def test_accepts_https_urls_and_returns_them_unchanged(url: str) -> None:
    assert check_bundle_url(url) is url


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("", "URL must be absolute and include a host"),
        ("worker.js", "URL must be absolute and include a host"),
        ("/worker.js", "URL must be absolute and include a host"),
        ("//plugins.example/worker.js", "URL must be absolute and include a host"),
        ("https:///worker.js", "URL must be absolute and include a host"),
        ("https:worker.js", "URL must be absolute and include a host"),
        ("ftp://plugins.example/worker.js", "URL must use https"),
        ("file:///etc/passwd", "URL must use https"),
        ("javascript:alert(1)", "URL must use https"),
        ("http://plugins.example/worker.js", "URL must use https"),
        ("http://127.0.0.1/worker.js", "URL must use https"),
        ("https://user:secret@plugins.example/worker.js", "URL must not contain credentials"),
        ("https://user@plugins.example/worker.js", "URL must not contain credentials"),
        ("https://:@plugins.example/worker.js", "URL must not contain credentials"),
        ("https://@plugins.example/worker.js", "URL must not contain credentials"),
        ("https://plugins.example/worker.js#main", "URL must not contain a fragment"),
        ("https://plugins.example/worker.js#", "URL must not contain a fragment"),
        ("https://plugins.example:0/worker.js", "URL port must be between 1 and 65535"),
        ("https://plugins.example:65536/worker.js", "URL port must be between 1 and 65535"),
        ("https://plugins.example:port/worker.js", "URL is not well-formed"),
        ("https://[::1/worker.js", "URL is not well-formed"),
        (
            " https://plugins.example/worker.js",
            "URL must not contain whitespace, control characters or backslashes",
        ),
        (
            "https://plugins.example/worker.js\n",
            "URL must not contain whitespace, control characters or backslashes",
        ),
        (
            "https://plugins.example/a b.js",
            "URL must not contain whitespace, control characters or backslashes",
        ),
        (
            "https://plugins.example\\@evil.example/worker.js",
            "URL must not contain whitespace, control characters or backslashes",
        ),
        (
            "https://plugins.example/\x00",
            "URL must not contain whitespace, control characters or backslashes",
        ),
    ],
)
def test_rejects_urls_naming_the_rule(url: str, message: str) -> None:
    with pytest.raises(BundleLoaderError) as caught:
        check_bundle_url(url)
    assert caught.value.code == "invalid_url"
    assert caught.value.message == message
    assert str(caught.value) == message


def test_rejection_message_never_repeats_credentials() -> None:
    with pytest.raises(BundleLoaderError) as caught:
        check_bundle_url("https://deploy:hunter2@plugins.example/worker.js")
    assert "hunter2" not in str(caught.value)
    assert "deploy" not in str(caught.value)


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:8080/worker.js",
        "http://127.255.255.254/worker.js",
        "http://[::1]:8080/worker.js",
        "http://localhost/worker.js",
        "http://LOCALHOST:9/worker.js",
    ],
)
def test_plain_http_to_loopback_only_when_allowed(url: str) -> None:
    assert check_bundle_url(url, allow_http_loopback=True) is url
    with pytest.raises(BundleLoaderError) as caught:
        check_bundle_url(url)
    assert (caught.value.code, caught.value.message) == ("invalid_url", "URL must use https")


@pytest.mark.parametrize(
    "url",
    [
        "http://plugins.example/worker.js",
        "http://10.0.0.1/worker.js",
        "http://0.0.0.0/worker.js",
        "http://[::]/worker.js",
        "http://[::ffff:127.0.0.1]/worker.js",
        "http://127.1/worker.js",
        "http://2130706433/worker.js",
        "http://localhost.plugins.example/worker.js",
        "http://localhost./worker.js",
    ],
)
def test_plain_http_to_anything_else_is_refused_even_when_allowed(url: str) -> None:
    with pytest.raises(BundleLoaderError) as caught:
        check_bundle_url(url, allow_http_loopback=True)
    assert caught.value.code == "invalid_url"
    assert caught.value.message == "plain http is allowed only to a loopback host"


def test_loopback_opt_in_still_applies_the_other_rules() -> None:
    with pytest.raises(BundleLoaderError) as caught:
        check_bundle_url("http://user:pw@127.0.0.1/worker.js", allow_http_loopback=True)
    assert caught.value.message == "URL must not contain credentials"


def test_non_string_is_invalid_url() -> None:
    with pytest.raises(BundleLoaderError) as caught:
        check_bundle_url(b"https://plugins.example/worker.js")  # type: ignore[arg-type]
    assert (caught.value.code, caught.value.message) == ("invalid_url", "URL must be a string")
