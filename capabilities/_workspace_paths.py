"""Guest paths and a symlink-safe walk that never leaves the workspace root.

The guest sees the workspace as `/workspace` (the guest root). Guest paths are
normalized lexically, like `path.resolve`, then walked component by component
below an open descriptor of the host root. Each component is looked at with
`lstat` relative to its parent's descriptor and directories are opened with
`O_NOFOLLOW`, so nothing is ever reached through a path string the OS resolves
on its own. Symlinks are resolved here: a relative target against the link's
directory, an absolute one in guest space (under the guest root or refused),
`..` by dropping back to an already-opened ancestor, never above the root.
"""

from __future__ import annotations

import errno
import os
import stat
from collections import deque
from dataclasses import dataclass

from ._errors import file_error

MAX_SYMLINKS = 40
"""Links followed in one walk, as Linux's MAXSYMLINKS; the 41st is `invalid_path`."""

MAX_PATH_BYTES = 4095
"""PATH_MAX less its NUL. A longer path fails as the OS would fail it: `io`."""
MAX_WALK_STEPS = 4096
"""Components one walk may visit, links followed included."""

_CACHED_DIRECTORIES = 16
"""Descriptors a walk keeps open; deeper ancestors are reopened by name when `..` needs them."""

_DIRECTORY_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class Raced(Exception):
    """The tree changed between a check and the step that relied on it: start over."""


def guest_parts(path: str, base: str, guest_root: tuple[str, ...]) -> list[str]:
    """The components below the guest root of `path`, taken relative to `base` when relative.

    Normalization is lexical (`..` cancels the previous component; at `/` it
    stays at `/`). Raises `invalid_path` when the result is not the guest root
    or below it, `io` when it is longer than `MAX_PATH_BYTES`.
    """
    joined = path if path.startswith("/") else f"{base}/{path}"
    stack: list[str] = []
    for part in joined.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if stack:
                stack.pop()
            continue
        stack.append(part)
    if tuple(stack[: len(guest_root)]) != guest_root:
        raise file_error("invalid_path")
    if len(("/" + "/".join(stack)).encode()) > MAX_PATH_BYTES:
        raise file_error("io")
    return stack[len(guest_root) :]


def guest_path(guest_root: tuple[str, ...], parts: list[str]) -> str:
    return "/" + "/".join([*guest_root, *parts])


@dataclass
class Target:
    """Where a walk stopped.

    `names` are the real components of the directory the cursor now holds.
    `leaf` is the entry in it the walk ended on (None: the target is that
    directory itself); `info` its `lstat` (None: nothing is there). `rest` holds
    the components left unwalked because `leaf` is missing or not a directory.
    """

    names: list[str]
    leaf: str | None
    info: os.stat_result | None
    rest: list[str]

    @property
    def is_directory(self) -> bool:
        if self.leaf is None:
            return True
        return not self.rest and self.info is not None and stat.S_ISDIR(self.info.st_mode)

    def canonical_parts(self) -> list[str]:
        """The resolved existing part with the rest appended; `not_found` if the rest climbs."""
        if ".." in self.rest:
            raise file_error("not_found")
        leaf = [] if self.leaf is None else [self.leaf]
        return [*self.names, *leaf, *self.rest]


