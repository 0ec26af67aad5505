"""Check bundle URLs, fetch bundles over HTTPS, and store them by SHA-256.

Knows nothing of plugins. Every failure is a ``BundleLoaderError`` with a
stable ``code`` and a message that is safe to show.
"""

from ._digest import normalize_sha256, sha256_hex
from ._errors import BundleLoaderError
from ._urls import check_bundle_url

__all__ = [
    "BundleLoaderError",
    "check_bundle_url",
    "normalize_sha256",
    "sha256_hex",
]
