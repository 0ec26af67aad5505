"""WorkspaceShell with real bubblewrap sandboxes: no mocks."""

from __future__ import annotations

import asyncio
import os
import secrets
import shutil
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from capabilities._errors import CapabilityError
from capabilities._limits import MAX_SHELL_OUTPUT_BYTES, MAX_SHELL_TIMEOUT_MS
from capabilities._shell import DEFAULT_SHELL_ENV, ShellDisabled, ShellPolicy, WorkspaceShell

Update = dict[str, Any]


@pytest.fixture(autouse=True)
def _bwrap_installed() -> None:
    if shutil.which("bwrap") is None:
        pytest.fail("bubblewrap is not installed: apt-get install -y bubblewrap")


@pytest.fixture
def sessions(tmp_path: Path) -> Path:
    """Two session workspaces side by side and a host data directory next to them."""
    (tmp_path / "sessions" / "mine").mkdir(parents=True)
    (tmp_path / "sessions" / "other").mkdir()
    (tmp_path / "sessions" / "other" / "secret.txt").write_text("other-session-secret\n")
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "host.db").write_text("host-data-secret\n")
    return tmp_path / "sessions"


@pytest.fixture
def root(sessions: Path) -> Path:
    return sessions / "mine"


@pytest.fixture
def shell(root: Path) -> WorkspaceShell:
    return WorkspaceShell(root)


def run(
    shell: WorkspaceShell,
    request: dict[str, Any],
    on_output: Callable[[Update], Awaitable[None]] | None = None,
) -> dict[str, Any]:
    return asyncio.run(shell.execute(request, on_output))


def shell_error(shell: WorkspaceShell, request: Any) -> str:
    with pytest.raises(CapabilityError) as caught:
        run(shell, request)
    assert caught.value.tag == "WorkspaceShellError"
    assert str(caught.value) == f"Workspace shell failed: {caught.value.code}"
    return caught.value.code


def ok(output: str, exit_code: int = 0) -> dict[str, Any]:
    return {
        "output": output,
        "exitCode": exit_code,
        "signal": None,
        "timedOut": False,
        "truncated": False,
    }


def marker() -> str:
    """A unique `sleep` argument that finds the command's processes from the host."""
    return f"1000.{secrets.randbelow(10**9):09d}"


def host_pids(mark: str) -> set[int]:
    """Host pids of running `sleep <mark>` processes (the sandbox's own pids differ)."""
    needle = b"sleep\0" + mark.encode() + b"\0"
    found = set()
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"{entry.path}/cmdline", "rb") as file:
                if file.read() == needle:
                    found.add(int(entry.name))
        except OSError:
            continue
    return found


async def wait_for_pids(mark: str, count: int) -> set[int]:
    for _ in range(200):
        pids = host_pids(mark)
        if len(pids) >= count:
            return pids
        await asyncio.sleep(0.01)
    raise AssertionError(f"expected {count} processes with marker {mark}")


def gone(pids: set[int]) -> bool:
    return not any(os.path.exists(f"/proc/{pid}") for pid in pids)


# -- running commands -------------------------------------------------------------------


def test_echo_and_exit_codes(shell: WorkspaceShell) -> None:
    assert run(shell, {"command": "echo hello"}) == ok("hello\n")
    assert run(shell, {"command": "printf 'no newline'; exit 3"}) == ok("no newline", 3)
    assert run(shell, {"command": "false"}) == ok("", 1)
    assert run(shell, {"command": "definitely-not-a-command"}) == ok(
        "/bin/sh: 1: definitely-not-a-command: not found\n", 127
    )


def test_a_signal_is_reported_as_the_shell_reports_it(shell: WorkspaceShell) -> None:
    # The contract's Worker host never sets `signal`; the exit status is 128 + N.
    assert run(shell, {"command": "kill -9 $$"}) == ok("", 137)


def test_stdout_and_stderr_interleave_in_arrival_order(shell: WorkspaceShell) -> None:
    result = run(shell, {"command": "echo out1; echo err1 >&2; echo out2; echo err2 1>&2"})
    assert result == ok("out1\nerr1\nout2\nerr2\n")


def test_command_starting_with_a_dash_is_a_command(shell: WorkspaceShell) -> None:
    assert run(shell, {"command": "-x"}) == ok("/bin/sh: 1: -x: not found\n", 127)


