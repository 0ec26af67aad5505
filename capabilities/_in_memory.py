"""An in-memory `workspaceFiles`, for tests that are not about I/O.

Same methods, results and failure codes as `WorkspaceFiles` for a workspace of
plain files (no symlinks): paths are guest paths under `/workspace`,
directories exist implicitly where files are, and nothing touches the disk.
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping
from typing import Any

from ._errors import file_error
from ._limits import MAX_DIRECTORY_ENTRIES, MAX_FILE_READ_BYTES

_MAX_WORKDIR_LENGTH = 1024


class InMemoryWorkspaceFiles:
    """Workspace files held in a dict of guest-relative path -> text.

    `files` maps paths like ``"notes/a.md"`` to their content; it is copied,
    and `files` (the property) returns the current state. Raises the
    contract's `WorkspaceFileError` codes: `invalid_path`, `not_found`,
    `not_file`, `too_large`, `max_bytes_exceeded`.
    """

    def __init__(self, files: Mapping[str, str] | None = None, *,
                 guest_root: str = "/workspace") -> None:
        self._root = guest_root
        self._files: dict[str, str] = {}
        for path, content in (files or {}).items():
            self._files[self._relative(path, self._root)] = content

    @property
    def files(self) -> dict[str, str]:
        return dict(self._files)

    def _relative(self, path: Any, base: str) -> str:
        """`path` as a root-relative key; `""` is the root itself."""
        if not isinstance(path, str) or not path or "\0" in path:
            raise file_error("invalid_path")
        absolute = posixpath.normpath(posixpath.join(base, path))
        if absolute == self._root:
            return ""
        if not absolute.startswith(self._root + "/"):
            raise file_error("invalid_path")
        return absolute[len(self._root) + 1 :]

    def _is_directory(self, key: str) -> bool:
        return key == "" or any(name.startswith(key + "/") for name in self._files)

    def _guest(self, key: str) -> str:
        return f"{self._root}/{key}" if key else self._root

    async def resolve_path(self, request: Mapping[str, Any]) -> dict[str, Any]:
        workdir = request.get("cwd", ".")
        if (not isinstance(workdir, str) or not workdir or len(workdir) > _MAX_WORKDIR_LENGTH
                or "\\" in workdir or ".." in workdir.split("/")):
            raise file_error("invalid_path")
        base = self._relative(workdir, self._root)
        key = self._relative(request.get("filePath"), self._guest(base))
        target: dict[str, Any] = {"canonicalPath": self._guest(key)}
        if key == base:
            target["resource"] = "."
        elif base == "" or key.startswith(base + "/"):
            target["resource"] = key[len(base) + 1 :] if base else key
        else:
            target["resource"] = self._guest(key)
            directory = key if self._is_directory(key) else posixpath.dirname(key)
            pattern = f"{self._guest(directory)}/*"
            target["externalDirectory"] = {"resource": pattern, "save": pattern}
        return target

    async def read_text(self, request: Mapping[str, Any]) -> dict[str, Any]:
        path = request.get("filePath")
        key = self._relative(path, self._root)
        limit = request.get("maxBytes", MAX_FILE_READ_BYTES)
        if isinstance(limit, bool) or not isinstance(limit, int | float) or limit < 1 or (
            isinstance(limit, float) and not limit.is_integer()
        ):
            raise file_error("max_bytes_exceeded")
        if key not in self._files:
            raise file_error("not_file" if self._is_directory(key) else "not_found")
        content = self._files[key]
        size = len(content.encode())
        if size > MAX_FILE_READ_BYTES and limit >= MAX_FILE_READ_BYTES:
            raise file_error("too_large")
        if size > limit:
            raise file_error("max_bytes_exceeded")
        return {"filePath": path, "content": content, "byteLength": size}

    async def write_text(self, request: Mapping[str, Any]) -> dict[str, Any]:
        path = request.get("filePath")
        key = self._relative(path, self._root)
        content = request.get("content")
        if not isinstance(content, str):
            raise file_error("invalid_path")
        if self._is_directory(key) or any(
            parent in self._files for parent in _parents(key)
        ):
            raise file_error("not_file")
        self._files[key] = content
        return {"filePath": path, "byteLength": len(content.encode())}

    async def remove_file(self, request: Mapping[str, Any]) -> dict[str, Any]:
        path = request.get("filePath")
        key = self._relative(path, self._root)
        if key not in self._files:
            raise file_error("not_file" if self._is_directory(key) else "not_found")
        del self._files[key]
        return {"filePath": path}

    async def read_directory(self, request: Mapping[str, Any]) -> dict[str, Any]:
        path = request.get("dirPath")
        key = self._relative(path, self._root)
        offset = request.get("offset", 1)
        limit = request.get("limit", MAX_DIRECTORY_ENTRIES)
        for number in (offset, limit):
            if isinstance(number, bool) or not isinstance(number, int) or number < 1:
                raise file_error("invalid_path")
        if key in self._files:
            raise file_error("not_file")
        if not self._is_directory(key):
            raise file_error("not_found")
        prefix = key + "/" if key else ""
        kinds: dict[str, str] = {}
        for name in self._files:
            if name.startswith(prefix):
                first, _, rest = name[len(prefix) :].partition("/")
                kinds[first] = "directory" if rest else "file"
        names = sorted(kinds)
        page = names[offset - 1 : offset - 1 + min(limit, MAX_DIRECTORY_ENTRIES)]
        return {
            "dirPath": path,
            "entries": [{"name": name, "kind": kinds[name]} for name in page],
            "offset": offset,
            "totalEntries": len(names),
            "truncated": offset - 1 + len(page) < len(names),
        }


def _parents(key: str) -> list[str]:
    parts = key.split("/")
    return ["/".join(parts[:index]) for index in range(1, len(parts))]
