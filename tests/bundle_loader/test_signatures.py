"""Signatures over bundle digests: keys, the file format, verification, fetching.

Real Ed25519 (and, for the wrong-key cases, real RSA, EC, Ed448 and X25519)
keys are generated here; none is stored in the repository. fetch_signature
runs against real HTTPS and HTTP servers on loopback.
"""

from __future__ import annotations

import asyncio
import base64
import functools
import hashlib
import json
from collections.abc import Callable
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed448, rsa, x25519
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

import bundle_loader
from bundle_loader import (
    BundleLoaderError,
    FetchLimits,
    KeyPair,
    TrustPolicy,
    fetch_bundle,
    fetch_signature,
    generate_key_pair,
    key_id,
    load_private_key,
    load_public_key,
    sha256_hex,
    sign_digest,
    signed_message,
    verify_signature,
)
from bundle_loader._signatures import MAX_SIGNATURE_FILE_BYTES, _signature_url
from tests.support.https_server import LoopbackServer, ThrowawayCA

BUNDLE = b"export default { id: 'notes', setup() {} };\n"
DIGEST = sha256_hex(BUNDLE)
TAMPERED_DIGEST = sha256_hex(BUNDLE + b"// one more line\n")
PREFIX = b"worker-host bundle signature v1\n"
FIELDS = ["format", "algorithm", "keyId", "sha256", "signature"]


@pytest.fixture(autouse=True)
def _no_ambient_trust(monkeypatch: pytest.MonkeyPatch) -> None:
    # TLS trust must come only from what each test sets up.
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)


@pytest.fixture(scope="module")
def signer() -> KeyPair:
    return generate_key_pair()


@pytest.fixture(scope="module")
def stranger() -> KeyPair:
    return generate_key_pair()


@pytest.fixture(scope="module")
def trust(signer: KeyPair) -> TrustPolicy:
    return TrustPolicy.from_public_keys([signer.public_pem])


def error_of(call: Callable[[], object]) -> BundleLoaderError:
    with pytest.raises(BundleLoaderError) as caught:
        call()
    err = caught.value
    assert str(err) == err.message
    assert "\n" not in err.message
    return err


def signature_error(signature_file: bytes, trust: TrustPolicy, sha256: str = DIGEST) -> Any:
    err = error_of(lambda: verify_signature(signature_file, sha256, trust))
    return (err.code, err.message)


def document(signer: KeyPair, sha256: str = DIGEST) -> dict[str, Any]:
    parsed: dict[str, Any] = json.loads(sign_digest(signer.private_pem, sha256))
    return parsed


def encode(doc: Any) -> bytes:
    return json.dumps(doc).encode()


def raw_public(pem: bytes) -> bytes:
    key = serialization.load_pem_public_key(pem)
    assert isinstance(key, Ed25519PublicKey)
    return key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


# -- keys ----------------------------------------------------------------------------


def test_generated_pair_is_pkcs8_and_spki_pem(signer: KeyPair) -> None:
    assert signer.private_pem.startswith(b"-----BEGIN PRIVATE KEY-----\n")
    assert signer.public_pem.startswith(b"-----BEGIN PUBLIC KEY-----\n")
    load_private_key(signer.private_pem)
    load_public_key(signer.public_pem)
    assert generate_key_pair().key_id != signer.key_id


def test_key_pair_repr_leaves_out_the_private_key(signer: KeyPair) -> None:
    text = repr(signer)
    assert "PRIVATE" not in text
    assert signer.key_id in text


def test_key_id_is_prefix_and_16_hex_of_sha256_of_raw_public_key(signer: KeyPair) -> None:
    expected = "ed25519:" + hashlib.sha256(raw_public(signer.public_pem)).hexdigest()[:16]

    assert key_id(signer.public_pem) == expected
    assert signer.key_id == expected
    assert key_id(signer.public_pem) == key_id(signer.public_pem)


def test_key_id_does_not_depend_on_pem_layout(signer: KeyPair) -> None:
    crlf = signer.public_pem.replace(b"\n", b"\r\n")
    assert key_id(crlf) == signer.key_id


