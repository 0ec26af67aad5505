"""The workspace shell: the host side of `context.workspaceShell.execute`.

`WorkspaceShell.execute` runs one `/bin/sh -c` command inside a bubblewrap
sandbox (see `capabilities._sandbox`) that can write only the session
workspace, and returns its combined output the way the contract's Worker host
does: the last `MAX_SHELL_OUTPUT_BYTES` inline, the full output spilled to an
artifact file in the workspace when there was more.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import posixpath
import re
import uuid
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal

from capabilities._errors import shell_error
from capabilities._limits import MAX_SHELL_OUTPUT_BYTES, MAX_SHELL_TIMEOUT_MS
from capabilities._sandbox import RESERVED_GUEST_DIRS, Sandbox, SandboxSpec, SandboxUnavailable

__all__ = ["DEFAULT_SHELL_ENV", "ShellDisabled", "ShellPolicy", "WorkspaceShell"]

OnOutput = Callable[[dict[str, Any]], Awaitable[None]]

DEFAULT_SHELL_ENV: Mapping[str, str] = MappingProxyType(
    {
        "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "HOME": "/workspace",
        "LANG": "C.UTF-8",
        "TERM": "dumb",
        "TMPDIR": "/tmp",
    }
)
"""The environment a command sees by default: this and nothing of the host's."""

# Session workdir rules (the contract's `SessionWorkdir`).
_MAX_CWD_LENGTH = 1024
# `on_output` is called at most this often while output arrives.
_PROGRESS_INTERVAL_S = 0.1
_READ_CHUNK_BYTES = 65_536
# After a kill every writer of the pipe is dead, so this only bounds a kernel
# that is very slow to tear the sandbox down.
_DRAIN_TIMEOUT_S = 5.0
_ARTIFACT_DIR = (".ze-harness", "tool-output")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

# Runs first inside the sandbox, as `sh -c _LAUNCHER sh <guest root> <cwd> <command>`.
# It joins stderr to stdout, enters the working directory, and reports on
# stdout, before the command can write anything, one status byte: `0` started,
# `1` the directory does not exist (or cannot be entered), `2` it resolves
# (through a symlink) outside the workspace. Resolving in the sandbox means
# symlinks resolve exactly as the command would see them.
_LAUNCHER = """exec 2>&1
ulimit -c 0
ulimit -v %(address_space_kib)d
ulimit -f %(file_blocks)d
cd "$2" 2>/dev/null || { printf 1; exit 0; }
case "$(pwd -P)" in "$1"|"$1"/*) ;; *) printf 2; exit 0;; esac
unset OLDPWD
printf 0
exec /bin/sh -c -- "$3"
"""
# Per-process limits inside the sandbox (the shell's `ulimit`, set before the
# command runs): no core dumps, at most 4 GiB of address space and 1 GiB per
# file. What no rlimit bounds (process count, total memory, the size of the
# tmpfs /tmp) needs cgroups; see the README.
_LAUNCHER = _LAUNCHER % {"address_space_kib": 4 * 1024 * 1024, "file_blocks": 2 * 1024 * 1024}
# The artifact keeps the first 64 MiB of output; past that it is `incomplete`.
MAX_ARTIFACT_BYTES = 64 * 1024 * 1024
_STATUS_STARTED = b"0"
_STATUS_ESCAPES = b"2"


class ShellDisabled(Exception):
    """The operator turned the shell off (`ShellPolicy.enabled` is false).

    Not a `CapabilityError`: the caller reports it as the contract's
    `PluginError` for a host that provides no shell.
    """

    def __init__(self) -> None:
        super().__init__("The workspace shell is disabled.")


@dataclass(frozen=True)
class ShellPolicy:
    """What the operator allows commands: whether they run at all, network, environment.

    `env` is the command's whole environment (nothing of the host's is added);
    it defaults to `DEFAULT_SHELL_ENV`. Keep `HOME` in step with a non-default
    `guest_root`. Raises `ValueError` for a variable name or value that is not
    a valid environment entry.
    """

    enabled: bool = True
    network: bool = False  # shares the host's network namespace: no NetworkPolicy applies
    env: Mapping[str, str] = field(default_factory=lambda: DEFAULT_SHELL_ENV)

    def __post_init__(self) -> None:
        env = dict(self.env)
        for name, value in env.items():
            if not isinstance(name, str) or not _ENV_NAME.fullmatch(name):
                raise ValueError(f"invalid environment variable name: {name!r}")
            if not isinstance(value, str) or "\0" in value:
                raise ValueError(f"invalid value for environment variable {name}")
        object.__setattr__(self, "env", MappingProxyType(env))


