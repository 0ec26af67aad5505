"""A content-addressed directory of bundle bytes, verified on every read."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

from ._digest import normalize_sha256, sha256_hex
from ._errors import BundleLoaderError

_ALGORITHM_DIR = "sha256"
_TEMP_PREFIX = ".tmp-"


class BundleStore:
    """Bundle bytes stored by SHA-256 under ``<root>/sha256/<first 2 hex>/<digest>``.

    The root directory is created on the first ``put``. Writes are atomic
    (a temporary file in the same directory, then ``os.replace``), so a reader
    never sees a partial file. Digests passed in may use any form that
    ``normalize_sha256`` accepts; a malformed one raises ``invalid_sha256``.
    OS errors raise ``store_failed`` with a message that never names a path.
    """

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self._root = Path(root)

    def put(self, data: bytes) -> str:
        """Store ``data`` and return its digest. Idempotent; replaces a damaged copy."""
        digest = sha256_hex(data)
        path = self._path(digest)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, temp_name = tempfile.mkstemp(dir=path.parent, prefix=_TEMP_PREFIX)
        except OSError as exc:
            raise _store_failed("could not create the bundle store directory") from exc
        try:
            with open(fd, "wb") as temp:
                temp.write(data)
                temp.flush()
                os.fsync(temp.fileno())
            os.replace(temp_name, path)
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.unlink(temp_name)
            raise _store_failed("could not write the bundle to the store") from exc
        return digest

    def get(self, digest: str) -> bytes:
        """Return the bytes stored under ``digest``, re-verifying their SHA-256.

        Raises ``not_stored`` if there is no such bundle, ``integrity_mismatch``
        if the stored bytes no longer hash to ``digest`` (the damaged file is
        removed, so a later ``put`` of the right bytes restores it), and
        ``store_failed`` if it cannot be read.
        """
        digest = normalize_sha256(digest)
        path = self._path(digest)
        try:
            with open(path, "rb") as file:
                identity = _identity(os.fstat(file.fileno()))
                data = file.read()
        except FileNotFoundError as exc:
            raise BundleLoaderError(
                "not_stored", f"no bundle with sha256 {digest} is stored"
            ) from exc
        except OSError as exc:
            raise _store_failed("could not read the bundle from the store") from exc
        actual = sha256_hex(data)
        if actual != digest:
            self._discard(path, identity)
            raise BundleLoaderError(
                "integrity_mismatch",
                f"stored bundle {digest} is damaged (its content hashes to {actual}) "
                "and was removed",
            )
        return data

    def has(self, digest: str) -> bool:
        """Whether a file is stored under ``digest``. Cheap: does not verify content."""
        return self._path(normalize_sha256(digest)).is_file()

    def _path(self, digest: str) -> Path:
        return self._root / _ALGORITHM_DIR / digest[:2] / digest

    @staticmethod
    def _discard(path: Path, identity: tuple[int, int]) -> None:
        # Remove only the file that was read: a concurrent put may already
        # have replaced it with good bytes.
        with contextlib.suppress(OSError):
            if _identity(os.stat(path)) == identity:
                os.unlink(path)


def _identity(stat: os.stat_result) -> tuple[int, int]:
    return (stat.st_dev, stat.st_ino)


def _store_failed(message: str) -> BundleLoaderError:
    return BundleLoaderError("store_failed", message)
