"""Check bundle URLs, fetch bundles over HTTPS, store them by SHA-256, sign their digests.

Knows nothing of plugins. Every failure is a ``BundleLoaderError`` with a
stable ``code`` and a message that is safe to show.
"""

from ._digest import normalize_sha256, sha256_hex
from ._errors import BundleLoaderError
from ._fetch import FetchedBundle, fetch_bundle
from ._limits import FetchLimits
from ._signatures import (
    KeyPair,
    TrustPolicy,
    fetch_signature,
    generate_key_pair,
    key_id,
    load_private_key,
    load_public_key,
    sign_digest,
    signed_message,
    verify_signature,
)
from ._store import BundleStore
from ._urls import check_bundle_url

__all__ = [
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
]
