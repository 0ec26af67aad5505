"""The host side of `context.workspaceFiles`: one session's workspace directory.

The guest sees the directory as `/workspace` and never a host path. Every
operation walks the path with `_workspace_paths.Cursor` (symlinks resolved
inside the root, or refused) and then acts through descriptors relative to the
directory it reached, so a link swapped in after the walk cannot redirect it.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import heapq
import math
import os
import secrets
import stat
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Literal, TypeVar

from ._errors import CapabilityError, file_error
from ._limits import MAX_DIRECTORY_ENTRIES, MAX_FILE_READ_BYTES
from ._workspace_paths import Cursor, Raced, Target, guest_parts, guest_path

__all__ = ["WorkspaceFiles"]

MAX_WORKDIR_LENGTH = 1024
"""Longest Session workdir, in UTF-16 code units as the contract counts string length."""

_MAX_SAFE_INTEGER = 2**53 - 1
# File operations have threads of their own: a guest that makes them slow
# (deep symlink trees, huge directories) must not starve the default pool,
# which validates tool inputs and resolves host names for every session.
_FILE_THREADS = ThreadPoolExecutor(max_workers=8, thread_name_prefix="workspace-files")
_ATTEMPTS = 4  # walks retried when the tree changes under them, then `io`
_READ_CHUNK = 65_536
_OS_CODES = {
    errno.ENOENT: "not_found",
    errno.ENOTDIR: "not_file",
    errno.EISDIR: "not_file",
    errno.ELOOP: "invalid_path",
}

_T = TypeVar("_T")
EntryKind = Literal["file", "directory", "other"]


class WorkspaceFiles:
    """`workspaceFiles` over the directory `root`, which the guest sees as `guest_root`.

    Each method takes the guest's request (untrusted JSON, `signal` already
    removed), returns the contract's result and raises `CapabilityError`
    (`WorkspaceFileError`) with the contract's codes. Relative paths resolve
    against the guest root, except in `resolve_path`, which uses `cwd`. Nothing
    outside `root` is ever read, written, created or removed, whatever symlinks
    say. Blocking I/O runs in a worker thread. POSIX only.
    """

    def __init__(self, root: str | os.PathLike[str], *, guest_root: str = "/workspace") -> None:
        if not guest_root.startswith("/") or "\0" in guest_root:
            raise ValueError("guest_root must be an absolute path")
        self._root = os.path.abspath(root)
        self._guest_root = tuple(part for part in guest_root.split("/") if part not in ("", "."))
        if ".." in self._guest_root:
            raise ValueError("guest_root must be a normalized path")
        self._guest_root_path = guest_path(self._guest_root, [])

    @property
    def guest_root(self) -> str:
        """The guest's name for the root, normalized (`/workspace` by default)."""
        return self._guest_root_path

    async def resolve_path(self, request: Mapping[str, Any]) -> dict[str, Any]:
        """`{filePath, cwd?}` -> `{canonicalPath, resource, externalDirectory?}`.

        `filePath` resolves against `cwd` (the Session workdir, default the
        guest root); the target need not exist. `canonicalPath` is a guest path
        with every existing symlink resolved. `resource` is relative to the
        workdir, or the absolute canonical path outside it, together with
        `externalDirectory`. Raises `invalid_path` (bad path or workdir,
        resolution leaving the root, more than 40 links), `not_found` or `io`.
        """
        _require_mapping(request)
        file_path = _path_member(request, "filePath")
        workdir = self._workdir(request.get("cwd", "."))
        workdir_parts = guest_parts(workdir, self._guest_root_path, self._guest_root)
        parts = guest_parts(
            file_path, guest_path(self._guest_root, workdir_parts), self._guest_root
        )

        def resolve(cursor: Cursor) -> tuple[list[str], list[str], bool]:
            boundary = cursor.walk(workdir_parts, follow_last=True).canonical_parts()
            target = cursor.walk(parts, follow_last=True)
            return boundary, target.canonical_parts(), target.is_directory

        boundary, canonical, is_directory = await self._run(resolve)
        canonical_path = guest_path(self._guest_root, canonical)
        if canonical[: len(boundary)] == boundary:
            return {
                "canonicalPath": canonical_path,
                "resource": "/".join(canonical[len(boundary) :]) or ".",
            }
        directory = canonical if is_directory else canonical[:-1]
        pattern = guest_path(self._guest_root, directory).rstrip("/") + "/*"
        return {
            "canonicalPath": canonical_path,
            "resource": canonical_path,
            "externalDirectory": {"resource": pattern, "save": pattern},
        }

    async def read_text(self, request: Mapping[str, Any]) -> dict[str, Any]:
        """`{filePath, maxBytes?}` -> `{filePath, content, byteLength}`: a whole UTF-8 file.

        The size is checked before reading. Raises `not_found`, `not_file`,
        `too_large` (over `MAX_FILE_READ_BYTES`), `max_bytes_exceeded` (over a
        `maxBytes` at or below it, or `maxBytes` not a positive safe integer),
        `invalid_utf8`, `invalid_path` or `io`.
        """
        _require_mapping(request)
        file_path = _path_member(request, "filePath")
        limit, code = _read_limit(request)
        parts = self._parts(file_path)
        data = await self._run(lambda cursor: _read(cursor, parts, limit, code))
        try:
            content = data.decode("utf-8")
        except UnicodeDecodeError:
            raise file_error("invalid_utf8") from None
        return {"filePath": file_path, "content": content, "byteLength": len(data)}

    async def write_text(self, request: Mapping[str, Any]) -> dict[str, Any]:
        """`{filePath, content}` -> `{filePath, byteLength}`: creates or replaces a file.

        Missing parent directories are created. The file is replaced atomically
        (a new file renamed over it, keeping its permission bits), so a hard
        link shared with a file elsewhere is never written through; a symlink
        is written through to its target inside the root. No size limit. Raises
        `not_file` (a directory or other non-file, or a parent that is not a
        directory), `invalid_path` or `io`.
        """
        _require_mapping(request)
        file_path = _path_member(request, "filePath")
        content = request.get("content")
        if not isinstance(content, str):
            raise file_error("invalid_path")
        parts = self._parts(file_path)
        data = _utf8(content)
        await self._run(lambda cursor: _write(cursor, parts, data))
        return {"filePath": file_path, "byteLength": len(data)}

    async def remove_file(self, request: Mapping[str, Any]) -> dict[str, Any]:
        """`{filePath}` -> `{filePath}`: removes one file; a symlink goes, its target stays.

        Raises `not_found` (nothing there), `not_file` (a directory, or a parent
        that is not one), `invalid_path` or `io`.
        """
        _require_mapping(request)
        file_path = _path_member(request, "filePath")
        parts = self._parts(file_path)
        await self._run(lambda cursor: _remove(cursor, parts))
        return {"filePath": file_path}

    async def read_directory(self, request: Mapping[str, Any]) -> dict[str, Any]:
        """`{dirPath, offset?, limit?}` -> one page of entries sorted by name.

        Returns `{dirPath, entries: [{name, kind}], offset, totalEntries,
        truncated}`; `offset` is 1-based, `limit` defaults to and is capped at
        `MAX_DIRECTORY_ENTRIES`. Names sort by UTF-16 code units, as a guest's
        `Array.prototype.sort` would. A symlink reports its target's kind when
        the target resolves inside the root, else `other`. Raises `invalid_path`
        (also for an `offset` or `limit` that is not an integer of at least 1),
        `not_found`, `not_file` or `io`.
        """
        _require_mapping(request)
        dir_path = _path_member(request, "dirPath")
        offset = _page_member(request, "offset", 1)
        limit = min(_page_member(request, "limit", MAX_DIRECTORY_ENTRIES), MAX_DIRECTORY_ENTRIES)
        parts = self._parts(dir_path)
        entries, total = await self._run(lambda cursor: _list(cursor, parts, offset, limit))
        return {
            "dirPath": dir_path,
            "entries": [{"name": name, "kind": kind} for name, kind in entries],
            "offset": offset,
            "totalEntries": total,
            "truncated": offset - 1 + len(entries) < total,
        }

    def _parts(self, path: str) -> list[str]:
        return guest_parts(path, self._guest_root_path, self._guest_root)

    def _workdir(self, value: object) -> str:
        """The contract's Session workdir rules; any break is `invalid_path`."""
        if (
            not isinstance(value, str)
            or not value
            or _utf16_length(value) > MAX_WORKDIR_LENGTH
            or "\\" in value
            or "\0" in value
            or ".." in value.split("/")
            or not _encodable(value)
        ):
            raise file_error("invalid_path")
        return value

    async def _run(self, operation: Callable[[Cursor], _T]) -> _T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(_FILE_THREADS, self._run_sync, operation)

    def _run_sync(self, operation: Callable[[Cursor], _T]) -> _T:
        """Runs `operation` below a fresh root descriptor, mapping OS failures to codes."""
        for _ in range(_ATTEMPTS):
            try:
                root_fd = os.open(self._root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            except OSError:
                raise file_error("io") from None  # its message would name the host root
            try:
                with Cursor(root_fd, self._guest_root) as cursor:
                    return operation(cursor)
            except Raced:
                continue
            except OSError as exc:
                raise file_error(_OS_CODES.get(exc.errno or 0, "io")) from exc
            finally:
                os.close(root_fd)
        raise file_error("io")


def _read(cursor: Cursor, parts: list[str], limit: int, code: str) -> bytes:
    target = cursor.walk(parts, follow_last=True)
    name, info = _existing(target)
    if not stat.S_ISREG(info.st_mode):
        raise file_error("not_file")
    # O_NONBLOCK: a FIFO swapped in after the walk must not hang the open.
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    fd = _open_leaf(name, flags, cursor.fd())
    try:
        opened = os.fstat(fd)
        if not stat.S_ISREG(opened.st_mode):
            raise file_error("not_file")
        if opened.st_size > limit:
            raise file_error(code)
        chunks: list[bytes] = []
        remaining = limit + 1  # one byte more tells a file that grew after the fstat
        while remaining > 0:
            chunk = os.read(fd, min(remaining, _READ_CHUNK))
            if not chunk:
                break
            chunks.append(chunk)
            remaining -= len(chunk)
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if len(data) > limit:
        raise file_error(code)
    return data


def _write(cursor: Cursor, parts: list[str], data: bytes) -> None:
    target = cursor.walk(parts, follow_last=True, create_parents=True)
    if target.leaf is None or target.rest:
        raise file_error("not_file")
    if target.info is not None and not stat.S_ISREG(target.info.st_mode):
        raise file_error("not_file")
    parent = cursor.fd()
    if target.info is not None and not _writable(target.leaf, parent):
        raise file_error("io")  # a rename would ignore a read-only file's mode; the OS would not
    temp = f".{secrets.token_hex(8)}.workspace-write"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(temp, flags, 0o666, dir_fd=parent)
    try:
        try:
            if target.info is not None:
                os.fchmod(fd, stat.S_IMODE(target.info.st_mode) & 0o777)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
        finally:
            os.close(fd)
        # rename replaces the entry itself: a link swapped in meanwhile is replaced, not followed.
        os.replace(temp, target.leaf, src_dir_fd=parent, dst_dir_fd=parent)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp, dir_fd=parent)
        raise