def test_key_id_of_a_known_key() -> None:
    # RFC 8032, section 7.1, TEST 1: a fixed key gives a fixed, documented id.
    raw = bytes.fromhex("d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a")
    pem = Ed25519PublicKey.from_public_bytes(raw).public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    assert key_id(pem) == "ed25519:" + hashlib.sha256(raw).hexdigest()[:16]
    assert key_id(pem) == "ed25519:21fe31dfa154a261"


@functools.cache
def foreign_keys() -> dict[str, tuple[bytes, bytes]]:
    """(private PEM, public PEM) of keys that are not Ed25519."""
    pkcs8 = (
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    spki = (serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    keys: dict[str, Any] = {
        "rsa": rsa.generate_private_key(public_exponent=65537, key_size=2048),
        "ec": ec.generate_private_key(ec.SECP256R1()),
        "ed448": ed448.Ed448PrivateKey.generate(),
        "x25519": x25519.X25519PrivateKey.generate(),
    }
    return {
        name: (key.private_bytes(*pkcs8), key.public_key().public_bytes(*spki))
        for name, key in keys.items()
    }


@pytest.mark.parametrize("kind", ["rsa", "ec", "ed448", "x25519"])
def test_other_key_types_are_invalid_key(kind: str) -> None:
    private_pem, public_pem = foreign_keys()[kind]

    err = error_of(lambda: load_private_key(private_pem))
    assert (err.code, err.message) == ("invalid_key", "the private key is not an Ed25519 key")
    err = error_of(lambda: load_public_key(public_pem))
    assert (err.code, err.message) == ("invalid_key", "the public key is not an Ed25519 key")
    assert error_of(lambda: key_id(public_pem)).code == "invalid_key"
    assert error_of(lambda: sign_digest(private_pem, DIGEST)).code == "invalid_key"
    assert error_of(lambda: TrustPolicy.from_public_keys([public_pem])).code == "invalid_key"


NOT_A_PRIVATE_KEY = (
    "invalid_key",
    "the private key is not an unencrypted PEM (PKCS8) private key",
)
NOT_A_PUBLIC_KEY = ("invalid_key", "the public key is not a PEM (SubjectPublicKeyInfo) public key")


@pytest.mark.parametrize(
    "pem",
    [
        b"",
        b"not a key\n",
        b"-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n",
    ],
)
def test_garbage_is_invalid_key(pem: bytes) -> None:
    err = error_of(lambda: load_private_key(pem))
    assert (err.code, err.message) == NOT_A_PRIVATE_KEY
    err = error_of(lambda: load_public_key(pem))
    assert (err.code, err.message) == NOT_A_PUBLIC_KEY


def test_public_and_private_pems_are_not_interchangeable(signer: KeyPair) -> None:
    err = error_of(lambda: load_private_key(signer.public_pem))
    assert (err.code, err.message) == NOT_A_PRIVATE_KEY
    err = error_of(lambda: load_public_key(signer.private_pem))
    assert (err.code, err.message) == NOT_A_PUBLIC_KEY
    # A private key offered as a trusted key is refused, and not echoed.
    err = error_of(lambda: TrustPolicy.from_public_keys([signer.private_pem]))
    assert (err.code, err.message) == NOT_A_PUBLIC_KEY


def test_encrypted_private_key_is_invalid_key(signer: KeyPair) -> None:
    encrypted = load_private_key(signer.private_pem).private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(b"correct horse"),
    )
    err = error_of(lambda: load_private_key(encrypted))
    assert (err.code, err.message) == NOT_A_PRIVATE_KEY


# -- signing and the file format ---------------------------------------------------------


def test_round_trip(signer: KeyPair, trust: TrustPolicy) -> None:
    signature_file = sign_digest(signer.private_pem, DIGEST)
    assert verify_signature(signature_file, DIGEST, trust) == signer.key_id


def test_signature_file_is_the_documented_json(signer: KeyPair) -> None:
    signature_file = sign_digest(signer.private_pem, DIGEST)

    assert signature_file.endswith(b"}\n")
    assert len(signature_file) < MAX_SIGNATURE_FILE_BYTES
    doc = json.loads(signature_file)
    assert list(doc) == FIELDS
    assert doc["format"] == "worker-host-signature/1"
    assert doc["algorithm"] == "ed25519"
    assert doc["keyId"] == signer.key_id
    assert doc["sha256"] == DIGEST
    assert len(base64.b64decode(doc["signature"], validate=True)) == 64


def test_signature_is_over_the_domain_separated_digest(signer: KeyPair) -> None:
    message = PREFIX + DIGEST.encode("ascii")
    assert signed_message(DIGEST) == message
    assert len(message) == 96

    raw = base64.b64decode(document(signer)["signature"])
    public = Ed25519PublicKey.from_public_bytes(raw_public(signer.public_pem))
    public.verify(raw, message)  # raises if the signed bytes differ from the documented ones


def test_signing_is_deterministic_and_accepts_any_digest_form(signer: KeyPair) -> None:
    first = sign_digest(signer.private_pem, DIGEST)
    assert sign_digest(signer.private_pem, "SHA256:" + DIGEST.upper()) == first
    assert signed_message("sha256:" + DIGEST.upper()) == signed_message(DIGEST)


def test_sign_and_verify_refuse_a_malformed_digest(signer: KeyPair, trust: TrustPolicy) -> None:
    assert error_of(lambda: sign_digest(signer.private_pem, "abc")).code == "invalid_sha256"
    signature_file = sign_digest(signer.private_pem, DIGEST)
    assert error_of(lambda: verify_signature(signature_file, "abc", trust)).code == (
        "invalid_sha256"
    )


def test_verify_accepts_any_digest_form(signer: KeyPair, trust: TrustPolicy) -> None:
    signature_file = sign_digest(signer.private_pem, DIGEST)
    assert verify_signature(signature_file, "sha256:" + DIGEST.upper(), trust) == signer.key_id


# -- trust -------------------------------------------------------------------------------


def test_signer_not_in_the_policy_is_untrusted_key(stranger: KeyPair, trust: TrustPolicy) -> None:
    signature_file = sign_digest(stranger.private_pem, DIGEST)

    assert signature_error(signature_file, trust) == (
        "untrusted_key",
        f"the bundle is signed by key {stranger.key_id}, which is not trusted",
    )


def test_empty_policy_trusts_nobody(signer: KeyPair) -> None:
    nobody = TrustPolicy.from_public_keys([])
    signature_file = sign_digest(signer.private_pem, DIGEST)
    assert signature_error(signature_file, nobody)[0] == "untrusted_key"


def test_policy_with_several_keys_names_the_signer(signer: KeyPair, stranger: KeyPair) -> None:
    both = TrustPolicy.from_public_keys([signer.public_pem, stranger.public_pem])
    for pair in (signer, stranger):
        signature_file = sign_digest(pair.private_pem, DIGEST)
        assert verify_signature(signature_file, DIGEST, both) == pair.key_id


def test_policy_shape(signer: KeyPair, stranger: KeyPair) -> None:
    policy = TrustPolicy.from_public_keys(
        [signer.public_pem, stranger.public_pem, signer.public_pem.replace(b"\n", b"\r\n")],
        required=False,
    )

    assert dict(policy.keys) == {
        signer.key_id: signer.public_pem,
        stranger.key_id: stranger.public_pem,
    }
    assert policy.required is False
    assert TrustPolicy.from_public_keys([signer.public_pem]).required is True
    with pytest.raises(TypeError):
        policy.keys[signer.key_id] = b""  # type: ignore[index]
    assert repr(policy) == (
        f"TrustPolicy(keys={sorted([signer.key_id, stranger.key_id])!r}, required=False)"
    )
    same = TrustPolicy({signer.key_id: signer.public_pem, stranger.key_id: stranger.public_pem})
    assert same == TrustPolicy.from_public_keys([stranger.public_pem, signer.public_pem])
    assert hash(same) == hash(
        TrustPolicy.from_public_keys([stranger.public_pem, signer.public_pem])
    )


def test_policy_built_by_hand_must_list_keys_under_their_own_ids(
    signer: KeyPair, stranger: KeyPair
) -> None:
    err = error_of(lambda: TrustPolicy({stranger.key_id: signer.public_pem}))
    assert (err.code, err.message) == (
        "invalid_key",
        f"trusted key {signer.key_id} is listed under another key id",
    )


def test_from_public_keys_wants_a_list_not_one_key(signer: KeyPair) -> None:
    with pytest.raises(TypeError, match="not a single key"):
        TrustPolicy.from_public_keys(signer.public_pem)  # type: ignore[arg-type]


# -- verification failures -----------------------------------------------------------------


def test_tampered_bundle_is_signature_invalid(signer: KeyPair, trust: TrustPolicy) -> None:
    signature_file = sign_digest(signer.private_pem, DIGEST)

    assert signature_error(signature_file, trust, sha256=TAMPERED_DIGEST) == (
        "signature_invalid",
        f"the signature is for bundle sha256 {DIGEST}, not {TAMPERED_DIGEST}",
    )


def test_digest_field_rewritten_to_match_is_signature_invalid(
    signer: KeyPair, trust: TrustPolicy
) -> None:
    doc = document(signer)
    doc["sha256"] = TAMPERED_DIGEST

    assert signature_error(encode(doc), trust, sha256=TAMPERED_DIGEST) == (
        "signature_invalid",
        f"the signature does not verify with key {signer.key_id}",
    )


@pytest.mark.parametrize("index", [0, 31, 32, 63])
def test_flipped_signature_byte_is_signature_invalid(
    index: int, signer: KeyPair, trust: TrustPolicy
) -> None:
    doc = document(signer)
    raw = bytearray(base64.b64decode(doc["signature"]))
    raw[index] ^= 0x01
    doc["signature"] = base64.b64encode(bytes(raw)).decode()

    assert signature_error(encode(doc), trust) == (
        "signature_invalid",
        f"the signature does not verify with key {signer.key_id}",
    )


def test_trusted_key_id_on_a_strangers_signature_is_signature_invalid(
    signer: KeyPair, stranger: KeyPair, trust: TrustPolicy
) -> None:
    doc = document(stranger)
    doc["keyId"] = signer.key_id

    assert signature_error(encode(doc), trust) == (
        "signature_invalid",
        f"the signature does not verify with key {signer.key_id}",
    )


def test_signature_over_the_bare_digest_is_not_accepted(
    signer: KeyPair, trust: TrustPolicy
) -> None:
    # Without the prefix the message is some other data the key might have signed.
    doc = document(signer)
    bare = load_private_key(signer.private_pem).sign(DIGEST.encode("ascii"))
    doc["signature"] = base64.b64encode(bare).decode()

    assert signature_error(encode(doc), trust)[0] == "signature_invalid"


def edited(change: Callable[[dict[str, Any]], object]) -> Callable[[KeyPair], bytes]:
    def build(signer: KeyPair) -> bytes:
        doc = document(signer)
        change(doc)
        return encode(doc)

    return build


def without(name: str) -> Callable[[KeyPair], bytes]:
    return edited(lambda doc: doc.pop(name))


def replaced(**fields: Any) -> Callable[[KeyPair], bytes]:
    return edited(lambda doc: doc.update(fields))


def _noncanonical_base64(doc: dict[str, Any]) -> None:
    # 64 bytes leave 4 unused bits before "=="; setting one still decodes the same.
    text: str = doc["signature"]
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
    last = alphabet.index(text[-3])
    assert last & 0b1111 == 0
    doc["signature"] = text[:-3] + alphabet[last | 1] + "=="


BAD_FILES: list[tuple[str, Callable[[KeyPair], bytes], str]] = [
    ("format_v2", replaced(format="worker-host-signature/2"), "format_not_v1"),
    ("format_other", replaced(format="minisign"), "format_not_v1"),
    ("algorithm_rsa", replaced(algorithm="rsa-pss-sha256"), "algorithm"),
    ("algorithm_case", replaced(algorithm="Ed25519"), "algorithm"),
    ("key_id_upper", edited(lambda d: d.update(keyId=d["keyId"].upper())), "key_id"),
    ("key_id_short", edited(lambda d: d.update(keyId=d["keyId"][:-1])), "key_id"),
    ("sha256_upper", edited(lambda d: d.update(sha256=d["sha256"].upper())), "sha256"),
    ("sha256_prefixed", edited(lambda d: d.update(sha256="sha256:" + d["sha256"])), "sha256"),
    ("base64_garbage", replaced(signature="not base64!"), "base64"),
    ("base64_unpadded", edited(lambda d: d.update(signature=d["signature"][:-2])), "base64"),
    ("base64_urlsafe", replaced(signature="-_" * 43 + "=="), "base64"),
    ("base64_noncanonical", edited(_noncanonical_base64), "base64"),
    ("signature_short", replaced(signature=base64.b64encode(b"\0" * 63).decode()), "base64"),
    ("signature_long", replaced(signature=base64.b64encode(b"\0" * 65).decode()), "base64"),
    ("signature_empty", replaced(signature=""), "base64"),
    ("extra_field", replaced(comment="looks fine to me"), "extra"),
    ("number_field", replaced(sha256=1), "not_string_sha256"),
    ("null_field", replaced(keyId=None), "not_string_keyId"),
    ("nested_field", replaced(signature={"value": "x"}), "not_string_signature"),
    ("array", lambda signer: encode([document(signer)]), "not_object"),
    ("string", lambda signer: encode("signed"), "not_object"),
    ("not_json", lambda signer: b"ed25519 signature: 0123\n", "not_json"),
    ("empty", lambda signer: b"", "not_json"),
    ("truncated", lambda signer: sign_digest(signer.private_pem, DIGEST)[:-5], "not_json"),
    ("not_utf8", lambda signer: b'{"format": "\xff"}', "not_json"),
    (
        "utf16",
        lambda signer: sign_digest(signer.private_pem, DIGEST).decode().encode("utf-16"),
        "not_json",
    ),
    ("bom", lambda signer: b"\xef\xbb\xbf" + sign_digest(signer.private_pem, DIGEST), "not_json"),
    ("nan", lambda signer: b'{"format": NaN}', "not_json"),
    ("deep", lambda signer: b"[" * 2000 + b"]" * 2000, "not_json"),
    (
        "duplicate",
        lambda signer: sign_digest(signer.private_pem, DIGEST).replace(
            b'"format"', b'"format": "worker-host-signature/1", "format"'
        ),
        "duplicate",
    ),
    (
        "oversized",
        lambda signer: (
            sign_digest(signer.private_pem, DIGEST)[:-2] + b" " * MAX_SIGNATURE_FILE_BYTES + b"}\n"
        ),
        "oversized",
    ),
] + [(f"missing_{name}", without(name), f"missing_{name}") for name in FIELDS]

MESSAGES = {
    "format_not_v1": "the signature file's format is not worker-host-signature/1",
    "algorithm": "the signature algorithm is not ed25519",
    "key_id": "the signature file's keyId is not 'ed25519:' and 16 lowercase hex characters",
    "sha256": "the signature file's sha256 is not 64 lowercase hex characters",
    "base64": "the signature is not the padded base64 of 64 bytes",
    "extra": "the signature file has unexpected fields",
    "not_object": "the signature file is not a JSON object",
    "not_json": "the signature file is not valid UTF-8 JSON",
    "duplicate": "the signature file repeats a field",
    "oversized": "the signature file is larger than the limit of 4096 bytes",
    **{f"missing_{name}": f"the signature file has no {name!r} field" for name in FIELDS},
    **{
        f"not_string_{name}": f"the signature file's {name!r} field is not a string"
        for name in FIELDS
    },
}


@pytest.mark.parametrize(
    ("build", "message"),
    [pytest.param(build, MESSAGES[key], id=case) for case, build, key in BAD_FILES],
)
def test_malformed_signature_files_are_signature_invalid(
    build: Callable[[KeyPair], bytes], message: str, signer: KeyPair, trust: TrustPolicy
) -> None:
    assert signature_error(build(signer), trust) == ("signature_invalid", message)


def test_messages_never_repeat_the_file(signer: KeyPair, trust: TrustPolicy) -> None:
    marker = "SECRET-MARKER-/srv/data"
    for doc in (
        {**document(signer), "note": marker},
        {**document(signer), marker: "x"},
        {**document(signer), "format": marker},
        {**document(signer), "keyId": marker},
        {**document(signer), "signature": marker},
    ):
        code, message = signature_error(encode(doc), trust)
        assert code == "signature_invalid"
        assert "SECRET" not in message


def test_file_of_exactly_the_cap_is_parsed(signer: KeyPair, trust: TrustPolicy) -> None:
    signature_file = sign_digest(signer.private_pem, DIGEST)
    padded = signature_file + b" " * (MAX_SIGNATURE_FILE_BYTES - len(signature_file))

    assert len(padded) == MAX_SIGNATURE_FILE_BYTES
    assert verify_signature(padded, DIGEST, trust) == signer.key_id


def test_field_order_and_layout_do_not_matter(signer: KeyPair, trust: TrustPolicy) -> None:
    doc = document(signer)
    compact = json.dumps(dict(reversed(doc.items())), separators=(",", ":")).encode()
    assert verify_signature(compact, DIGEST, trust) == signer.key_id


# -- fetch_signature ---------------------------------------------------------------------------


def fetch_sig(url: str, **kwargs: Any) -> bytes:
    return asyncio.run(fetch_signature(url, **kwargs))


def fetch_sig_error(url: str, **kwargs: Any) -> BundleLoaderError:
    return error_of(lambda: fetch_sig(url, **kwargs))


def test_fetches_url_dot_sig_and_verifies_end_to_end(
    https_server: LoopbackServer, tls_ca: ThrowawayCA, signer: KeyPair, trust: TrustPolicy
) -> None:
    signature_file = sign_digest(signer.private_pem, DIGEST)
    https_server.serve("/notes/worker.js", BUNDLE)
    https_server.serve("/notes/worker.js.sig", signature_file, content_type="application/json")
    url = https_server.url("/notes/worker.js")

    async def fetch_both() -> tuple[bytes, str]:
        bundle = await fetch_bundle(url, ca_bundle=tls_ca.ca_file)
        return await fetch_signature(url, ca_bundle=tls_ca.ca_file), bundle.sha256

    fetched, digest = asyncio.run(fetch_both())

    assert fetched == signature_file
    assert verify_signature(fetched, digest, trust) == signer.key_id
    assert https_server.requests == ["/notes/worker.js", "/notes/worker.js.sig"]


def test_query_string_stays_after_the_suffix(
    https_server: LoopbackServer, tls_ca: ThrowawayCA
) -> None:
    https_server.serve("/worker.js.sig", b"{}")

    assert fetch_sig(https_server.url("/worker.js?v=2"), ca_bundle=tls_ca.ca_file) == b"{}"
    assert https_server.requests == ["/worker.js.sig?v=2"]


@pytest.mark.parametrize(
    ("bundle_url", "signature_url"),
    [
        ("https://plugins.example/notes/worker.js", "https://plugins.example/notes/worker.js.sig"),
        ("https://plugins.example/w.js?v=2&x=1", "https://plugins.example/w.js.sig?v=2&x=1"),
        ("https://plugins.example", "https://plugins.example/.sig"),
        ("https://plugins.example:8443/", "https://plugins.example:8443/.sig"),
        ("https://[::1]:8443/w.js", "https://[::1]:8443/w.js.sig"),
    ],
)
def test_signature_url(bundle_url: str, signature_url: str) -> None:
    assert _signature_url(bundle_url) == signature_url


def test_404_is_signature_missing(https_server: LoopbackServer, tls_ca: ThrowawayCA) -> None:
    https_server.serve("/worker.js", BUNDLE)

    err = fetch_sig_error(https_server.url("/worker.js"), ca_bundle=tls_ca.ca_file)

    assert (err.code, err.message) == (
        "signature_missing",
        "the bundle has no signature file (HTTP status 404)",
    )
    assert https_server.requests == ["/worker.js.sig"]


def test_redirect_to_a_404_is_signature_missing(
    https_server: LoopbackServer, tls_ca: ThrowawayCA
) -> None:
    https_server.redirect("/worker.js.sig", "/elsewhere.sig")

    err = fetch_sig_error(https_server.url("/worker.js"), ca_bundle=tls_ca.ca_file)

    assert err.code == "signature_missing"
    assert https_server.requests == ["/worker.js.sig", "/elsewhere.sig"]


@pytest.mark.parametrize("status", [403, 410, 500])
def test_other_failing_statuses_are_http_status(
    status: int, https_server: LoopbackServer, tls_ca: ThrowawayCA
) -> None:
    https_server.serve("/worker.js.sig", b"secret stack trace", status=status)

    err = fetch_sig_error(https_server.url("/worker.js"), ca_bundle=tls_ca.ca_file)

    assert (err.code, err.message) == (
        "http_status",
        f"the server answered with HTTP status {status}",
    )


TOO_LARGE = ("too_large", "the signature file is larger than the limit of 4096 bytes")


@pytest.mark.parametrize("chunked", [False, True])
def test_oversized_signature_file_is_too_large(
    chunked: bool, https_server: LoopbackServer, tls_ca: ThrowawayCA
) -> None:
    body = b" " * (MAX_SIGNATURE_FILE_BYTES + 1)
    if chunked:
        https_server.serve_chunked("/worker.js.sig", body, chunk_size=1000)
    else:
        https_server.serve("/worker.js.sig", body)

    err = fetch_sig_error(https_server.url("/worker.js"), ca_bundle=tls_ca.ca_file)

    assert (err.code, err.message) == TOO_LARGE


def test_the_cap_holds_even_with_generous_limits(
    https_server: LoopbackServer, tls_ca: ThrowawayCA
) -> None:
    https_server.serve("/worker.js.sig", b"x" * (1024 * 1024))

    err = fetch_sig_error(
        https_server.url("/worker.js"),
        ca_bundle=tls_ca.ca_file,
        limits=FetchLimits(max_bytes=64 * 1024 * 1024),
    )

    assert (err.code, err.message) == TOO_LARGE


def test_file_of_exactly_the_cap_is_fetched(
    https_server: LoopbackServer, tls_ca: ThrowawayCA
) -> None:
    body = b" " * MAX_SIGNATURE_FILE_BYTES
    https_server.serve_chunked("/worker.js.sig", body, chunk_size=1000)
    assert fetch_sig(https_server.url("/worker.js"), ca_bundle=tls_ca.ca_file) == body


def test_a_smaller_max_bytes_in_limits_wins(
    https_server: LoopbackServer, tls_ca: ThrowawayCA
) -> None:
    https_server.serve("/worker.js.sig", b"x" * 101)

    err = fetch_sig_error(
        https_server.url("/worker.js"), ca_bundle=tls_ca.ca_file, limits=FetchLimits(max_bytes=100)
    )

    assert (err.code, err.message) == (
        "too_large",
        "the signature file is larger than the limit of 100 bytes",
    )


def test_follows_a_good_redirect(https_server: LoopbackServer, tls_ca: ThrowawayCA) -> None:
    https_server.redirect("/worker.js.sig", https_server.url("/blobs/sig-1"))
    https_server.serve("/blobs/sig-1", b"{}")

    assert fetch_sig(https_server.url("/worker.js"), ca_bundle=tls_ca.ca_file) == b"{}"


@pytest.mark.parametrize(
    ("location", "message"),
    [
        ("http://plugins.example/worker.js.sig", "redirect refused: URL must use https"),
        (
            "https://deploy:hunter2@plugins.example/worker.js.sig",
            "redirect refused: URL must not contain credentials",
        ),
        ("file:///etc/passwd", "redirect refused: URL must use https"),
    ],
)
def test_every_redirect_target_is_checked(
    location: str, message: str, https_server: LoopbackServer, tls_ca: ThrowawayCA
) -> None:
    https_server.redirect("/worker.js.sig", location)

    err = fetch_sig_error(https_server.url("/worker.js"), ca_bundle=tls_ca.ca_file)

    assert (err.code, err.message) == ("invalid_url", message)


def test_redirect_to_http_loopback_only_when_opted_in(
    https_server: LoopbackServer, http_server: LoopbackServer, tls_ca: ThrowawayCA
) -> None:
    http_server.serve("/worker.js.sig", b"{}")
    https_server.redirect("/worker.js.sig", http_server.url("/worker.js.sig"))
    url = https_server.url("/worker.js")

    err = fetch_sig_error(url, ca_bundle=tls_ca.ca_file)
    assert (err.code, err.message) == ("invalid_url", "redirect refused: URL must use https")
    assert http_server.requests == []

    assert fetch_sig(url, ca_bundle=tls_ca.ca_file, allow_http_loopback=True) == b"{}"


def test_too_many_redirects_is_request_failed(
    https_server: LoopbackServer, tls_ca: ThrowawayCA
) -> None:
    https_server.redirect("/worker.js.sig", "/a")
    https_server.redirect("/a", "/worker.js.sig")

    err = fetch_sig_error(
        https_server.url("/worker.js"),
        ca_bundle=tls_ca.ca_file,
        limits=FetchLimits(max_redirects=1),
    )

    assert (err.code, err.message) == ("request_failed", "too many redirects (the limit is 1)")


def test_bundle_url_rules_apply_before_any_request(http_server: LoopbackServer) -> None:
    http_server.serve("/worker.js.sig", b"{}")
    url = http_server.url("/worker.js")

    err = fetch_sig_error(url)
    assert (err.code, err.message) == ("invalid_url", "URL must use https")
    err = fetch_sig_error(url.replace("http://", "http://user:pw@"), allow_http_loopback=True)
    assert (err.code, err.message) == ("invalid_url", "URL must not contain credentials")
    assert http_server.requests == []

    assert fetch_sig(url, allow_http_loopback=True) == b"{}"


def test_tls_is_verified(https_server: LoopbackServer) -> None:
    https_server.serve("/worker.js.sig", b"{}")

    err = fetch_sig_error(https_server.url("/worker.js"))

    assert (err.code, err.message) == (
        "request_failed",
        "the server's TLS certificate could not be verified",
    )
    assert https_server.requests == []


def test_slow_signature_file_is_timed_out(
    https_server: LoopbackServer, tls_ca: ThrowawayCA
) -> None:
    https_server.serve_slow("/worker.js.sig", [b"{"] * 10, 0.2)

    err = fetch_sig_error(
        https_server.url("/worker.js"),
        ca_bundle=tls_ca.ca_file,
        limits=FetchLimits(timeout_seconds=0.5),
    )

    assert (err.code, err.message) == (
        "timed_out",
        "the request did not finish within the 0.5-second limit",
    )


# -- the package surface -------------------------------------------------------------------


def test_signature_names_are_exported() -> None:
    for name in (
        "KeyPair",
        "TrustPolicy",
        "fetch_signature",
        "generate_key_pair",
        "key_id",
        "load_private_key",
        "load_public_key",
        "sign_digest",
        "signed_message",
        "verify_signature",
    ):
        assert name in bundle_loader.__all__
    assert bundle_loader.__all__ == sorted(bundle_loader.__all__)


@pytest.mark.parametrize(
    "code", ["invalid_key", "signature_invalid", "untrusted_key", "signature_missing"]
)
def test_new_codes_are_known(code: Any) -> None:
    assert BundleLoaderError(code, "message").code == code