class Cursor:
    """A walk position below an open root descriptor. Not thread-safe; `close()` when done.

    The root descriptor is borrowed; the directory descriptors the cursor opens
    are its own.
    """

    def __init__(self, root_fd: int, guest_root: tuple[str, ...]) -> None:
        self._root_fd = root_fd
        self._guest_root = guest_root
        self._names: list[str] = []
        self._bytes = 0
        self._fds: dict[int, int] = {}  # depth -> descriptor of self._names[:depth]

    def close(self) -> None:
        fds, self._fds = self._fds, {}
        for fd in fds.values():
            os.close(fd)

    def __enter__(self) -> Cursor:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def fd(self) -> int:
        """A descriptor of the current directory (owned by the cursor)."""
        depth = len(self._names)
        if depth == 0:
            return self._root_fd
        fd = self._fds.get(depth)
        if fd is not None:
            return fd
        base = max((d for d in self._fds if d < depth), default=0)
        fd = self._root_fd if base == 0 else self._fds[base]
        for index in range(base, depth):
            fd = self._open_directory(fd, self._names[index], index + 1)
        return fd

    def walk(self, parts: list[str], *, follow_last: bool, create_parents: bool = False,
             budget: int = MAX_WALK_STEPS) -> Target:
        """Walks `parts` from the root, resolving symlinks inside it.

        The last component is followed when it is a symlink only if
        `follow_last`. Missing intermediate directories are created when
        `create_parents`; otherwise the walk stops at the first missing or
        non-directory component. Raises `invalid_path` for a link that leaves
        the root, `..` above the root, more than `MAX_SYMLINKS` links, or more
        than `budget` components in all (links can each hold thousands of
        `d/..` steps); `Raced` when the tree changed under the walk; `OSError`
        otherwise.
        """
        self._reset()
        pending = deque(parts)
        links = 0
        steps = 0
        while pending:
            steps += 1
            if steps > budget:
                raise file_error("invalid_path")
            name = pending.popleft()
            if name == "..":
                self._ascend()
                continue
            parent = self.fd()
            try:
                info = os.stat(name, dir_fd=parent, follow_symlinks=False)
            except FileNotFoundError:
                if not (create_parents and pending):
                    return Target(list(self._names), name, None, list(pending))
                try:
                    os.mkdir(name, dir_fd=parent)
                except FileExistsError as exc:
                    raise Raced from exc
                self._descend(parent, name)
                continue
            if stat.S_ISLNK(info.st_mode) and (pending or follow_last):
                links += 1
                if links > MAX_SYMLINKS:
                    raise file_error("invalid_path")
                pending.extendleft(reversed(self._link_parts(os.readlink(name, dir_fd=parent))))
                continue
            if not pending or not stat.S_ISDIR(info.st_mode):
                return Target(list(self._names), name, info, list(pending))
            self._descend(parent, name)
        return Target(list(self._names), None, None, [])

    def _link_parts(self, target: str) -> list[str]:
        """The components a link's target stands for; an absolute one restarts at the root.

        A target that is not UTF-8 is `invalid_path`: the guest could never
        name what it leads to, and its text could not travel as JSON.
        """
        if not target:
            raise file_error("not_found")
        try:
            target.encode("utf-8")
        except UnicodeEncodeError:
            raise file_error("invalid_path") from None
        parts = [part for part in target.split("/") if part not in ("", ".")]
        if not target.startswith("/"):
            return parts
        if tuple(parts[: len(self._guest_root)]) != self._guest_root:
            raise file_error("invalid_path")
        self._reset()
        return parts[len(self._guest_root) :]

    def _descend(self, parent: int, name: str) -> None:
        size = len(os.fsencode(name)) + 1
        if self._bytes + size > MAX_PATH_BYTES:
            raise file_error("io")
        self._open_directory(parent, name, len(self._names) + 1)
        self._names.append(name)
        self._bytes += size

    def _ascend(self) -> None:
        if not self._names:
            raise file_error("invalid_path")
        fd = self._fds.pop(len(self._names), None)
        if fd is not None:
            os.close(fd)
        self._bytes -= len(os.fsencode(self._names.pop())) + 1

    def _reset(self) -> None:
        self.close()
        self._names = []
        self._bytes = 0

    def _open_directory(self, parent: int, name: str, depth: int) -> int:
        try:
            fd = os.open(name, _DIRECTORY_FLAGS, dir_fd=parent)
        except OSError as exc:
            # It was a directory when looked at; now it is a link, a file or gone.
            if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.ENOENT):
                raise Raced from exc
            raise
        self._fds[depth] = fd
        if len(self._fds) > _CACHED_DIRECTORIES:
            os.close(self._fds.pop(min(self._fds)))
        return fd