def _writable(name: str, parent: int) -> bool:
    return os.access(name, os.W_OK, dir_fd=parent, effective_ids=True, follow_symlinks=False)


def _remove(cursor: Cursor, parts: list[str]) -> None:
    target = cursor.walk(parts, follow_last=False)
    name, info = _existing(target)
    if stat.S_ISDIR(info.st_mode):
        raise file_error("not_file")
    os.unlink(name, dir_fd=cursor.fd())


def _list(
    cursor: Cursor, parts: list[str], offset: int, limit: int
) -> tuple[list[tuple[str, EntryKind]], int]:
    target = cursor.walk(parts, follow_last=True)
    if target.leaf is None:
        directory = target.names
        fd = os.open(".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=cursor.fd())
    else:
        name, info = _existing(target)
        if not stat.S_ISDIR(info.st_mode):
            raise file_error("not_file")
        directory = [*target.names, name]
        flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = _open_leaf(name, flags, cursor.fd())
    try:
        with os.scandir(fd) as scan:
            # Keep only the entries that can be on this page: a huge directory
            # costs its count, not its listing, in memory.
            total = 0
            kept: list[tuple[str, str]] = []
            for entry in scan:
                total += 1
                kept.append((entry.name, _entry_kind(entry)))
                if len(kept) > 2 * (offset - 1 + limit) + 1024:
                    kept = _first(kept, offset - 1 + limit)
    finally:
        os.close(fd)
    page = _first(kept, offset - 1 + limit)[offset - 1 :]
    return [(_display_name(name), _kind(cursor, directory, name, kind))
            for name, kind in page], total


def _first(entries: list[tuple[str, str]], count: int) -> list[tuple[str, str]]:
    """The first `count` entries in listing order (names by UTF-16 code units)."""
    return heapq.nsmallest(count, entries,
                           key=lambda entry: _display_name(entry[0]).encode("utf-16-be"))


def _entry_kind(entry: os.DirEntry[str]) -> str:
    """An entry's own kind from the directory listing; `link` for a symlink."""
    try:
        if entry.is_symlink():
            return "link"
        if entry.is_dir(follow_symlinks=False):
            return "directory"
        return "file" if entry.is_file(follow_symlinks=False) else "other"
    except OSError:
        return "other"


# A symlink's kind in a listing is worth a short walk, not a long one per entry.
_LISTED_LINK_STEPS = 256


def _kind(cursor: Cursor, directory: list[str], name: str, kind: str) -> EntryKind:
    if kind != "link":
        return kind  # type: ignore[return-value]
    try:
        target = cursor.walk([*directory, name], follow_last=True, budget=_LISTED_LINK_STEPS)
    except (CapabilityError, Raced, OSError):
        return "other"
    if target.is_directory:
        return "directory"
    if target.info is not None and not target.rest and stat.S_ISREG(target.info.st_mode):
        return "file"
    return "other"


def _existing(target: Target) -> tuple[str, os.stat_result]:
    """The entry a walk ended on, or the code for why there is none."""
    if target.leaf is None:
        raise file_error("not_file")  # the root, or a directory reached through `..`
    if target.info is None:
        raise file_error("not_found")
    if target.rest:
        raise file_error("not_file")
    return target.leaf, target.info


def _open_leaf(name: str, flags: int, parent: int) -> int:
    try:
        return os.open(name, flags, dir_fd=parent)
    except OSError as exc:
        # Replaced by a link since the walk looked at it (O_NOFOLLOW with O_DIRECTORY
        # reports a link as ENOTDIR): walk again and judge what is there now.
        if exc.errno == errno.ELOOP or (flags & os.O_DIRECTORY and exc.errno == errno.ENOTDIR):
            raise Raced from exc
        raise


def _display_name(name: str) -> str:
    """A directory entry's name as valid text; bytes that are not UTF-8 become U+FFFD."""
    return os.fsencode(name).decode("utf-8", "replace")


def _require_mapping(request: object) -> None:
    if not isinstance(request, Mapping):
        raise file_error("invalid_path")


def _path_member(request: Mapping[str, Any], key: str) -> str:
    value = request.get(key)
    if not isinstance(value, str) or not value or "\0" in value or not _encodable(value):
        raise file_error("invalid_path")
    return value


def _read_limit(request: Mapping[str, Any]) -> tuple[int, str]:
    """The effective byte limit of a read and the code for exceeding it."""
    if "maxBytes" not in request:
        return MAX_FILE_READ_BYTES, "too_large"
    max_bytes = _integer(request["maxBytes"])
    if max_bytes is None or not 1 <= max_bytes <= _MAX_SAFE_INTEGER:
        raise file_error("max_bytes_exceeded")
    if max_bytes <= MAX_FILE_READ_BYTES:
        return max_bytes, "max_bytes_exceeded"
    return MAX_FILE_READ_BYTES, "too_large"


def _page_member(request: Mapping[str, Any], key: str, default: int) -> int:
    if key not in request:
        return default
    value = _integer(request[key])
    if value is None or value < 1:
        raise file_error("invalid_path")
    return value


def _integer(value: object) -> int | None:
    """A JSON number with an integral value (`3` or `3.0`, as JavaScript sees them), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return int(value)
    return None


def _utf8(text: str) -> bytes:
    """UTF-8 as JavaScript encodes it: a lone surrogate becomes U+FFFD."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        repaired = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
        return repaired.encode("utf-8")


def _encodable(text: str) -> bool:
    """False for text with lone surrogates, which no file name can hold."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _utf16_length(text: str) -> int:
    return len(text.encode("utf-16-le", "surrogatepass")) // 2
