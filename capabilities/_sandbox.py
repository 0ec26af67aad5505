"""One bubblewrap sandbox around one shell command: its command line, start and teardown.

The sandbox sees the session workspace read-write at the guest root, the system
directories read-only, a fresh `/tmp`, minimal `/proc` and `/dev`, a tiny `/etc`,
and nothing else of the host. Every namespace is unshared (the network too unless
the operator enables it); the command runs as an unprivileged user in its own
user namespace and can create no further ones.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

# The sandboxed user. In its user namespace it maps to the host user running the
# host, so files it writes in the workspace belong to that user; it holds no
# capabilities.
SANDBOX_UID = 1000
SANDBOX_GID = 1000
SANDBOX_USER = "workspace"
SANDBOX_HOSTNAME = "workspace"

# System directories bound read-only (or recreated as the same symlinks, on
# merged-/usr systems). Anything missing on the host is skipped.
_SYSTEM_DIRS = ("usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32")

# The host `/etc` entries a shell and common tools need, read-only. Deliberately
# not the whole of `/etc`: it holds host secrets (`shadow`, `ssl/private`, ...).
# `passwd`, `group` and (without network) `hosts` are generated instead.
_ETC_ENTRIES = (
    "alternatives",
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "localtime",
    "nsswitch.conf",
    "host.conf",
    "gai.conf",
    "services",
    "protocols",
    "os-release",
    "ssl/certs",
    "ssl/openssl.cnf",
    "ca-certificates",
)
_ETC_NETWORK_ENTRIES = ("hosts", "resolv.conf")

# Guest paths the sandbox itself mounts; the workspace may not be put on them.
RESERVED_GUEST_DIRS = frozenset(_SYSTEM_DIRS) | {"etc", "proc", "dev", "tmp"}

# How long teardown waits for the killed sandbox to be gone. SIGKILL is not
# catchable, so this only bounds a kernel that is very slow to reap.
_REAP_TIMEOUT_S = 5.0
# bwrap exits as soon as the sandbox's init does; this is only a fallback.
_BWRAP_EXIT_TIMEOUT_S = 1.0


class SandboxUnavailable(Exception):
    """bubblewrap is not installed (not on the host's PATH)."""


@dataclass(frozen=True)
class SandboxSpec:
    """What one sandbox exposes: the host workspace, where it appears, env, network."""

    root: str
    guest_root: str
    env: Mapping[str, str]
    network: bool


def _generated_files(spec: SandboxSpec) -> dict[str, bytes]:
    files = {
        "/etc/passwd": (
            f"root:x:0:0:root:/root:/usr/sbin/nologin\n"
            f"{SANDBOX_USER}:x:{SANDBOX_UID}:{SANDBOX_GID}:{SANDBOX_USER}:"
            f"{spec.guest_root}:/bin/sh\n"
            f"nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
        ).encode(),
        "/etc/group": (f"root:x:0:\n{SANDBOX_USER}:x:{SANDBOX_GID}:\nnogroup:x:65534:\n").encode(),
    }
    if not spec.network:
        files["/etc/hosts"] = (
            f"127.0.0.1\tlocalhost {SANDBOX_HOSTNAME}\n::1\tlocalhost ip6-localhost ip6-loopback\n"
        ).encode()
    return files


def _system_args() -> list[str]:
    args: list[str] = []
    for name in _SYSTEM_DIRS:
        host = "/" + name
        if os.path.islink(host):
            args += ["--symlink", os.readlink(host), host]
        elif os.path.isdir(host):
            args += ["--ro-bind", host, host]
    return args


def bwrap_args(
    spec: SandboxSpec, status_fd: int, data_fds: Mapping[str, int], command: Sequence[str]
) -> list[str]:
    """The bubblewrap arguments (without the executable) that run `command` sandboxed."""
    args = [
        # New user, mount, pid, ipc, uts, cgroup and network namespaces.
        "--unshare-all",
        # Explicit, not "try": the command must never run as a real (or mapped)
        # root holding capabilities, and a host without user namespaces fails
        # closed instead.
        "--unshare-user",
        "--uid", str(SANDBOX_UID),
        "--gid", str(SANDBOX_GID),
        # No nested user namespaces: nothing inside can regain capabilities.
        "--disable-userns",
        # SIGKILL the sandbox if bwrap or the host process dies.
        "--die-with-parent",
        # setsid() for the command: it has no controlling terminal to inject into.
        "--new-session",
        "--hostname", SANDBOX_HOSTNAME,
        "--clearenv",
    ]  # fmt: skip
    if spec.network:
        args.append("--share-net")
    for name, value in spec.env.items():
        args += ["--setenv", name, value]
    args += _system_args()
    for entry in _ETC_ENTRIES + (_ETC_NETWORK_ENTRIES if spec.network else ()):
        path = "/etc/" + entry
        args += ["--ro-bind-try", path, path]
    for dest, fd in data_fds.items():
        args += ["--ro-bind-data", str(fd), dest]
    args += [
        "--proc", "/proc",
        "--dev", "/dev",
        "--tmpfs", "/tmp",
        "--bind", spec.root, spec.guest_root,
        # The sandbox's own root is a tmpfs: make it read-only so that only the
        # workspace (and the ephemeral /tmp and /dev/shm) can be written.
        "--remount-ro", "/",
        "--chdir", spec.guest_root,
        # Reports the pid (in the host's pid namespace) of the sandbox's init.
        "--json-status-fd", str(status_fd),
        "--",
        *command,
    ]  # fmt: skip
    return args


def _read_child_pid(fd: int) -> int | None:
    """The `child-pid` bwrap reported on its status pipe so far, if any."""
    chunks = []
    while True:
        try:
            chunk = os.read(fd, 4096)
        except BlockingIOError:
            break
        if not chunk:
            break
        chunks.append(chunk)
    text = b"".join(chunks).decode("utf-8", "replace")
    decoder = json.JSONDecoder()
    index = 0
    while True:
        while index < len(text) and text[index].isspace():
            index += 1
        if index >= len(text):
            return None
        try:
            document, index = decoder.raw_decode(text, index)
        except ValueError:
            return None
        if isinstance(document, dict):
            pid = document.get("child-pid")
            if isinstance(pid, int) and not isinstance(pid, bool) and pid > 0:
                return pid


def _parent_pid(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as file:
            stat = file.read()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: fields after
    # the last ')' are fixed.
    fields = stat[stat.rfind(b")") + 2 :].split()
    try:
        return int(fields[1])
    except (IndexError, ValueError):
        return None


class Sandbox:
    """A running sandbox. Its combined output is `stdout`; stdin is /dev/null.

    `kill()` then `reap()` stop it; after `reap()` no process of the sandbox is
    left. The caller reads `stdout` to EOF before `reap()` so that the pipe's
    transport closes.
    """

    def __init__(self, process: asyncio.subprocess.Process, status_fd: int) -> None:
        self._process = process
        self._status_fd = status_fd
        self._init_pidfd: int | None = None
        self._killed = False

    @classmethod
    async def start(cls, spec: SandboxSpec, command: Sequence[str]) -> Sandbox:
        """Starts bwrap. Raises `SandboxUnavailable`, or `OSError` when it cannot be spawned."""
        bwrap = shutil.which("bwrap")
        if bwrap is None:
            raise SandboxUnavailable()
        opened: list[int] = []
        try:
            status_read, status_write = os.pipe2(os.O_CLOEXEC)
            opened += [status_read, status_write]
            data_fds: dict[str, int] = {}
            for dest, content in _generated_files(spec).items():
                read_end, write_end = os.pipe2(os.O_CLOEXEC)
                opened += [read_end, write_end]
                # A few hundred bytes: far below the pipe's capacity, so this
                # write never blocks.
                os.write(write_end, content)
                os.close(write_end)
                opened.remove(write_end)
                data_fds[dest] = read_end
            args = bwrap_args(spec, status_write, data_fds, command)
            process = await asyncio.create_subprocess_exec(
                bwrap,
                *args,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                # bwrap's own diagnostics name host paths: never surface them.
                # The command's stderr is joined to stdout inside the sandbox.
                stderr=asyncio.subprocess.DEVNULL,
                # Nothing of the host's environment reaches even bwrap.
                env={},
                pass_fds=(status_write, *data_fds.values()),
                start_new_session=True,
            )
        except BaseException:
            for fd in opened:
                os.close(fd)
            raise
        for fd in opened:
            if fd != status_read:
                os.close(fd)
        os.set_blocking(status_read, False)
        return cls(process, status_read)

    @property
    def stdout(self) -> asyncio.StreamReader:
        stream = self._process.stdout
        assert stream is not None  # created with stdout=PIPE
        return stream

    async def wait(self) -> int:
        """bwrap's exit status: the command's, or 128 + N when signal N ended it."""
        return await self._process.wait()

    def watch(self) -> None:
        """Starts tracking the sandbox's init, once the command has started.

        Then `reap()` also waits for the init to be gone, so that processes the
        command left in the background are dead too, not only bwrap.
        """
        if self._init_pidfd is None and self._process.returncode is None:
            self._init_pidfd = self._open_init()

    def kill(self) -> None:
        """SIGKILLs the sandbox's init, which takes its whole pid namespace with it.

        bwrap then exits by itself, reaping the init; `reap()` SIGKILLs bwrap's
        process group if it does not (and right away when the init's pid is not
        known yet, as when the sandbox is still starting: `--die-with-parent`
        then kills the init). Idempotent; returns without waiting.
        """
        if self._killed:
            return
        self._killed = True
        if self._process.returncode is not None:
            return
        self.watch()
        if self._init_pidfd is None:
            self._kill_group()
            return
        with contextlib.suppress(ProcessLookupError):
            signal.pidfd_send_signal(self._init_pidfd, signal.SIGKILL)

    def _open_init(self) -> int | None:
        child_pid = _read_child_pid(self._status_fd)
        if child_pid is None:
            return None
        try:
            pidfd = os.pidfd_open(child_pid)
        except OSError:
            return None
        # The pidfd pins the process; checking its parent after opening it
        # proves the pid was not reused by an unrelated process.
        if _parent_pid(child_pid) != self._process.pid:
            os.close(pidfd)
            return None
        return pidfd

    def _kill_group(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self._process.pid, signal.SIGKILL)

    async def reap(self) -> None:
        """Waits for bwrap and, after `kill()`, until no process of the sandbox is left."""
        try:
            if self._killed and self._init_pidfd is not None:
                try:
                    async with asyncio.timeout(_BWRAP_EXIT_TIMEOUT_S):
                        await self._process.wait()
                except TimeoutError:
                    self._kill_group()
            await self._process.wait()
            if self._init_pidfd is not None:
                await self._init_exited(self._init_pidfd)
        finally:
            self.close()

    @staticmethod
    async def _init_exited(pidfd: int) -> None:
        # A pidfd polls readable once its process has exited; the kernel has
        # then killed and reaped every other process of its pid namespace.
        loop = asyncio.get_running_loop()
        exited: asyncio.Future[None] = loop.create_future()

        def on_exit() -> None:
            if not exited.done():
                exited.set_result(None)

        loop.add_reader(pidfd, on_exit)
        try:
            async with asyncio.timeout(_REAP_TIMEOUT_S):
                await exited
        except TimeoutError:
            pass
        finally:
            loop.remove_reader(pidfd)

    def close(self) -> None:
        """Releases the file descriptors. Safe to call twice."""
        if self._init_pidfd is not None:
            os.close(self._init_pidfd)
            self._init_pidfd = None
        if self._status_fd >= 0:
            os.close(self._status_fd)
            self._status_fd = -1
