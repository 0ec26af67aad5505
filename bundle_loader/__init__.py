"""Check bundle URLs, fetch bundles over HTTPS, and store them by SHA-256.

Knows nothing of plugins. Every failure is a ``BundleLoaderError`` with a
stable ``code`` and a message that is safe to show.
"""

from ._digest import normalize_sha256, sha256_hex
from ._errors import BundleLoaderError
from ._fetch import FetchedBundle, fetch_bundle
from ._limits import FetchLimits
from ._store import BundleStore
from ._urls import check_bundle_url

__all__ = [
    "BundleLoaderError",
    "BundleStore",
    "FetchLimits",
    "FetchedBundle",
    "check_bundle_url",
    "fetch_bundle",
    "normalize_sha256",
    "sha256_hex",
]