def test_runs_as_an_unprivileged_user_with_its_own_hostname(shell: WorkspaceShell) -> None:
    result = run(shell, {"command": "id; hostname; grep CapEff /proc/self/status"})
    assert result == ok(
        "uid=1000(workspace) gid=1000(workspace) groups=1000(workspace)\n"
        "workspace\n"
        "CapEff:\t0000000000000000\n"
    )


def test_concurrent_commands(shell: WorkspaceShell) -> None:
    async def both() -> list[dict[str, Any]]:
        return list(
            await asyncio.gather(
                shell.execute({"command": "sleep 0.2; echo a"}),
                shell.execute({"command": "echo b"}),
            )
        )

    assert asyncio.run(both()) == [ok("a\n"), ok("b\n")]


# -- working directory ------------------------------------------------------------------


def test_cwd_relative_absolute_and_default(shell: WorkspaceShell, root: Path) -> None:
    (root / "sub" / "deeper").mkdir(parents=True)
    assert run(shell, {"command": "pwd"}) == ok("/workspace\n")
    assert run(shell, {"command": "pwd", "cwd": "."}) == ok("/workspace\n")
    assert run(shell, {"command": "pwd", "cwd": None}) == ok("/workspace\n")
    assert run(shell, {"command": "pwd", "cwd": "sub"}) == ok("/workspace/sub\n")
    assert run(shell, {"command": "pwd", "cwd": "./sub//deeper/"}) == ok("/workspace/sub/deeper\n")
    assert run(shell, {"command": "pwd", "cwd": "/workspace"}) == ok("/workspace\n")
    assert run(shell, {"command": "pwd", "cwd": "/workspace/sub"}) == ok("/workspace/sub\n")
    (root / "inside").symlink_to("sub")
    assert run(shell, {"command": "pwd; pwd -P", "cwd": "inside"}) == ok(
        "/workspace/inside\n/workspace/sub\n"
    )


def test_cwd_outside_the_workspace_is_invalid(shell: WorkspaceShell, root: Path) -> None:
    (root / "sub").mkdir()
    for cwd in [
        "",
        "..",
        "../other",
        "sub/../..",
        "sub/..",
        "/",
        "/etc",
        "/workspacex",
        "/workspace/../etc",
        "sub\\x",
        "sub\0",
        "x" * 1025,
        "\ud800",
        5,
        ["sub"],
    ]:
        assert shell_error(shell, {"command": "pwd", "cwd": cwd}) == "invalid_command", cwd
    # Lexically inside but resolving outside through a symlink, as the sandbox sees it.
    (root / "escape").symlink_to("/usr")
    assert shell_error(shell, {"command": "pwd", "cwd": "escape"}) == "invalid_command"
    # 1,024 characters is still a valid workdir (it just does not exist).
    assert shell_error(shell, {"command": "pwd", "cwd": "x" * 1024}) == "spawn_failed"


def test_cwd_that_does_not_exist_fails_to_spawn(shell: WorkspaceShell, root: Path) -> None:
    (root / "file.txt").write_text("not a directory\n")
    assert shell_error(shell, {"command": "pwd", "cwd": "missing"}) == "spawn_failed"
    assert shell_error(shell, {"command": "pwd", "cwd": "/workspace/missing"}) == "spawn_failed"
    assert shell_error(shell, {"command": "pwd", "cwd": "file.txt"}) == "spawn_failed"
    assert shell_error(shell, {"command": "pwd", "cwd": "/workspace/file.txt"}) == "spawn_failed"


def test_custom_guest_root(root: Path) -> None:
    shell = WorkspaceShell(root, ShellPolicy(env={"PATH": "/usr/bin:/bin"}), guest_root="/srv/ws")
    assert run(shell, {"command": "pwd; echo x > f", "cwd": "/srv/ws"}) == ok("/srv/ws\n")
    assert (root / "f").read_text() == "x\n"
    assert shell_error(shell, {"command": "pwd", "cwd": "/workspace"}) == "invalid_command"


@pytest.mark.parametrize("guest_root", ["", "workspace", "/", "/usr", "/tmp/ws", "/a/../b", "/a/"])
def test_guest_root_must_be_a_normal_absolute_path_outside_system_dirs(
    root: Path, guest_root: str
) -> None:
    with pytest.raises(ValueError):
        WorkspaceShell(root, guest_root=guest_root)


