"""The package surface: exports, the error type, digests and limits."""

from __future__ import annotations

import pickle

import pytest

import bundle_loader
from bundle_loader import BundleLoaderError, FetchLimits, normalize_sha256, sha256_hex

EMPTY_SHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"


def test_all_is_sorted_and_complete() -> None:
    assert bundle_loader.__all__ == sorted(bundle_loader.__all__)
    assert set(bundle_loader.__all__) == {
        "BundleLoaderError",
        "BundleStore",
        "FetchLimits",
        "FetchedBundle",
        "KeyPair",
        "TrustPolicy",
        "check_bundle_url",
        "fetch_bundle",
        "fetch_signature",
        "generate_key_pair",
        "key_id",
        "load_private_key",
        "load_public_key",
        "normalize_sha256",
        "sha256_hex",
        "sign_digest",
        "signed_message",
        "verify_signature",
    }
    for name in bundle_loader.__all__:
        assert getattr(bundle_loader, name).__module__.startswith("bundle_loader")


def test_error_carries_code_and_safe_message() -> None:
    err = BundleLoaderError("too_large", "the bundle is larger than the limit of 5 bytes")
    assert err.code == "too_large"
    assert err.message == "the bundle is larger than the limit of 5 bytes"
    assert str(err) == err.message
    assert repr(err) == (
        "BundleLoaderError(code='too_large', "
        "message='the bundle is larger than the limit of 5 bytes')"
    )


def test_error_survives_pickling() -> None:
    err = pickle.loads(pickle.dumps(BundleLoaderError("not_stored", "nothing here")))
    assert (type(err), err.code, err.message) == (BundleLoaderError, "not_stored", "nothing here")


def test_error_rejects_unknown_codes() -> None:
    with pytest.raises(ValueError, match="unknown bundle_loader error code"):
        BundleLoaderError("oops", "message")  # type: ignore[arg-type]


def test_sha256_hex() -> None:
    assert sha256_hex(b"") == EMPTY_SHA256
    assert sha256_hex(b"hello") == (
        "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"
    )


@pytest.mark.parametrize(
    "value",
    [
        EMPTY_SHA256,
        EMPTY_SHA256.upper(),
        "sha256:" + EMPTY_SHA256,
        "SHA256:" + EMPTY_SHA256.upper(),
    ],
)
def test_normalize_sha256_accepts_case_and_prefix(value: str) -> None:
    assert normalize_sha256(value) == EMPTY_SHA256


@pytest.mark.parametrize(
    "value",
    [
        "",
        EMPTY_SHA256[:-1],
        EMPTY_SHA256 + "0",
        EMPTY_SHA256[:-1] + "g",
        " " + EMPTY_SHA256,
        EMPTY_SHA256 + "\n",
        "sha256:",
        "sha512:" + EMPTY_SHA256,
        "sha256:sha256:" + EMPTY_SHA256,
        "\uff10" * 64,  # fullwidth digits are not hex
    ],
)
def test_normalize_sha256_rejects_everything_else(value: str) -> None:
    with pytest.raises(BundleLoaderError) as caught:
        normalize_sha256(value)
    assert caught.value.code == "invalid_sha256"
    assert caught.value.message == (
        "sha256 must be 64 hexadecimal characters, optionally prefixed with 'sha256:'"
    )


def test_fetch_limits_defaults() -> None:
    limits = FetchLimits()
    assert (limits.max_bytes, limits.timeout_seconds, limits.max_redirects) == (
        8 * 1024 * 1024,
        30.0,
        5,
    )


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"max_bytes": -1}, "max_bytes must not be negative"),
        ({"timeout_seconds": 0}, "timeout_seconds must be positive"),
        ({"timeout_seconds": float("nan")}, "timeout_seconds must be positive"),
        ({"max_redirects": -1}, "max_redirects must not be negative"),
    ],
)
def test_fetch_limits_reject_nonsense(kwargs: dict[str, float], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        FetchLimits(**kwargs)  # type: ignore[arg-type]