class _Rejected(Exception):
    """A failure with a contract code decided inside the run."""

    def __init__(self, code: str) -> None:
        super().__init__(code)
        self.code = code


class _CallbackFailed(Exception):
    """`on_output` raised."""


class WorkspaceShell:
    """Runs commands for one session workspace, sandboxed.

    `root` is the host directory of the workspace; commands see it at
    `guest_root` (`/workspace`), the only place they can write. Paths in
    requests and results are guest paths or workspace-relative paths, never
    host paths.
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        policy: ShellPolicy = ShellPolicy(),  # frozen: sharing it is safe
        *,
        guest_root: str = "/workspace",
    ) -> None:
        if (
            not isinstance(guest_root, str)
            or not guest_root.startswith("/")
            or "\0" in guest_root
            or posixpath.normpath(guest_root) != guest_root
            or guest_root == "/"
            or guest_root.split("/")[1] in RESERVED_GUEST_DIRS
        ):
            raise ValueError("guest_root must be a normalized absolute path outside system dirs")
        self._root = os.path.abspath(os.fspath(root))
        self._policy = policy
        self._guest_root = guest_root

    @property
    def policy(self) -> ShellPolicy:
        return self._policy

    async def execute(
        self,
        request: Mapping[str, Any],
        on_output: OnOutput | None = None,
    ) -> dict[str, Any]:
        """Runs `request["command"]` with `/bin/sh -c` in the sandbox, to completion.

        `request` is the guest's JSON: `command`, optional `cwd` (a Session
        workdir, relative to the guest root or absolute under it) and optional
        `timeoutMs` (default and maximum `MAX_SHELL_TIMEOUT_MS`); a `null`
        member counts as absent. Returns `output`, `exitCode` (`None` after a
        timeout; 128 + N when signal N ended the command, as a shell reports
        it), `signal` (always `None`, as on the contract's Worker host),
        `timedOut`, `truncated` and, when the output exceeded
        `MAX_SHELL_OUTPUT_BYTES`, `artifact`.

        `on_output` receives a `ToolActivityUpdate` at most every 100 ms while
        output arrives and a final one when the command ends; each call is
        awaited. A preview holds back an incomplete trailing UTF-8 character
        until the rest of it arrives.

        Raises `ShellDisabled` when the policy disables the shell, and
        `CapabilityError` (`WorkspaceShellError`) `invalid_command`,
        `invalid_timeout` or `spawn_failed` (the sandbox could not start, the
        working directory does not exist, the artifact could not be written,
        or `on_output` raised). Timeout, cancellation and every failure kill
        the whole sandbox before returning or raising.
        """
        if not self._policy.enabled:
            raise ShellDisabled()
        if not isinstance(request, Mapping):
            raise shell_error("invalid_command")
        command = _parse_command(request.get("command"))
        cwd = self._guest_cwd(request.get("cwd"))
        timeout_s = _parse_timeout(request.get("timeoutMs"))
        spec = SandboxSpec(
            root=self._root,
            guest_root=self._guest_root,
            env=self._policy.env,
            network=self._policy.network,
        )
        argv = ["/bin/sh", "-c", _LAUNCHER, "sh", self._guest_root, cwd, command]
        try:
            sandbox = await Sandbox.start(spec, argv)
        except (SandboxUnavailable, OSError) as exc:
            raise shell_error("spawn_failed") from exc
        run = _Run(sandbox, _Output(self._root), on_output)
        try:
            return await run.complete(timeout_s)
        except _Rejected as exc:
            raise shell_error(exc.code) from None
        except Exception as exc:
            raise shell_error("spawn_failed") from exc

    def _guest_cwd(self, cwd: object) -> str:
        root = self._guest_root
        if cwd is None:
            return root
        if (
            not isinstance(cwd, str)
            or not cwd
            or len(cwd) > _MAX_CWD_LENGTH
            or "\0" in cwd
            or "\\" in cwd
            or ".." in cwd.split("/")
            or not _encodable(cwd)
        ):
            raise shell_error("invalid_command")
        if cwd.startswith("/"):
            if cwd != root and not cwd.startswith(root + "/"):
                raise shell_error("invalid_command")
            return posixpath.normpath(cwd)
        return posixpath.normpath(root + "/" + cwd)


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates from JSON `\ud800` escapes
        return False
    return True


def _parse_command(command: object) -> str:
    if not isinstance(command, str) or not command or "\0" in command or not _encodable(command):
        raise shell_error("invalid_command")
    return command


def _parse_timeout(timeout_ms: object) -> float:
    if timeout_ms is None:
        return MAX_SHELL_TIMEOUT_MS / 1000
    # NaN fails both comparisons; bool is an int but not a number in JSON.
    if (
        not isinstance(timeout_ms, int | float)
        or isinstance(timeout_ms, bool)
        or not 0 < timeout_ms <= MAX_SHELL_TIMEOUT_MS
    ):
        raise shell_error("invalid_timeout")
    return timeout_ms / 1000


class _Artifact:
    """`.ze-harness/tool-output/<uuid>.log` in the workspace, holding the full output.

    Every component is opened relative to the previous one without following
    symlinks: the sandboxed command controls the workspace and could plant one.
    """

    def __init__(self, root: str) -> None:
        self.id = str(uuid.uuid4())
        self.path = "/".join((*_ARTIFACT_DIR, f"{self.id}.log"))
        self.written = 0
        self.capped = False  # output past MAX_ARTIFACT_BYTES was left out
        dir_fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            for name in _ARTIFACT_DIR:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(name, 0o755, dir_fd=dir_fd)
                parent = dir_fd
                dir_fd = os.open(
                    name,
                    os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC,
                    dir_fd=parent,
                )
                os.close(parent)
            self._fd = os.open(
                f"{self.id}.log",
                os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                0o644,
                dir_fd=dir_fd,
            )
        finally:
            os.close(dir_fd)

    def write(self, data: bytes) -> None:
        room = MAX_ARTIFACT_BYTES - self.written
        if len(data) > room:
            self.capped = True
            data = data[: max(room, 0)]
        self.written += len(data)
        view = memoryview(data)
        while view:
            view = view[os.write(self._fd, view) :]

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def describe(self, observed: int, state: str) -> dict[str, Any]:
        return {"id": self.id, "path": self.path, "observedBytes": observed, "state": state}


class _Output:
    """The combined output: a bounded tail in memory, the rest spilled to an artifact."""

    def __init__(self, root: str) -> None:
        self._root = root
        self._tail = bytearray()
        self.total = 0
        self.artifact: _Artifact | None = None

    def feed(self, chunk: bytes) -> None:
        """Adds output. Raises `OSError` when the artifact cannot be written."""
        self.total += len(chunk)
        if self.artifact is None and self.total > MAX_SHELL_OUTPUT_BYTES:
            # Nothing was dropped yet: the tail still holds all earlier output.
            self.artifact = _Artifact(self._root)
            self.artifact.write(bytes(self._tail))
        if self.artifact is not None:
            self.artifact.write(chunk)
        self._tail += chunk
        excess = len(self._tail) - MAX_SHELL_OUTPUT_BYTES
        if excess > 0:
            del self._tail[:excess]

    def text(self, *, final: bool) -> tuple[str, bool]:
        """The tail decoded as UTF-8 (with replacement) and whether output was dropped.

        The text is at most `MAX_SHELL_OUTPUT_BYTES` of UTF-8 and never starts
        with half a character. Unless `final`, an incomplete character at the
        end is held back: its remaining bytes may still arrive.
        """
        data = bytes(self._tail)
        dropped = self.total > len(data)
        start = 0
        if dropped:
            while start < min(3, len(data)) and _is_continuation(data[start]):
                start += 1
        end = len(data) if final else len(data) - _incomplete_suffix(data)
        text = data[start : max(start, end)].decode("utf-8", "replace")
        # Replacement characters take 3 bytes for each invalid byte: cut again
        # so the text stays within the limit a preview must respect.
        encoded = text.encode("utf-8")
        if len(encoded) > MAX_SHELL_OUTPUT_BYTES:
            cut = len(encoded) - MAX_SHELL_OUTPUT_BYTES
            while cut < len(encoded) and _is_continuation(encoded[cut]):
                cut += 1
            text = encoded[cut:].decode("utf-8")
            dropped = True
        return text, dropped

    def close(self) -> None:
        if self.artifact is not None:
            self.artifact.close()


def _is_continuation(byte: int) -> bool:
    return byte & 0xC0 == 0x80


def _incomplete_suffix(data: bytes) -> int:
    """Length of an incomplete multi-byte UTF-8 sequence at the end of `data`, or 0."""
    for back in range(1, min(4, len(data)) + 1):
        byte = data[-back]
        if _is_continuation(byte):
            continue
        if byte >= 0xF0:
            needed = 4
        elif byte >= 0xE0:
            needed = 3
        elif byte >= 0xC0:
            needed = 2
        else:
            return 0
        return back if back < needed else 0
    return 0


class _Run:
    """One command from spawn to a result; always leaves no process behind."""

    def __init__(self, sandbox: Sandbox, output: _Output, on_output: OnOutput | None) -> None:
        self._sandbox = sandbox
        self._output = output
        self._on_output = on_output
        self._next_report = 0.0

    async def complete(self, timeout_s: float) -> dict[str, Any]:
        try:
            return await self._run(timeout_s)
        except BaseException:
            await _uninterrupted(self._stop())
            raise
        finally:
            self._output.close()

    async def _run(self, timeout_s: float) -> dict[str, Any]:
        sandbox = self._sandbox
        exit_code: int | None = None
        timed_out = False
        deadline = asyncio.timeout(timeout_s)
        try:
            async with deadline:
                status = await sandbox.stdout.read(1)
                if status != _STATUS_STARTED:
                    await self._stop()
                    raise _Rejected(
                        "invalid_command" if status == _STATUS_ESCAPES else "spawn_failed"
                    )
                sandbox.watch()
                await self._pump()
                exit_code = await sandbox.wait()
        except TimeoutError:
            if not deadline.expired():
                raise  # not the deadline's
            timed_out = True
            sandbox.kill()
            # What the command wrote before it was killed still counts.
            await self._drain(keep=True)
        await sandbox.reap()
        if self._output.artifact is not None:
            self._output.artifact.close()
        capped = self._output.artifact is not None and self._output.artifact.capped
        state: Literal["complete", "incomplete"] = (
            "incomplete" if timed_out or capped else "complete")
        if self._on_output is not None:
            await self._report(state)
        text, truncated = self._output.text(final=True)
        result: dict[str, Any] = {
            "output": text,
            "exitCode": None if timed_out else exit_code,
            "signal": None,
            "timedOut": timed_out,
            "truncated": truncated,
        }
        if self._output.artifact is not None:
            result["artifact"] = self._output.artifact.describe(self._output.total, state)
        return result

    async def _pump(self) -> None:
        """Reads the output to EOF, reporting progress at most every interval."""
        loop = asyncio.get_running_loop()
        stdout = self._sandbox.stdout
        read: asyncio.Task[bytes] | None = None
        unreported = False
        try:
            while True:
                if read is None:
                    read = asyncio.ensure_future(stdout.read(_READ_CHUNK_BYTES))
                if not read.done():
                    wait_s = max(0.0, self._next_report - loop.time()) if unreported else None
                    await asyncio.wait({read}, timeout=wait_s)
                if read.done():
                    chunk = read.result()
                    read = None
                    if not chunk:
                        return
                    self._output.feed(chunk)
                    unreported = self._on_output is not None
                if unreported and loop.time() >= self._next_report:
                    unreported = False
                    await self._report("writing")
        finally:
            if read is not None and not read.done():
                read.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await read

    async def _report(self, state: Literal["writing", "complete", "incomplete"]) -> None:
        assert self._on_output is not None
        preview, truncated = self._output.text(final=state != "writing")
        update: dict[str, Any] = {
            "preview": preview,
            "observedBytes": self._output.total,
            "truncated": truncated,
        }
        if self._output.artifact is not None:
            update["artifact"] = self._output.artifact.describe(self._output.total, state)
        try:
            await self._on_output(update)
        except Exception as exc:
            raise _CallbackFailed() from exc
        self._next_report = asyncio.get_running_loop().time() + _PROGRESS_INTERVAL_S

    async def _drain(self, *, keep: bool) -> None:
        """Reads what is left in the pipe once the sandbox is dead or dying."""
        stdout = self._sandbox.stdout
        try:
            async with asyncio.timeout(_DRAIN_TIMEOUT_S):
                while chunk := await stdout.read(_READ_CHUNK_BYTES):
                    if keep:
                        self._output.feed(chunk)
        except TimeoutError:
            pass

    async def _stop(self) -> None:
        """Kills the sandbox and waits until none of its processes is left. Idempotent."""
        self._sandbox.kill()
        try:
            await self._drain(keep=False)
        finally:
            await self._sandbox.reap()


async def _uninterrupted(work: Coroutine[Any, Any, None]) -> None:
    """Runs best-effort cleanup to its end even if the calling task is cancelled
    meanwhile; such a cancellation is raised once the cleanup is done."""
    task = asyncio.ensure_future(work)
    cancelled = False
    while True:
        try:
            await asyncio.shield(task)
        except asyncio.CancelledError:
            if not task.done():
                cancelled = True
                continue
        except Exception:  # the failure being cleaned up after wins
            pass
        break
    if cancelled:
        raise asyncio.CancelledError()