# -- the sandbox ------------------------------------------------------------------------


def test_a_file_written_by_the_command_appears_in_the_workspace(
    shell: WorkspaceShell, root: Path
) -> None:
    result = run(
        shell, {"command": "mkdir -p out && echo kept > out/a.txt && echo x > /workspace/b"}
    )
    assert result == ok("")
    assert (root / "out" / "a.txt").read_text() == "kept\n"
    assert (root / "b").read_text() == "x\n"
    assert (root / "b").stat().st_uid == os.getuid()


def test_the_workspace_is_the_only_lasting_writable_place(shell: WorkspaceShell) -> None:
    for target in ["/usr/x", "/etc/x", "/x", "/bin/x", "/proc/x"]:
        result = run(shell, {"command": f"touch {target}"})
        assert result["exitCode"] == 1, target
        assert result["output"].startswith(f"touch: cannot touch '{target}': "), target
    assert run(shell, {"command": "touch /usr/x"}) == ok(
        "touch: cannot touch '/usr/x': Read-only file system\n", 1
    )
    # /tmp is a fresh tmpfs per command: writable, never the host's, never kept.
    name = f"shell-test-{uuid.uuid4()}"
    assert run(shell, {"command": f"echo t > /tmp/{name} && cat /tmp/{name}"}) == ok("t\n")
    assert not Path(tempfile.gettempdir(), name).exists()
    assert run(shell, {"command": f"test -e /tmp/{name}"}) == ok("", 1)


def test_other_workspaces_and_host_data_are_invisible(
    shell: WorkspaceShell, sessions: Path
) -> None:
    secret = sessions / "other" / "secret.txt"
    host_db = sessions.parent / "data" / "host.db"
    assert run(shell, {"command": f"cat {secret}"}) == ok(
        f"cat: {secret}: No such file or directory\n", 1
    )
    assert run(shell, {"command": f"cat {host_db}"}) == ok(
        f"cat: {host_db}: No such file or directory\n", 1
    )
    assert run(shell, {"command": "cat ../other/secret.txt"}) == ok(
        "cat: ../other/secret.txt: No such file or directory\n", 1
    )
    assert run(shell, {"command": f"ls {sessions}"})["exitCode"] == 2
    listing = run(shell, {"command": "ls -a /workspace/.."})
    assert listing["exitCode"] == 0
    names = set(listing["output"].split())
    assert {"usr", "etc", "proc", "dev", "tmp", "workspace"} <= names
    assert names <= {".", "..", "usr", "etc", "proc", "dev", "tmp", "workspace"} | {
        "bin", "sbin", "lib", "lib32", "lib64", "libx32",
    }  # fmt: skip
    # Everything but the host's own /usr (and /proc) is searched by name.
    found = run(
        shell,
        {
            "command": "find / -path /proc -prune -o -path /usr -prune"
            " -o \\( -name secret.txt -o -name host.db \\) -print"
        },
    )
    assert found == ok("")
    patterns = "-e other-session-secret -e host-data-secret"
    hunted = run(shell, {"command": f"grep -rs {patterns} /workspace /tmp /etc /usr/local"})
    assert hunted == ok("", 1)


def test_etc_is_minimal(shell: WorkspaceShell) -> None:
    result = run(shell, {"command": "cat /etc/passwd; test -e /etc/shadow || echo no-shadow"})
    assert result == ok(
        "root:x:0:0:root:/root:/usr/sbin/nologin\n"
        "workspace:x:1000:1000:workspace:/workspace:/bin/sh\n"
        "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
        "no-shadow\n"
    )


