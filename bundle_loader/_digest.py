"""SHA-256 digests: computing them and accepting them from users."""

from __future__ import annotations

import hashlib
import re

from ._errors import BundleLoaderError

_HEX64 = re.compile(r"[0-9a-f]{64}")
_PREFIX = "sha256:"


def sha256_hex(data: bytes) -> str:
    """Return the SHA-256 of ``data`` as 64 lowercase hex characters."""
    return hashlib.sha256(data).hexdigest()


def normalize_sha256(value: str) -> str:
    """Return ``value`` as a canonical digest: 64 lowercase hex characters.

    Accepts upper or lower case and an optional ``sha256:`` prefix (in any
    case). Surrounding whitespace is not stripped. Anything else raises
    ``BundleLoaderError`` with code ``invalid_sha256``.
    """
    if isinstance(value, str) and value.isascii():
        candidate = value.lower().removeprefix(_PREFIX)
        if _HEX64.fullmatch(candidate):
            return candidate
    raise BundleLoaderError(
        "invalid_sha256",
        "sha256 must be 64 hexadecimal characters, optionally prefixed with 'sha256:'",
    )
