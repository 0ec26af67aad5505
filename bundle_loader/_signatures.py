"""Detached Ed25519 signatures over a bundle's SHA-256 digest.

A signature is over the digest, not the bytes, so a pinned bundle's signature
can be checked again on every activation from the store, which has already
verified the digest, without hashing anything more.

Keys are PEM files: PKCS8 (unencrypted) for the private key,
SubjectPublicKeyInfo for the public key. A key's id is ``ed25519:`` followed by
the first 16 hex characters (64 bits) of the SHA-256 of the raw 32-byte public
key. The id only selects which trusted key to verify with; it is not what
makes a signature valid, so a colliding id gains a forger nothing.

Signature file, format version 1 (what ``<bundle URL>.sig`` holds): a UTF-8
JSON object of at most ``MAX_SIGNATURE_FILE_BYTES`` with exactly these fields::

    {
      "format": "worker-host-signature/1",
      "algorithm": "ed25519",
      "keyId": "ed25519:<16 lowercase hex>",
      "sha256": "<the bundle's digest, 64 lowercase hex>",
      "signature": "<standard padded base64 of the 64-byte Ed25519 signature>"
    }

The signed message is ``b"worker-host bundle signature v1\\n"`` followed by
the 64 ASCII bytes of the lowercase hex digest (96 bytes in all; see
``signed_message``). The fixed prefix keeps a signature over a bundle from ever
being mistaken for a signature over any other data made with the same key.
Unknown fields, duplicate fields and non-canonical base64 are refused, so one
signature has exactly one file form (``sign_digest`` writes it).
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import hashlib
import json
import os
import re
import urllib.parse
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, NoReturn

from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from ._digest import normalize_sha256
from ._errors import BundleLoaderError
from ._fetch import TransportFactory, fetch_checked_url
from ._limits import FetchLimits
from ._urls import check_bundle_url

SIGNATURE_FORMAT = "worker-host-signature/1"
SIGNATURE_ALGORITHM = "ed25519"
SIGNED_MESSAGE_PREFIX = b"worker-host bundle signature v1\n"
# A version-1 file is about 270 bytes; the cap leaves room and bounds parsing.
MAX_SIGNATURE_FILE_BYTES = 4 * 1024
SIGNATURE_URL_SUFFIX = ".sig"

_KEY_ID_PREFIX = "ed25519:"
_KEY_ID_HEX_CHARS = 16
_KEY_ID = re.compile(r"ed25519:[0-9a-f]{16}")
_HEX64 = re.compile(r"[0-9a-f]{64}")
_FIELDS = ("format", "algorithm", "keyId", "sha256", "signature")
_SIGNATURE_BYTES = 64
_DEFAULT_LIMITS = FetchLimits()


@dataclass(frozen=True)
class KeyPair:
    """A fresh Ed25519 key pair as PEM, and the public key's id.

    ``private_pem`` is left out of ``repr`` so that logging a pair never logs
    the secret.
    """

    private_pem: bytes = field(repr=False)
    public_pem: bytes
    key_id: str


def generate_key_pair() -> KeyPair:
    """Make a new Ed25519 key pair: PKCS8 private PEM, SubjectPublicKeyInfo public PEM."""
    private = Ed25519PrivateKey.generate()
    return KeyPair(
        private_pem=private.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ),
        public_pem=_public_pem(private.public_key()),
        key_id=_key_id_of(private.public_key()),
    )


def key_id(public_pem: bytes) -> str:
    """The id of a public key: ``ed25519:`` + the first 16 hex of SHA-256 of its raw 32 bytes.

    Raises ``invalid_key`` if ``public_pem`` is not an Ed25519 public key PEM.
    """
    return _key_id_of(load_public_key(public_pem))


def load_private_key(pem: bytes) -> Ed25519PrivateKey:
    """Load an unencrypted PKCS8 PEM Ed25519 private key.

    Raises ``invalid_key`` for anything else (garbage, an encrypted key, a
    public key, an RSA or EC key); the message never repeats the input.
    """
    try:
        key = serialization.load_pem_private_key(pem, password=None)
    except (ValueError, TypeError, UnsupportedAlgorithm) as exc:
        raise BundleLoaderError(
            "invalid_key", "the private key is not an unencrypted PEM (PKCS8) private key"
        ) from exc
    if not isinstance(key, Ed25519PrivateKey):
        raise BundleLoaderError("invalid_key", "the private key is not an Ed25519 key")
    return key


def load_public_key(pem: bytes) -> Ed25519PublicKey:
    """Load a SubjectPublicKeyInfo PEM Ed25519 public key.

    Raises ``invalid_key`` for anything else (garbage, a private key, an RSA
    or EC key); the message never repeats the input.
    """
    try:
        key = serialization.load_pem_public_key(pem)
    except (ValueError, TypeError, UnsupportedAlgorithm) as exc:
        raise BundleLoaderError(
            "invalid_key", "the public key is not a PEM (SubjectPublicKeyInfo) public key"
        ) from exc
    if not isinstance(key, Ed25519PublicKey):
        raise BundleLoaderError("invalid_key", "the public key is not an Ed25519 key")
    return key


def signed_message(sha256: str) -> bytes:
    """The exact bytes a version-1 signature signs for the bundle digest ``sha256``.

    ``SIGNED_MESSAGE_PREFIX`` + the lowercase hex digest as ASCII. ``sha256``
    may be in any form ``normalize_sha256`` accepts (else ``invalid_sha256``).
    Useful to sign with another tool, such as an HSM.
    """
    return SIGNED_MESSAGE_PREFIX + normalize_sha256(sha256).encode("ascii")


def sign_digest(private_pem: bytes, sha256: str) -> bytes:
    """Sign the bundle digest ``sha256`` and return the signature file's bytes.

    The file is the version-1 JSON document described in this module, fields
    in the documented order, indented, ending with a newline. Ed25519 is
    deterministic, so the same key and digest always give the same bytes.
    Raises ``invalid_key`` (see ``load_private_key``) or ``invalid_sha256``.
    """
    digest = normalize_sha256(sha256)
    private = load_private_key(private_pem)
    signature = private.sign(signed_message(digest))
    document = {
        "format": SIGNATURE_FORMAT,
        "algorithm": SIGNATURE_ALGORITHM,
        "keyId": _key_id_of(private.public_key()),
        "sha256": digest,
        "signature": base64.b64encode(signature).decode("ascii"),
    }
    return (json.dumps(document, indent=2) + "\n").encode("ascii")


@dataclass(frozen=True, repr=False)
class TrustPolicy:
    """The public keys whose signatures are trusted, by key id.

    Build one with ``TrustPolicy.from_public_keys([pem, ...])``. Constructing
    it directly checks every entry: each value must be an Ed25519 public key
    PEM and each key its own id, else ``invalid_key``. ``keys`` is then a
    read-only mapping to the keys' canonical PEM.

    ``required`` is for the caller: ``verify_signature`` always verifies, and
    it is the caller that decides whether a bundle with no signature file
    (``signature_missing``) may still be used when ``required`` is false.
    """

    keys: Mapping[str, bytes]
    required: bool = True
    _public: Mapping[str, Ed25519PublicKey] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        public: dict[str, Ed25519PublicKey] = {}
        canonical: dict[str, bytes] = {}
        for listed_id, pem in self.keys.items():
            key = load_public_key(pem)
            actual_id = _key_id_of(key)
            if listed_id != actual_id:
                raise BundleLoaderError(
                    "invalid_key", f"trusted key {actual_id} is listed under another key id"
                )
            public[actual_id] = key
            canonical[actual_id] = _public_pem(key)
        object.__setattr__(self, "keys", MappingProxyType(canonical))
        object.__setattr__(self, "_public", MappingProxyType(public))

    @classmethod
    def from_public_keys(cls, pems: Iterable[bytes], *, required: bool = True) -> TrustPolicy:
        """A policy trusting each public key PEM in ``pems`` (duplicates are fine).

        Raises ``invalid_key`` if one is not an Ed25519 public key PEM, or if
        two different keys share a key id.
        """
        if isinstance(pems, (bytes, bytearray, str)):
            raise TypeError("pems must be an iterable of PEM keys, not a single key")
        keys: dict[str, bytes] = {}
        for pem in pems:
            key = load_public_key(pem)
            kid = _key_id_of(key)
            canonical = _public_pem(key)
            if keys.setdefault(kid, canonical) != canonical:
                raise BundleLoaderError("invalid_key", f"two trusted keys share key id {kid}")
        return cls(keys=keys, required=required)

    def __repr__(self) -> str:
        return f"TrustPolicy(keys={sorted(self.keys)!r}, required={self.required!r})"

    def __hash__(self) -> int:
        return hash((frozenset(self.keys.items()), self.required))


def verify_signature(signature_file: bytes, sha256: str, trust: TrustPolicy) -> str:
    """Check that ``signature_file`` is a trusted signature over the digest ``sha256``.

    Returns the signer's key id. Checks, in order: the file is a well-formed
    version-1 signature file no larger than ``MAX_SIGNATURE_FILE_BYTES``
    (else ``signature_invalid``); its ``sha256`` is the bundle's (else
    ``signature_invalid``: the signature is for other bytes); its ``keyId`` is
    in ``trust`` (else ``untrusted_key``); the signature verifies with that
    key (else ``signature_invalid``). A malformed ``sha256`` argument raises
    ``invalid_sha256``. Messages are one line and never repeat the file.
    """
    digest = normalize_sha256(sha256)
    claimed_id, claimed_digest, signature = _parse(signature_file)
    if claimed_digest != digest:
        raise _invalid(f"the signature is for bundle sha256 {claimed_digest}, not {digest}")
    key = trust._public.get(claimed_id)
    if key is None:
        raise BundleLoaderError(
            "untrusted_key", f"the bundle is signed by key {claimed_id}, which is not trusted"
        )
    try:
        key.verify(signature, signed_message(digest))
    except InvalidSignature as exc:
        raise BundleLoaderError(
            "signature_invalid", f"the signature does not verify with key {claimed_id}"
        ) from exc
    return claimed_id


async def fetch_signature(
    bundle_url: str,
    *,
    limits: FetchLimits = _DEFAULT_LIMITS,
    allow_http_loopback: bool = False,
    ca_bundle: str | os.PathLike[str] | None = None,
    transport: TransportFactory | None = None,
) -> bytes:
    """Fetch the signature file of the bundle at ``bundle_url`` and return its bytes.

    The signature file's URL is ``bundle_url`` with ``.sig`` appended to its
    path (a query string is kept after it; for a URL without one this is just
    ``bundle_url + ".sig"``). The fetch is ``fetch_bundle``'s: the same URL
    rules for the URL and every redirect target, verified TLS with the same
    trust, ``limits.timeout_seconds`` and ``limits.max_redirects``; but the
    body is capped at the smaller of ``limits.max_bytes`` and
    ``MAX_SIGNATURE_FILE_BYTES``. The bytes are not parsed: pass them to
    ``verify_signature``.

    Failure codes: ``signature_missing`` (final status 404) and otherwise
    ``fetch_bundle``'s: ``invalid_url``, ``request_failed``, ``timed_out``,
    ``http_status``, ``too_large``.
    """
    check_bundle_url(bundle_url, allow_http_loopback=allow_http_loopback)
    url = check_bundle_url(_signature_url(bundle_url), allow_http_loopback=allow_http_loopback)
    capped = dataclasses.replace(limits, max_bytes=min(limits.max_bytes, MAX_SIGNATURE_FILE_BYTES))
    _, data = await fetch_checked_url(
        url,
        capped,
        allow_http_loopback,
        ca_bundle,
        noun="signature file",
        transport=transport,
        not_found=BundleLoaderError(
            "signature_missing", "the bundle has no signature file (HTTP status 404)"
        ),
    )
    return data


def _signature_url(bundle_url: str) -> str:
    parts = urllib.parse.urlsplit(bundle_url)
    # An empty path must not become a suffix of the host name.
    path = (parts.path or "/") + SIGNATURE_URL_SUFFIX
    return urllib.parse.urlunsplit(parts._replace(path=path))


def _parse(signature_file: bytes) -> tuple[str, str, bytes]:
    """The key id, digest and raw signature of a version-1 signature file."""
    if len(signature_file) > MAX_SIGNATURE_FILE_BYTES:
        raise _invalid(
            f"the signature file is larger than the limit of {MAX_SIGNATURE_FILE_BYTES} bytes"
        )
    try:
        document = json.loads(
            bytes(signature_file).decode("utf-8"),
            object_pairs_hook=_unique_fields,
            parse_constant=_refuse_constant,
        )
    except _DuplicateField as exc:
        raise _invalid("the signature file repeats a field") from exc
    # JSONDecodeError and UnicodeDecodeError are ValueErrors; deep nesting is a RecursionError.
    except (ValueError, RecursionError) as exc:
        raise _invalid("the signature file is not valid UTF-8 JSON") from exc
    if not isinstance(document, dict):
        raise _invalid("the signature file is not a JSON object")
    for name in _FIELDS:
        if name not in document:
            raise _invalid(f"the signature file has no {name!r} field")
        if not isinstance(document[name], str):
            raise _invalid(f"the signature file's {name!r} field is not a string")
    if len(document) != len(_FIELDS):
        raise _invalid("the signature file has unexpected fields")
    if document["format"] != SIGNATURE_FORMAT:
        raise _invalid(f"the signature file's format is not {SIGNATURE_FORMAT}")
    if document["algorithm"] != SIGNATURE_ALGORITHM:
        raise _invalid(f"the signature algorithm is not {SIGNATURE_ALGORITHM}")
    claimed_id: str = document["keyId"]
    if not _KEY_ID.fullmatch(claimed_id):
        raise _invalid(
            "the signature file's keyId is not 'ed25519:' and 16 lowercase hex characters"
        )
    claimed_digest: str = document["sha256"]
    if not _HEX64.fullmatch(claimed_digest):
        raise _invalid("the signature file's sha256 is not 64 lowercase hex characters")
    return claimed_id, claimed_digest, _decode_signature(document["signature"])


def _decode_signature(text: str) -> bytes:
    try:
        raw = base64.b64decode(text.encode("ascii"), validate=True)
    except (UnicodeEncodeError, binascii.Error):
        raw = b""
    # Re-encoding refuses the non-canonical spellings that decode to the same bytes.
    if len(raw) != _SIGNATURE_BYTES or base64.b64encode(raw).decode("ascii") != text:
        raise _invalid(f"the signature is not the padded base64 of {_SIGNATURE_BYTES} bytes")
    return raw


class _DuplicateField(Exception):
    pass


def _unique_fields(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    document = dict(pairs)
    if len(document) != len(pairs):
        raise _DuplicateField
    return document


def _refuse_constant(name: str) -> NoReturn:
    raise ValueError("NaN and Infinity are not JSON")


def _invalid(message: str) -> BundleLoaderError:
    return BundleLoaderError("signature_invalid", message)


def _key_id_of(key: Ed25519PublicKey) -> str:
    raw = key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return _KEY_ID_PREFIX + hashlib.sha256(raw).hexdigest()[:_KEY_ID_HEX_CHARS]


def _public_pem(key: Ed25519PublicKey) -> bytes:
    return key.public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