def test_environment_is_the_allow_list_only(
    shell: WorkspaceShell, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = f"host-secret-{uuid.uuid4()}"
    monkeypatch.setenv("WORKER_HOST_SHELL_TEST_SECRET", secret)
    result = run(shell, {"command": "env"})
    assert result["exitCode"] == 0
    assert secret not in result["output"]
    env = dict(line.split("=", 1) for line in result["output"].splitlines())
    # PWD is the shell's own.
    assert env == {**DEFAULT_SHELL_ENV, "PWD": "/workspace"}
    assert dict(DEFAULT_SHELL_ENV) == {
        "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "HOME": "/workspace",
        "LANG": "C.UTF-8",
        "TERM": "dumb",
        "TMPDIR": "/tmp",
    }

    custom = WorkspaceShell(root, ShellPolicy(env={"PATH": "/usr/bin:/bin", "FOO": "a b=c"}))
    result = run(custom, {"command": "env", "cwd": "/workspace"})
    env = dict(line.split("=", 1) for line in result["output"].splitlines())
    assert env == {"PATH": "/usr/bin:/bin", "FOO": "a b=c", "PWD": "/workspace"}


def test_policy_env_is_validated_and_frozen() -> None:
    for bad in [{"A=B": "x"}, {"": "x"}, {"1A": "x"}, {"A": "x\0y"}]:
        with pytest.raises(ValueError):
            ShellPolicy(env=bad)
    source = {"A": "1"}
    policy = ShellPolicy(env=source)
    source["A"] = "2"
    assert policy.env == {"A": "1"}
    with pytest.raises(TypeError):
        policy.env["A"] = "3"  # type: ignore[index]
    assert ShellPolicy() == ShellPolicy(enabled=True, network=False, env=DEFAULT_SHELL_ENV)


def _interfaces(output: str) -> set[str]:
    return {line.split(":")[0].strip() for line in output.splitlines()[2:]}


def _connect(port: int) -> str:
    return f"bash -c 'exec 3<>/dev/tcp/127.0.0.1/{port} && echo ping >&3'"


def _with_listener(
    shell: WorkspaceShell, command: Callable[[int], str]
) -> tuple[dict[str, Any], list[bytes]]:
    """Runs a command while a loopback listener is open on the host; returns what it received."""
    received: list[bytes] = []

    async def scenario() -> dict[str, Any]:
        async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            received.append(await reader.read(100))
            writer.close()
            await writer.wait_closed()

        server = await asyncio.start_server(accept, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        try:
            result = await shell.execute({"command": command(port)})
            await asyncio.sleep(0.05)  # let the accept callback finish
            return result
        finally:
            server.close()
            await server.wait_closed()

    return asyncio.run(scenario()), received


def test_no_network_by_default(shell: WorkspaceShell) -> None:
    result = run(shell, {"command": "cat /proc/net/dev"})
    assert _interfaces(result["output"]) == {"lo"}
    result, received = _with_listener(shell, _connect)
    assert result["exitCode"] == 1
    assert "Connection refused" in result["output"]
    assert received == []


def test_network_when_the_operator_enables_it(root: Path) -> None:
    shell = WorkspaceShell(root, ShellPolicy(network=True))
    result, received = _with_listener(shell, _connect)
    assert result == ok("")
    assert received == [b"ping\n"]


# -- output limits and the artifact -------------------------------------------------------


def _artifact_files(root: Path) -> list[Path]:
    return sorted((root / ".ze-harness" / "tool-output").glob("*"))


def _check_artifact(root: Path, artifact: dict[str, Any], content: bytes, state: str) -> None:
    assert set(artifact) == {"id", "path", "observedBytes", "state"}
    assert uuid.UUID(artifact["id"]).version == 4
    assert artifact["path"] == f".ze-harness/tool-output/{artifact['id']}.log"
    assert artifact["observedBytes"] == len(content)
    assert artifact["state"] == state
    assert (root / artifact["path"]).read_bytes() == content
    assert _artifact_files(root) == [root / artifact["path"]]


def test_output_at_the_limit_is_whole(shell: WorkspaceShell, root: Path) -> None:
    content = (b"0123456789abcdef" * 3200)[:MAX_SHELL_OUTPUT_BYTES]
    (root / "exact.txt").write_bytes(content)
    assert run(shell, {"command": "cat exact.txt"}) == ok(content.decode())
    assert not (root / ".ze-harness").exists()


def test_one_byte_over_the_limit_spills(shell: WorkspaceShell, root: Path) -> None:
    content = b"a" + (b"0123456789abcdef" * 3200)[:MAX_SHELL_OUTPUT_BYTES]
    (root / "over.txt").write_bytes(content)
    result = run(shell, {"command": "cat over.txt"})
    artifact = result.pop("artifact")
    assert result == {**ok(content[1:].decode()), "truncated": True}
    _check_artifact(root, artifact, content, "complete")


def test_large_output_keeps_the_tail_and_the_full_artifact(
    shell: WorkspaceShell, root: Path
) -> None:
    content = b"".join(b"%06d\n" % i for i in range(40_000))  # 280,000 bytes
    (root / "big.txt").write_bytes(content)
    result = run(shell, {"command": "cat big.txt; echo end >&2"})
    full = content + b"end\n"
    assert result["output"] == full[-MAX_SHELL_OUTPUT_BYTES:].decode()
    assert result["truncated"] is True
    assert result["exitCode"] == 0
    assert set(result) == {"output", "exitCode", "signal", "timedOut", "truncated", "artifact"}
    _check_artifact(root, result["artifact"], full, "complete")


def test_the_cut_never_splits_a_character(shell: WorkspaceShell, root: Path) -> None:
    # 60,001 bytes: the cut falls on the second byte of an "é".
    content = "é" * 30_000 + "x"
    (root / "utf8.txt").write_text(content, encoding="utf-8")
    result = run(shell, {"command": "cat utf8.txt"})
    assert result["output"] == "é" * 25_599 + "x"
    assert result["truncated"] is True
    assert result["artifact"]["observedBytes"] == 60_001


def test_invalid_utf8_is_replaced_within_the_byte_limit(shell: WorkspaceShell, root: Path) -> None:
    (root / "binary").write_bytes(b"\xff" * MAX_SHELL_OUTPUT_BYTES)
    result = run(shell, {"command": "cat binary"})
    # Each replacement character is 3 bytes: only the last 17,066 fit.
    assert result == {**ok("\ufffd" * 17_066), "truncated": True}
    assert len(result["output"].encode()) <= MAX_SHELL_OUTPUT_BYTES


def test_artifact_never_goes_through_a_symlink(
    shell: WorkspaceShell, root: Path, sessions: Path
) -> None:
    elsewhere = sessions / "other"
    # Planted by the command itself, pointing at a host directory.
    result = shell_error(
        shell, {"command": f"ln -s {elsewhere} .ze-harness && head -c 60000 /dev/zero"}
    )
    assert result == "spawn_failed"
    assert sorted(p.name for p in elsewhere.iterdir()) == ["secret.txt"]

    (root / ".ze-harness").unlink()
    (root / ".ze-harness").mkdir()
    (root / ".ze-harness" / "tool-output").symlink_to(elsewhere)
    assert shell_error(shell, {"command": "head -c 60000 /dev/zero"}) == "spawn_failed"
    assert sorted(p.name for p in elsewhere.iterdir()) == ["secret.txt"]


def test_artifact_write_failure_is_spawn_failed(shell: WorkspaceShell, root: Path) -> None:
    (root / ".ze-harness").write_text("a file, not a directory\n")
    assert shell_error(shell, {"command": "head -c 60000 /dev/zero"}) == "spawn_failed"
    # Below the limit no artifact is needed, so nothing fails.
    assert run(shell, {"command": "echo fine"}) == ok("fine\n")


# -- timeout and cancellation -------------------------------------------------------------


def test_timeout(shell: WorkspaceShell) -> None:
    started = time.monotonic()
    result = run(shell, {"command": "echo before; sleep 10", "timeoutMs": 200})
    assert time.monotonic() - started < 3
    assert result == {
        "output": "before\n",
        "exitCode": None,
        "signal": None,
        "timedOut": True,
        "truncated": False,
    }


def test_timeout_kills_every_process_of_the_command(shell: WorkspaceShell) -> None:
    mark = marker()
    seen: set[int] = set()

    async def on_output(update: Update) -> None:
        if "started" in update["preview"] and not seen:
            seen.update(await wait_for_pids(mark, 3))

    # A background child, one in a session of its own, and a foreground child.
    command = f"sleep {mark} & setsid sleep {mark} & sleep 0.1; echo started; sleep {mark}"
    result = run(shell, {"command": command, "timeoutMs": 1500}, on_output)
    assert result == {
        "output": "started\n",
        "exitCode": None,
        "signal": None,
        "timedOut": True,
        "truncated": False,
    }
    assert len(seen) == 3
    assert gone(seen)
    assert host_pids(mark) == set()


def test_timeout_after_spilling_leaves_an_incomplete_artifact(
    shell: WorkspaceShell, root: Path
) -> None:
    result = run(
        shell, {"command": "head -c 60000 /dev/zero | tr '\\0' a; sleep 10", "timeoutMs": 700}
    )
    artifact = result.pop("artifact")
    assert result == {
        "output": "a" * MAX_SHELL_OUTPUT_BYTES,
        "exitCode": None,
        "signal": None,
        "timedOut": True,
        "truncated": True,
    }
    _check_artifact(root, artifact, b"a" * 60_000, "incomplete")


def test_background_children_do_not_outlive_the_command(shell: WorkspaceShell) -> None:
    mark = marker()
    started = time.monotonic()
    assert run(shell, {"command": f"sleep {mark} & echo done"}) == ok("done\n")
    assert time.monotonic() - started < 3
    assert host_pids(mark) == set()


def test_cancellation_kills_the_command_before_propagating(shell: WorkspaceShell) -> None:
    mark = marker()

    async def scenario() -> tuple[set[int], bool]:
        ready = asyncio.Event()

        async def on_output(update: Update) -> None:
            if "started" in update["preview"]:
                ready.set()

        command = f"sleep {mark} & sleep 0.1; echo started; sleep {mark}"
        task = asyncio.create_task(shell.execute({"command": command}, on_output))
        await asyncio.wait_for(ready.wait(), 10)
        pids = await wait_for_pids(mark, 2)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return pids, gone(pids)

    pids, gone_at_cancel = asyncio.run(scenario())
    assert len(pids) == 2
    assert gone_at_cancel


# -- progress -----------------------------------------------------------------------------


def _collect(updates: list[tuple[float, Update]]) -> Callable[[Update], Awaitable[None]]:
    async def on_output(update: Update) -> None:
        updates.append((time.monotonic(), update))

    return on_output


def _check_update(update: Update) -> None:
    assert set(update) <= {"preview", "observedBytes", "truncated", "artifact"}
    assert {"preview", "observedBytes", "truncated"} <= set(update)
    assert None not in update.values()
    assert isinstance(update["preview"], str)
    assert len(update["preview"].encode()) <= MAX_SHELL_OUTPUT_BYTES
    assert isinstance(update["observedBytes"], int) and update["observedBytes"] >= 0
    assert isinstance(update["truncated"], bool)


def test_progress_reports_each_burst_and_a_final_update(shell: WorkspaceShell) -> None:
    updates: list[tuple[float, Update]] = []
    command = "echo one; sleep 0.3; echo two; sleep 0.3; echo three"
    assert run(shell, {"command": command}, _collect(updates)) == ok("one\ntwo\nthree\n")
    for _, update in updates:
        _check_update(update)
    assert [update for _, update in updates] == [
        {"preview": "one\n", "observedBytes": 4, "truncated": False},
        {"preview": "one\ntwo\n", "observedBytes": 8, "truncated": False},
        {"preview": "one\ntwo\nthree\n", "observedBytes": 14, "truncated": False},
        {"preview": "one\ntwo\nthree\n", "observedBytes": 14, "truncated": False},
    ]


def test_progress_is_throttled(shell: WorkspaceShell) -> None:
    updates: list[tuple[float, Update]] = []
    command = "for i in 1 2 3 4 5 6 7 8 9 10; do seq 1 500; sleep 0.05; done"
    result = run(shell, {"command": command}, _collect(updates))
    assert result["exitCode"] == 0
    times = [at for at, _ in updates[:-1]]  # the final update is not throttled
    assert all(later - earlier >= 0.099 for earlier, later in zip(times, times[1:], strict=False))
    assert 2 <= len(updates) <= 9
    observed = [update["observedBytes"] for _, update in updates]
    assert observed == sorted(observed)
    assert updates[-1][1] == {
        "preview": result["output"],
        "observedBytes": len(result["output"]),
        "truncated": False,
    }


def test_progress_with_an_artifact(shell: WorkspaceShell, root: Path) -> None:
    updates: list[tuple[float, Update]] = []
    command = (
        "head -c 40000 /dev/zero | tr '\\0' a; sleep 0.2; head -c 40000 /dev/zero | tr '\\0' b"
    )
    result = run(shell, {"command": command}, _collect(updates))
    for _, update in updates:
        _check_update(update)
    # Output that stops arriving is still reported once the interval has passed.
    assert {"preview": "a" * 40_000, "observedBytes": 40_000, "truncated": False} in [
        update for _, update in updates
    ]
    final = updates[-1][1]
    spilled = [update for _, update in updates if "artifact" in update]
    assert [u["artifact"]["state"] for u in spilled[:-1]] == ["writing"] * (len(spilled) - 1)
    assert final == {
        "preview": result["output"],
        "observedBytes": 80_000,
        "truncated": True,
        "artifact": result["artifact"],
    }
    assert {u["artifact"]["id"] for u in spilled} == {result["artifact"]["id"]}
    _check_artifact(root, result["artifact"], b"a" * 40_000 + b"b" * 40_000, "complete")


def test_progress_for_a_silent_command(shell: WorkspaceShell) -> None:
    updates: list[tuple[float, Update]] = []
    assert run(shell, {"command": "true"}, _collect(updates)) == ok("")
    assert [update for _, update in updates] == [
        {"preview": "", "observedBytes": 0, "truncated": False}
    ]


def test_a_raising_on_output_kills_the_command(shell: WorkspaceShell) -> None:
    mark = marker()
    seen: set[int] = set()

    async def on_output(update: Update) -> None:
        seen.update(await wait_for_pids(mark, 1))
        raise RuntimeError("client went away")

    with pytest.raises(CapabilityError) as caught:
        run(shell, {"command": f"sleep {mark} & sleep 0.1; echo x; wait"}, on_output)
    assert caught.value.code == "spawn_failed"
    assert caught.value.tag == "WorkspaceShellError"
    assert len(seen) == 1
    assert gone(seen)


def test_on_output_raising_at_the_final_update(shell: WorkspaceShell) -> None:
    async def on_output(update: Update) -> None:
        raise ValueError("no")

    with pytest.raises(CapabilityError) as caught:
        run(shell, {"command": "true"}, on_output)
    assert caught.value.code == "spawn_failed"


# -- validation and availability ----------------------------------------------------------


@pytest.mark.parametrize(
    "request_",
    [
        {},
        {"command": ""},
        {"command": None},
        {"command": 5},
        {"command": ["echo", "hi"]},
        {"command": "echo a\0b"},
        {"command": "echo \ud800"},
        ["echo hi"],
        "echo hi",
    ],
)
def test_invalid_command(shell: WorkspaceShell, request_: Any) -> None:
    assert shell_error(shell, request_) == "invalid_command"


@pytest.mark.parametrize(
    "timeout_ms",
    [0, -1, -0.5, "100", "NaN", True, MAX_SHELL_TIMEOUT_MS + 1, float("inf"), 10**400, [1]],
)
def test_invalid_timeout(shell: WorkspaceShell, timeout_ms: Any) -> None:
    assert shell_error(shell, {"command": "true", "timeoutMs": timeout_ms}) == "invalid_timeout"


def test_valid_timeouts(shell: WorkspaceShell) -> None:
    for timeout_ms in [MAX_SHELL_TIMEOUT_MS, 60_000, 5_000.5, None]:
        assert run(shell, {"command": "echo ok", "timeoutMs": timeout_ms}) == ok("ok\n")


def test_disabled_policy(root: Path) -> None:
    shell = WorkspaceShell(root, ShellPolicy(enabled=False))
    for request in [{"command": "echo hi"}, {"command": ""}]:
        with pytest.raises(ShellDisabled) as caught:
            run(shell, request)
        assert not isinstance(caught.value, CapabilityError)
    assert list(root.iterdir()) == []


def test_missing_bwrap_is_spawn_failed(
    shell: WorkspaceShell, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "empty-bin").mkdir()
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    assert shell_error(shell, {"command": "true"}) == "spawn_failed"


def test_missing_workspace_is_spawn_failed(tmp_path: Path) -> None:
    shell = WorkspaceShell(tmp_path / "missing")
    assert shell_error(shell, {"command": "true"}) == "spawn_failed"


@pytest.fixture(autouse=True)
def _no_leaked_fds() -> Iterator[None]:
    before = set(os.listdir("/proc/self/fd"))
    yield
    leaked = set(os.listdir("/proc/self/fd")) - before
    assert leaked == set()
