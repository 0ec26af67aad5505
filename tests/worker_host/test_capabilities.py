"""Host capabilities as a guest sees them: real bundles, real isolates, real I/O.

tests/capabilities proves the host-side implementations in Python. Here every
method and every failure code goes through the guest path: a bundle in a fresh
QuickJS isolate calls `context.workspaceFiles`, `workspaceShell`, `webFetch` or
`fetch`, the prelude queues a host request, the call scope performs it against
a real workspace directory, bubblewrap sandbox or loopback HTTPS server, and the
prelude rebuilds the answer (or the tagged failure) inside the guest.

Most tests drive a `PluginRunner` with a `CallScope` directly; the ones about
wiring (`session.workspace`, `HostConfig.capabilities`) go through `Host` with
bundles served over real HTTPS. They share one data directory whose compiled
guest the runners use too, so the whole module compiles the guest once.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import os
import shutil
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest

from capabilities import (
    MAX_FILE_READ_BYTES,
    MAX_SHELL_OUTPUT_BYTES,
    MAX_SHELL_TIMEOUT_MS,
    MAX_WEB_FETCH_RESPONSE_BYTES,
    MAX_WEB_FETCH_TIMEOUT_MS,
    NetworkPolicy,
    ShellPolicy,
)
from tests.support.https_server import LoopbackServer, ThrowawayCA
from tests.support.operator import ALLOW_ALL
from tests.worker_host.bundles import CONTEXT, TIMED_OUT, failed, plugin_code, plugin_source
from tests.worker_host.capability_bundles import (
    assert_no_host_path,
    file_failure,
    no_capability,
    ok,
    plugin_error,
    probe_source,
    run_steps,
    run_tool,
    shell_failure,
    web_failure,
    without_name,
)
from worker_host import (
    CallScope,
    CapabilityPolicy,
    GuestRuntime,
    Host,
    HostConfig,
    IsolateLimits,
    PluginRunner,
    Session,
    ToolResult,
    WorkerHostError,
    shared_runtime,
)
from worker_host._tools import call_tool

T = TypeVar("T")

TEXT = "text/plain; charset=utf-8"


@pytest.fixture(autouse=True)
def _bwrap_installed() -> None:
    if shutil.which("bwrap") is None:
        pytest.fail("bubblewrap is not installed: apt-get install -y bubblewrap")


@pytest.fixture(scope="module")
def host_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One data directory for every Host test here."""
    return tmp_path_factory.mktemp("host-data")


@pytest.fixture(scope="module")
def runtime(host_data: Path) -> GuestRuntime:
    """The compiled guest the Host tests' hosts use too (keyed by the cache directory)."""
    return shared_runtime(host_data / "cache")


@pytest.fixture
def runner(runtime: GuestRuntime) -> PluginRunner:
    return PluginRunner(runtime, IsolateLimits(cpu_time_ms=1_000, wall_time_ms=10_000))


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """The session workspace (`/workspace` to guests), with a sibling outside it."""
    root = tmp_path / "workspace"
    root.mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("outside secret\n")
    return root


@pytest.fixture
def outside(workspace: Path) -> Path:
    return workspace.parent / "outside"


@pytest.fixture
def scope(workspace: Path) -> CallScope:
    """The default policy: files and shell on, no loopback network."""
    return CallScope.for_workspace(workspace, CapabilityPolicy())


@pytest.fixture
def loopback(tls_ca: ThrowawayCA) -> NetworkPolicy:
    return NetworkPolicy(allow_loopback=True, ca_bundle=tls_ca.ca_file)


@pytest.fixture
def net_scope(workspace: Path, loopback: NetworkPolicy) -> CallScope:
    return CallScope.for_workspace(workspace, CapabilityPolicy(network=loopback))


def run(awaitable: Awaitable[T]) -> T:
    async def wrapper() -> T:
        return await awaitable

    return asyncio.run(wrapper())


def steps(
    runner: PluginRunner, scope: CallScope, *calls: tuple[str, dict[str, Any]]
) -> list[dict[str, Any]]:
    return run(run_steps(runner, scope, *calls))


def call(
    runner: PluginRunner, source: bytes, scope: CallScope, tool_input: Any = None
) -> ToolResult:
    return run(run_tool(runner, source, scope, tool_input))


def value_of(result: ToolResult) -> Any:
    assert result.ok, result
    return result.value


# ---- Host-level harness ------------------------------------------------------------


@pytest.fixture
def host_config(
    host_data: Path, runtime: GuestRuntime, tls_ca: ThrowawayCA
) -> Callable[..., HostConfig]:
    def make(capabilities: CapabilityPolicy | None = None) -> HostConfig:
        return HostConfig(permissions=ALLOW_ALL, 
            data_dir=host_data,
            ca_bundle=tls_ca.ca_file,
            capabilities=capabilities or CapabilityPolicy(),
            isolate_limits=IsolateLimits(cpu_time_ms=1_000, wall_time_ms=10_000),
        )

    return make


def in_session(
    config: HostConfig,
    https_server: LoopbackServer,
    source: bytes,
    scenario: Callable[[Session], Awaitable[T]],
    *,
    before: Callable[[Path], object] | None = None,
) -> T:
    """Serves `source`, adds it to a fresh session and runs `scenario(session)`.

    `before(workspace)` prepares the session's workspace before the plugin is added.
    """
    name = uuid.uuid4().hex
    https_server.serve(f"/{name}.mjs", source)

    async def body() -> T:
        async with Host(config) as host:
            session = host.session(name, create=True)
            if before is not None:
                before(session.workspace)
            await session.add_plugin(https_server.url(f"/{name}.mjs"), "example.x")
            return await scenario(session)

    return run(body())


# ==== workspaceFiles ==================================================================


def test_resolve_path_inside_outside_and_external(
    runner: PluginRunner, scope: CallScope, workspace: Path
) -> None:
    (workspace / "sub").mkdir()
    (workspace / "other").mkdir()
    (workspace / "sub" / "up").symlink_to("../other")
    results = steps(
        runner,
        scope,
        ("workspaceFiles.resolvePath", {"filePath": "a.txt", "cwd": "sub"}),
        ("workspaceFiles.resolvePath", {"filePath": ".", "cwd": "sub"}),
        ("workspaceFiles.resolvePath", {"filePath": "/workspace/sub/new/deep.txt", "cwd": "sub"}),
        ("workspaceFiles.resolvePath", {"filePath": "a.txt"}),
        ("workspaceFiles.resolvePath", {"filePath": "../other/b.txt", "cwd": "sub"}),
        ("workspaceFiles.resolvePath", {"filePath": "/workspace/other", "cwd": "/workspace/sub"}),
        ("workspaceFiles.resolvePath", {"filePath": "up/c.txt", "cwd": "sub"}),
        ("workspaceFiles.resolvePath", {"filePath": "/etc/passwd", "cwd": "sub"}),
        ("workspaceFiles.resolvePath", {"filePath": "", "cwd": "sub"}),
        ("workspaceFiles.resolvePath", {"filePath": "a.txt", "cwd": "../sub"}),
    )
    external_other = {"resource": "/workspace/other/*", "save": "/workspace/other/*"}
    assert without_name(results) == [
        ok({"canonicalPath": "/workspace/sub/a.txt", "resource": "a.txt"}),
        ok({"canonicalPath": "/workspace/sub", "resource": "."}),
        ok({"canonicalPath": "/workspace/sub/new/deep.txt", "resource": "new/deep.txt"}),
        ok({"canonicalPath": "/workspace/a.txt", "resource": "a.txt"}),
        ok(
            {
                "canonicalPath": "/workspace/other/b.txt",
                "resource": "/workspace/other/b.txt",
                "externalDirectory": external_other,
            }
        ),
        ok(
            {
                "canonicalPath": "/workspace/other",
                "resource": "/workspace/other",
                "externalDirectory": external_other,
            }
        ),
        # A link inside the workdir that leads out of it is resolved before judging.
        ok(
            {
                "canonicalPath": "/workspace/other/c.txt",
                "resource": "/workspace/other/c.txt",
                "externalDirectory": external_other,
            }
        ),
        file_failure("invalid_path"),
        file_failure("invalid_path"),
        file_failure("invalid_path"),
    ]
    assert_no_host_path(results, workspace)


def test_read_write_remove_and_list_results_exactly(
    runner: PluginRunner, scope: CallScope, workspace: Path
) -> None:
    (workspace / "notes").mkdir()
    (workspace / "notes" / "zeta").mkdir()
    (workspace / "notes" / "b.txt").write_text("bee")
    results = steps(
        runner,
        scope,
        ("workspaceFiles.writeText", {"filePath": "notes/a.txt", "content": "héllo\n"}),
        ("workspaceFiles.writeText", {"filePath": "/workspace/made/on/demand.txt", "content": ""}),
        ("workspaceFiles.readText", {"filePath": "/workspace/notes/a.txt"}),
        ("workspaceFiles.readText", {"filePath": "notes/a.txt", "maxBytes": 7}),
        ("workspaceFiles.readDirectory", {"dirPath": "notes"}),
        ("workspaceFiles.readDirectory", {"dirPath": "/workspace/notes", "offset": 2, "limit": 1}),
        ("workspaceFiles.readDirectory", {"dirPath": "/workspace"}),
        ("workspaceFiles.removeFile", {"filePath": "notes/b.txt"}),
        ("workspaceFiles.readDirectory", {"dirPath": "notes", "offset": 3}),
        # A lone surrogate is written as U+FFFD, as TextEncoder would encode it.
        ("workspaceFiles.writeText", {"filePath": "odd.txt", "content": "a\ud800b"}),
    )
    assert without_name(results) == [
        ok({"filePath": "notes/a.txt", "byteLength": 7}),
        ok({"filePath": "/workspace/made/on/demand.txt", "byteLength": 0}),
        ok({"filePath": "/workspace/notes/a.txt", "content": "héllo\n", "byteLength": 7}),
        ok({"filePath": "notes/a.txt", "content": "héllo\n", "byteLength": 7}),
        ok(
            {
                "dirPath": "notes",
                "entries": [
                    {"name": "a.txt", "kind": "file"},
                    {"name": "b.txt", "kind": "file"},
                    {"name": "zeta", "kind": "directory"},
                ],
                "offset": 1,
                "totalEntries": 3,
                "truncated": False,
            }
        ),
        ok(
            {
                "dirPath": "/workspace/notes",
                "entries": [{"name": "b.txt", "kind": "file"}],
                "offset": 2,
                "totalEntries": 3,
                "truncated": True,
            }
        ),
        ok(
            {
                "dirPath": "/workspace",
                "entries": [
                    {"name": "made", "kind": "directory"},
                    {"name": "notes", "kind": "directory"},
                ],
                "offset": 1,
                "totalEntries": 2,
                "truncated": False,
            }
        ),
        ok({"filePath": "notes/b.txt"}),
        ok(
            {
                "dirPath": "notes",
                "entries": [],
                "offset": 3,
                "totalEntries": 2,
                "truncated": False,
            }
        ),
        ok({"filePath": "odd.txt", "byteLength": 5}),
    ]
    assert (workspace / "odd.txt").read_text() == "a\ufffdb"
    assert (workspace / "notes" / "a.txt").read_bytes() == "héllo\n".encode()
    assert (workspace / "made" / "on" / "demand.txt").read_bytes() == b""
    assert not (workspace / "notes" / "b.txt").exists()
    assert_no_host_path(results, workspace)


def test_every_file_error_code_as_the_guest_sees_it(
    runner: PluginRunner, scope: CallScope, workspace: Path
) -> None:
    (workspace / "dir").mkdir()
    (workspace / "ten.txt").write_text("0123456789")
    (workspace / "big.txt").write_bytes(b"x" * (MAX_FILE_READ_BYTES + 1))
    (workspace / "max.txt").write_bytes(b"x" * MAX_FILE_READ_BYTES)
    (workspace / "latin1.txt").write_bytes(b"caf\xe9")
    cases: list[tuple[tuple[str, dict[str, Any]], str]] = [
        (("workspaceFiles.readText", {"filePath": ""}), "invalid_path"),
        (("workspaceFiles.readText", {"filePath": "a\0b"}), "invalid_path"),
        (("workspaceFiles.readText", {"filePath": "/etc/hostname"}), "invalid_path"),
        (
            ("workspaceFiles.writeText", {"filePath": "../escape.txt", "content": "x"}),
            "invalid_path",
        ),
        (("workspaceFiles.readDirectory", {"dirPath": "dir", "offset": 0}), "invalid_path"),
        (("workspaceFiles.readDirectory", {"dirPath": "dir", "limit": 1.5}), "invalid_path"),
        (("workspaceFiles.readText", {"filePath": "missing.txt"}), "not_found"),
        (("workspaceFiles.removeFile", {"filePath": "missing.txt"}), "not_found"),
        (("workspaceFiles.readDirectory", {"dirPath": "missing"}), "not_found"),
        (("workspaceFiles.readText", {"filePath": "dir"}), "not_file"),
        (("workspaceFiles.readText", {"filePath": "ten.txt/inner"}), "not_file"),
        (("workspaceFiles.writeText", {"filePath": "dir", "content": "x"}), "not_file"),
        (("workspaceFiles.removeFile", {"filePath": "dir"}), "not_file"),
        (("workspaceFiles.readDirectory", {"dirPath": "ten.txt"}), "not_file"),
        (("workspaceFiles.readText", {"filePath": "big.txt"}), "too_large"),
        (("workspaceFiles.readText", {"filePath": "big.txt", "maxBytes": 10**9}), "too_large"),
        (("workspaceFiles.readText", {"filePath": "ten.txt", "maxBytes": 9}), "max_bytes_exceeded"),
        (("workspaceFiles.readText", {"filePath": "ten.txt", "maxBytes": 0}), "max_bytes_exceeded"),
        (
            ("workspaceFiles.readText", {"filePath": "ten.txt", "maxBytes": 2.5}),
            "max_bytes_exceeded",
        ),
        (("workspaceFiles.readText", {"filePath": "latin1.txt"}), "invalid_utf8"),
        # Failures the OS reports without a contract code of their own.
        (("workspaceFiles.readText", {"filePath": "n" * 300}), "io"),
        (("workspaceFiles.writeText", {"filePath": "d/" * 2100, "content": "x"}), "io"),
    ]
    results = steps(
        runner,
        scope,
        *(case for case, _ in cases),
        ("workspaceFiles.readText", {"filePath": "max.txt"}),
    )
    *failures, at_limit = results
    assert without_name(failures) == [file_failure(code) for _, code in cases]
    assert at_limit["ok"] is True and at_limit["value"]["byteLength"] == MAX_FILE_READ_BYTES
    assert not (workspace.parent / "escape.txt").exists()
    assert_no_host_path(results, workspace)


def test_numbers_javascript_cannot_send_as_json_keep_their_file_codes(
    runner: PluginRunner, scope: CallScope, workspace: Path
) -> None:
    # NaN and Infinity are numbers to a plugin: the contract's codes for a bad
    # `maxBytes` / `offset` / `limit` apply to them too, not a PluginError.
    (workspace / "ten.txt").write_text("0123456789")
    source = probe_source(
        """
return [
  await probe(() => files.readText({ filePath: 'ten.txt', maxBytes: NaN, signal: ctx.signal })),
  await probe(() => files.readText({ filePath: 'ten.txt', maxBytes: Infinity,
                                     signal: ctx.signal })),
  await probe(() => files.readDirectory({ dirPath: '.', offset: NaN, signal: ctx.signal })),
  await probe(() => files.readDirectory({ dirPath: '.', limit: Infinity, signal: ctx.signal })),
];
"""
    )
    assert without_name(value_of(call(runner, source, scope))) == [
        file_failure("max_bytes_exceeded"),
        file_failure("max_bytes_exceeded"),
        file_failure("invalid_path"),
        file_failure("invalid_path"),
    ]


def test_a_link_to_outside_the_workspace_is_never_followed(
    runner: PluginRunner, scope: CallScope, workspace: Path, outside: Path
) -> None:
    secret = outside / "secret.txt"
    (workspace / "leak.txt").symlink_to(secret)  # absolute host path
    (workspace / "climb.txt").symlink_to("../outside/secret.txt")  # relative, climbs out
    (workspace / "leakdir").symlink_to(outside)
    results = steps(
        runner,
        scope,
        ("workspaceFiles.readText", {"filePath": "leak.txt"}),
        ("workspaceFiles.readText", {"filePath": "climb.txt"}),
        ("workspaceFiles.readText", {"filePath": "leakdir/secret.txt"}),
        ("workspaceFiles.writeText", {"filePath": "leak.txt", "content": "pwned"}),
        ("workspaceFiles.writeText", {"filePath": "climb.txt", "content": "pwned"}),
        ("workspaceFiles.writeText", {"filePath": "leakdir/secret.txt", "content": "pwned"}),
        ("workspaceFiles.writeText", {"filePath": "leakdir/new.txt", "content": "pwned"}),
        ("workspaceFiles.removeFile", {"filePath": "leakdir/secret.txt"}),
        ("workspaceFiles.readDirectory", {"dirPath": "leakdir"}),
        ("workspaceFiles.resolvePath", {"filePath": "leak.txt"}),
        ("workspaceFiles.readDirectory", {"dirPath": "."}),
        # Removing a link removes the link, never its target.
        ("workspaceFiles.removeFile", {"filePath": "leak.txt"}),
    )
    assert without_name(results) == [
        *[file_failure("invalid_path")] * 10,
        ok(
            {
                "dirPath": ".",
                "entries": [
                    {"name": "climb.txt", "kind": "other"},
                    {"name": "leak.txt", "kind": "other"},
                    {"name": "leakdir", "kind": "other"},
                ],
                "offset": 1,
                "totalEntries": 3,
                "truncated": False,
            }
        ),
        ok({"filePath": "leak.txt"}),
    ]
    assert secret.read_text() == "outside secret\n"
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]
    assert not (workspace / "leak.txt").is_symlink()
    assert (workspace / "climb.txt").is_symlink()
    assert_no_host_path(results, workspace, outside)


def test_without_workspace_files_every_method_is_a_plugin_error(
    host_config: Callable[..., HostConfig], https_server: LoopbackServer
) -> None:
    config = host_config(CapabilityPolicy(workspace_files=False))
    source = probe_source(
        """
const s = ctx.signal;
return [
  await probe(() => files.resolvePath({ filePath: 'a.txt' })),
  await probe(() => files.readText({ filePath: 'a.txt', signal: s })),
  await probe(() => files.writeText({ filePath: 'a.txt', content: 'x', signal: s })),
  await probe(() => files.removeFile({ filePath: 'a.txt', signal: s })),
  await probe(() => files.readDirectory({ dirPath: '.', signal: s })),
];
"""
    )

    async def scenario(session: Session) -> tuple[ToolResult, list[str]]:
        (session.workspace / "a.txt").write_text("kept")
        result = await session.call_tool("t", {})
        return result, sorted(p.name for p in session.workspace.iterdir())

    result, listing = in_session(config, https_server, source, scenario)
    assert without_name(value_of(result)) == [no_capability("workspaceFiles")] * 5
    assert listing == ["a.txt"]


def test_the_guest_never_sees_the_session_workspace_path(
    host_config: Callable[..., HostConfig], https_server: LoopbackServer
) -> None:
    # Everything a plugin can learn about where it is, through every capability.
    source = probe_source(
        """
const s = ctx.signal;
return {
  workdir: ctx.workdir,
  resolved: await probe(() => files.resolvePath({ filePath: 'x/../a.txt', cwd: ctx.workdir })),
  link: await probe(() => files.resolvePath({ filePath: 'self/a.txt' })),
  written: await probe(() => files.writeText({ filePath: 'a.txt', content: 'a', signal: s })),
  read: await probe(() => files.readText({ filePath: 'self/a.txt', signal: s })),
  listed: await probe(() => files.readDirectory({ dirPath: '/workspace', signal: s })),
  missing: await probe(() => files.readText({ filePath: 'nope/none.txt', signal: s })),
  shell: await probe(() => shell.execute({ command: 'pwd; pwd -P; echo "$HOME"; ls -a; env',
                                           signal: s })),
  badCwd: await probe(() => shell.execute({ command: 'true', cwd: 'nowhere', signal: s })),
};
"""
    )

    async def scenario(session: Session) -> tuple[ToolResult, Path]:
        os.symlink(str(session.workspace), session.workspace / "self")
        return await session.call_tool("t", {}), session.workspace

    result, workspace = in_session(host_config(), https_server, source, scenario)
    value = value_of(result)
    assert value["workdir"] == "."
    assert value["resolved"] == ok({"canonicalPath": "/workspace/a.txt", "resource": "a.txt"})
    # A link naming the host path of the workspace is outside `/workspace` to the guest.
    assert without_name([value["link"], value["read"]]) == [file_failure("invalid_path")] * 2
    assert value["shell"]["value"]["output"].splitlines()[:3] == ["/workspace"] * 3
    assert without_name([value["badCwd"]]) == [shell_failure("spawn_failed")]
    assert_no_host_path(value, workspace)


# ==== workspaceShell ==================================================================


def test_execute_from_a_tool_writes_into_the_session_workspace(
    host_config: Callable[..., HostConfig], https_server: LoopbackServer
) -> None:
    source = probe_source(
        """
const s = ctx.signal;
return [
  await probe(() => shell.execute({
    command: 'echo out; echo err >&2; printf made > made.txt; mkdir -p sub; exit 3',
    signal: s,
  })),
  await probe(() => shell.execute({ command: 'pwd; cat ../made.txt', cwd: 'sub', signal: s })),
  await probe(() => shell.execute({ command: 'pwd', cwd: '/workspace/sub', timeoutMs: 5000,
                                    signal: s })),
];
"""
    )

    async def scenario(session: Session) -> tuple[ToolResult, Path]:
        return await session.call_tool("t", {}), session.workspace

    result, workspace = in_session(host_config(), https_server, source, scenario)
    done = {"signal": None, "timedOut": False, "truncated": False}
    assert value_of(result) == [
        ok({"output": "out\nerr\n", "exitCode": 3, **done}),
        ok({"output": "/workspace/sub\nmade", "exitCode": 0, **done}),
        ok({"output": "/workspace/sub\n", "exitCode": 0, **done}),
    ]
    assert (workspace / "made.txt").read_text() == "made"
    assert (workspace / "sub").is_dir()


def test_on_output_updates_arrive_in_the_guest(
    runner: PluginRunner, scope: CallScope, workspace: Path
) -> None:
    source = probe_source(
        """
const updates = [];
const result = await shell.execute({
  command: 'echo one; sleep 0.3; echo two',
  signal: ctx.signal,
  // Awaited by the host: a callback may itself wait, even on another capability.
  onOutput: async (update) => {
    updates.push(update);
    await files.writeText({ filePath: 'progress.txt', content: update.preview,
                            signal: ctx.signal });
  },
});
// The contract's suggestion: forward updates to the tool context's reportActivity.
const forwarded = await shell.execute({
  command: 'echo forwarded', signal: ctx.signal, onOutput: ctx.reportActivity,
});
return { result, updates, forwarded: forwarded.output };
"""
    )
    value = value_of(call(runner, source, scope))
    assert value["result"] == {
        "output": "one\ntwo\n",
        "exitCode": 0,
        "signal": None,
        "timedOut": False,
        "truncated": False,
    }
    assert value["updates"] == [
        {"preview": "one\n", "observedBytes": 4, "truncated": False},
        {"preview": "one\ntwo\n", "observedBytes": 8, "truncated": False},
        # The final update when the command ends.
        {"preview": "one\ntwo\n", "observedBytes": 8, "truncated": False},
    ]
    assert value["forwarded"] == "forwarded\n"
    assert (workspace / "progress.txt").read_text() == "one\ntwo\n"


def test_concurrent_commands_each_get_their_own_updates(
    runner: PluginRunner, scope: CallScope
) -> None:
    source = probe_source(
        """
const seen = { a: [], b: [] };
const run = (name) => shell.execute({
  command: `echo ${name}1; sleep 0.2; echo ${name}2`,
  signal: ctx.signal,
  onOutput: (update) => { seen[name].push(update.preview); },
});
const [a, b] = await Promise.all([run('a'), run('b')]);
return { a: a.output, b: b.output, seen };
"""
    )
    value = value_of(call(runner, source, scope))
    assert (value["a"], value["b"]) == ("a1\na2\n", "b1\nb2\n")
    assert value["seen"] == {
        "a": ["a1\n", "a1\na2\n", "a1\na2\n"],
        "b": ["b1\n", "b1\nb2\n", "b1\nb2\n"],
    }


def test_a_throwing_on_output_is_spawn_failed(
    runner: PluginRunner, scope: CallScope, workspace: Path
) -> None:
    source = probe_source(
        """
let calls = 0;
const thrown = await probe(() => shell.execute({
  command: 'echo first; sleep 0.3; echo second > second.txt',
  signal: ctx.signal,
  onOutput: () => { calls += 1; throw new Error('no thanks'); },
}));
const rejected = await probe(() => shell.execute({
  command: 'true',
  signal: ctx.signal,
  onOutput: async () => { throw new Error('not now'); },
}));
return { thrown, rejected, calls };
"""
    )
    value = value_of(call(runner, source, scope))
    assert without_name([value["thrown"], value["rejected"]]) == [shell_failure("spawn_failed")] * 2
    assert value["calls"] == 1
    assert not (workspace / "second.txt").exists()  # the command was stopped


def test_invalid_commands_and_timeouts(
    runner: PluginRunner, scope: CallScope, workspace: Path, outside: Path
) -> None:
    (workspace / "system").symlink_to("/usr")
    (workspace / "escape").symlink_to(outside)
    execute = "workspaceShell.execute"
    results = steps(
        runner,
        scope,
        (execute, {"command": ""}),
        (execute, {"command": "echo a\0b"}),
        (execute, {"command": ["echo", "hi"]}),
        (execute, {"command": "true", "cwd": "../outside"}),
        (execute, {"command": "true", "cwd": "/etc"}),
        (execute, {"command": "touch planted", "cwd": "system"}),
        # A link to a host path dangles inside the sandbox: no such directory there.
        (execute, {"command": "touch planted", "cwd": "escape"}),
        (execute, {"command": "true", "timeoutMs": 0}),
        (execute, {"command": "true", "timeoutMs": -5}),
        (execute, {"command": "true", "timeoutMs": MAX_SHELL_TIMEOUT_MS + 1}),
        (execute, {"command": "true", "timeoutMs": "100"}),
        (execute, {"command": "true", "timeoutMs": MAX_SHELL_TIMEOUT_MS}),
    )
    assert without_name(results) == [
        *[shell_failure("invalid_command")] * 6,
        shell_failure("spawn_failed"),
        *[shell_failure("invalid_timeout")] * 4,
        ok({"output": "", "exitCode": 0, "signal": None, "timedOut": False, "truncated": False}),
    ]
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]


def test_non_finite_timeouts_are_invalid_timeout(runner: PluginRunner, scope: CallScope) -> None:
    # The contract: "`timeoutMs` is not a finite number greater than 0 ..." is
    # `invalid_timeout`, whatever JSON could carry.
    source = probe_source(
        """
return [
  await probe(() => shell.execute({ command: 'true', timeoutMs: NaN, signal: ctx.signal })),
  await probe(() => shell.execute({ command: 'true', timeoutMs: Infinity, signal: ctx.signal })),
  await probe(() => web.fetchText({ url: 'https://example.com/', format: 'text',
                                    timeoutMs: NaN, signal: ctx.signal })),
  await probe(() => web.fetchText({ url: 'https://example.com/', format: 'text',
                                    timeoutMs: Infinity, signal: ctx.signal })),
];
"""
    )
    assert without_name(value_of(call(runner, source, scope))) == [
        shell_failure("invalid_timeout"),
        shell_failure("invalid_timeout"),
        web_failure("invalid_timeout"),
        web_failure("invalid_timeout"),
    ]


def test_a_command_past_its_timeout_resolves_timed_out(
    runner: PluginRunner, scope: CallScope, workspace: Path
) -> None:
    results = steps(
        runner,
        scope,
        (
            "workspaceShell.execute",
            {"command": "echo started; sleep 5; touch late", "timeoutMs": 300},
        ),
    )
    assert results == [
        ok(
            {
                "output": "started\n",
                "exitCode": None,
                "signal": None,
                "timedOut": True,
                "truncated": False,
            }
        )
    ]
    assert not (workspace / "late").exists()


def test_large_output_is_truncated_with_an_artifact_in_the_workspace(
    runner: PluginRunner, scope: CallScope, workspace: Path
) -> None:
    total = MAX_SHELL_OUTPUT_BYTES + 8_800
    source = probe_source(
        f"""
let last = null;
const result = await shell.execute({{
  command: "head -c {total - 4} /dev/zero | tr '\\\\0' a; printf tail",
  signal: ctx.signal,
  onOutput: (update) => {{ last = update; }},
}});
return {{
  outputLength: result.output.length,
  outputEnd: result.output.slice(-6),
  truncated: result.truncated,
  exitCode: result.exitCode,
  artifact: result.artifact,
  last: {{ ...last, preview: last.preview.length }},
}};
"""
    )
    value = value_of(call(runner, source, scope))
    artifact = value["artifact"]
    assert artifact == {
        "id": artifact["id"],
        "path": f".ze-harness/tool-output/{artifact['id']}.log",
        "observedBytes": total,
        "state": "complete",
    }
    assert value == {
        "outputLength": MAX_SHELL_OUTPUT_BYTES,
        "outputEnd": "aatail",
        "truncated": True,
        "exitCode": 0,
        "artifact": artifact,
        "last": {
            "preview": MAX_SHELL_OUTPUT_BYTES,
            "observedBytes": total,
            "truncated": True,
            "artifact": artifact,
        },
    }
    assert (workspace / artifact["path"]).read_bytes() == b"a" * (total - 4) + b"tail"


def test_a_disabled_shell_is_a_plugin_error(runner: PluginRunner, workspace: Path) -> None:
    scope = CallScope.for_workspace(workspace, CapabilityPolicy(shell=ShellPolicy(enabled=False)))
    results = steps(runner, scope, ("workspaceShell.execute", {"command": "touch x"}))
    assert without_name(results) == [no_capability("workspaceShell")]
    assert list(workspace.iterdir()) == []


# ==== webFetch ========================================================================


def test_fetch_text_returns_content_type_and_byte_length(
    runner: PluginRunner, net_scope: CallScope, https_server: LoopbackServer
) -> None:
    https_server.serve("/page", "héllo, wörld\n".encode(), content_type=TEXT)
    https_server.serve("/bare", b"{}", content_type=None)
    results = steps(
        runner,
        net_scope,
        ("webFetch.fetchText", {"url": https_server.url("/page"), "format": "markdown"}),
        (
            "webFetch.fetchText",
            {
                "url": https_server.url("/bare"),
                "format": "html",
                "timeoutMs": MAX_WEB_FETCH_TIMEOUT_MS,
            },
        ),
    )
    assert results == [
        ok({"content": "héllo, wörld\n", "contentType": TEXT, "byteLength": 15}),
        ok({"content": "{}", "contentType": "", "byteLength": 2}),
    ]
    first = https_server.received[0]
    assert first.method == "GET"
    assert (first.header("Accept") or "").startswith("text/markdown")


def test_every_web_fetch_error_code_as_the_guest_sees_it(
    runner: PluginRunner, net_scope: CallScope, https_server: LoopbackServer
) -> None:
    https_server.serve("/gone", b"no", status=404, content_type=TEXT)
    https_server.serve("/broken", b"oops", status=500, content_type=TEXT)
    https_server.serve("/huge", b"x" * (MAX_WEB_FETCH_RESPONSE_BYTES + 1), content_type=TEXT)
    https_server.serve("/image", b"\x89PNG\r\n", content_type="image/png")
    https_server.serve("/latin1", b"caf\xe9", content_type=TEXT)
    https_server.serve_slow("/slow", [b"a", b"b"], 1.0, content_type=TEXT)
    url = https_server.url

    def fetch(path: str, **extra: Any) -> tuple[str, dict[str, Any]]:
        return ("webFetch.fetchText", {"url": url(path), "format": "text", **extra})

    cases = [
        (fetch("/gone"), "http_status"),
        (fetch("/broken"), "http_status"),
        (fetch("/huge"), "too_large"),
        (fetch("/image"), "unsupported_content_type"),
        (fetch("/latin1"), "invalid_utf8"),
        (fetch("/slow", timeoutMs=200), "timed_out"),
        (("webFetch.fetchText", {"url": "ftp://127.0.0.1/x", "format": "text"}), "invalid_url"),
        (("webFetch.fetchText", {"url": "not a url", "format": "text"}), "invalid_url"),
        (
            (
                "webFetch.fetchText",
                {"url": url("/gone").replace("://", "://u:p@"), "format": "text"},
            ),
            "invalid_url",
        ),
        (fetch("/gone", timeoutMs=0), "invalid_timeout"),
        (fetch("/gone", timeoutMs=MAX_WEB_FETCH_TIMEOUT_MS + 1), "invalid_timeout"),
        (fetch("/gone", timeoutMs=1.5), "invalid_timeout"),
    ]
    results = steps(runner, net_scope, *(case for case, _ in cases))
    assert without_name(results) == [web_failure(code) for _, code in cases]
    # Refused before any request: invalid URLs and timeouts never reach the server.
    assert sorted(https_server.requests) == sorted(
        ["/gone", "/broken", "/huge", "/image", "/latin1", "/slow"]
    )


def test_the_default_policy_refuses_loopback_before_connecting(
    runner: PluginRunner,
    scope: CallScope,
    https_server: LoopbackServer,
    http_server: LoopbackServer,
) -> None:
    https_server.serve("/page", b"hi", content_type=TEXT)
    http_server.serve("/page", b"hi", content_type=TEXT)
    results = steps(
        runner,
        scope,
        ("webFetch.fetchText", {"url": https_server.url("/page"), "format": "text"}),
        ("webFetch.fetchText", {"url": http_server.url("/page"), "format": "text"}),
        (
            "webFetch.fetchText",
            {"url": f"http://localhost:{http_server.port}/page", "format": "text"},
        ),
    )
    assert without_name(results) == [web_failure("request_failed")] * 3
    assert https_server.requests == []
    assert http_server.requests == []


# ==== plain fetch =====================================================================


def test_fetch_json_and_context_fetch(
    runner: PluginRunner, net_scope: CallScope, https_server: LoopbackServer
) -> None:
    https_server.serve(
        "/data.json", b'{"answer": 42, "list": [1, "two"]}', content_type="application/json"
    )
    https_server.redirect("/moved", https_server.url("/data.json"))
    source = probe_source(
        """
const global = await (await fetch(input.url)).json();
const viaContext = await (await context.fetch(input.url)).json();
const moved = await fetch(input.moved);
return {
  global,
  viaContext,
  same: context.fetch === fetch,
  moved: { redirected: moved.redirected, url: moved.url, body: await moved.json() },
};
"""
    )
    tool_input = {"url": https_server.url("/data.json"), "moved": https_server.url("/moved")}
    value = value_of(call(runner, source, net_scope, tool_input))
    expected = {"answer": 42, "list": [1, "two"]}
    assert value == {
        "global": expected,
        "viaContext": expected,
        "same": True,
        "moved": {"redirected": True, "url": https_server.url("/data.json"), "body": expected},
    }
    assert https_server.requests == ["/data.json", "/data.json", "/moved", "/data.json"]


def test_fetch_post_with_body_and_headers(
    runner: PluginRunner, net_scope: CallScope, https_server: LoopbackServer
) -> None:
    https_server.serve(
        "/echo", "créé".encode(), status=201, content_type=TEXT, headers={"X-Reply": "yes"}
    )
    https_server.serve("/missing", b"nope", status=404, content_type=TEXT)
    source = probe_source(
        """
const response = await fetch(input.url + '/echo', {
  method: 'post',
  headers: { 'X-Probe': 'hello', 'Content-Type': 'application/json' },
  body: JSON.stringify({ note: 'héllo' }),
});
const request = new Request(input.url + '/echo', {
  method: 'PUT', headers: new Headers([['x-bytes', '3']]), body: new Uint8Array([0, 255, 7]),
});
const put = await context.fetch(request);
const missing = await fetch(input.url + '/missing');
return {
  status: response.status,
  statusText: response.statusText,
  ok: response.ok,
  reply: response.headers.get('x-reply'),
  contentType: response.headers.get('Content-Type'),
  text: await response.text(),
  put: put.status,
  missing: { status: missing.status, ok: missing.ok, text: await missing.text() },
};
"""
    )
    value = value_of(call(runner, source, net_scope, {"url": https_server.base_url}))
    assert value == {
        "status": 201,
        "statusText": "Created",
        "ok": True,
        "reply": "yes",
        "contentType": TEXT,
        "text": "créé",
        "put": 201,
        "missing": {"status": 404, "ok": False, "text": "nope"},
    }
    post, put, _ = https_server.received
    assert (post.method, post.target) == ("POST", "/echo")
    assert post.header("X-Probe") == "hello"
    assert post.header("Content-Type") == "application/json"
    assert json.loads(post.body) == {"note": "héllo"}
    assert (put.method, put.header("X-Bytes"), put.body) == ("PUT", "3", b"\x00\xff\x07")


def test_fetch_refused_by_the_default_policy_is_a_safe_type_error(
    runner: PluginRunner, scope: CallScope, https_server: LoopbackServer, workspace: Path
) -> None:
    https_server.serve("/data.json", b"{}", content_type="application/json")
    source = probe_source(
        """
return [
  await probe(() => fetch(input.url)),
  await probe(() => context.fetch(input.url, { method: 'POST', body: 'x' })),
  await probe(() => fetch('ftp://127.0.0.1/')),
];
"""
    )
    value = value_of(call(runner, source, scope, {"url": https_server.url("/data.json")}))
    refused = "fetch failed: the host could not be resolved or is not allowed"
    assert value == [
        {"ok": False, "tag": None, "code": None, "name": "TypeError", "message": refused},
        {"ok": False, "tag": None, "code": None, "name": "TypeError", "message": refused},
        {
            "ok": False,
            "tag": None,
            "code": None,
            "name": "TypeError",
            "message": "fetch failed: URL must use http or https",
        },
    ]
    assert https_server.requests == []
    assert_no_host_path(value, workspace)


# ==== the call scope ==================================================================


def test_a_timer_that_outlives_its_call_never_reaches_the_workspace(
    runner: PluginRunner, scope: CallScope, workspace: Path
) -> None:
    source = probe_source(
        """
setTimeout(() => files.writeText({ filePath: 'timer.txt', content: 'late', signal: ctx.signal }),
           0);
setInterval(() => files.writeText({ filePath: 'interval.txt', content: 'late',
                                    signal: ctx.signal }), 1);
return 'returned';
"""
    )

    async def scenario() -> ToolResult:
        result = await run_tool(runner, source, scope)
        await asyncio.sleep(0.2)
        return result

    assert run(scenario()) == ToolResult(value="returned")
    assert list(workspace.iterdir()) == []


def test_a_microtask_chain_after_the_call_settles_is_refused_and_logged(
    runner: PluginRunner,
    scope: CallScope,
    workspace: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    source = probe_source(
        """
let chain = Promise.resolve();
for (let i = 0; i < 50; i++) chain = chain.then(() => undefined);
chain
  .then(() => files.writeText({ filePath: 'late.txt', content: 'late', signal: ctx.signal }))
  .catch(() => files.removeFile({ filePath: 'keep.txt', signal: ctx.signal }))
  .catch(() => undefined);
return 'returned';
"""
    )
    (workspace / "keep.txt").write_text("kept")
    with caplog.at_level(logging.WARNING, logger="worker_host.plugin"):
        assert call(runner, source, scope) == ToolResult(value="returned")
    assert sorted(p.name for p in workspace.iterdir()) == ["keep.txt"]
    messages = [r.getMessage() for r in caplog.records if r.name == "worker_host.plugin"]
    assert messages == [
        "[example.x] used workspaceFiles.writeText after its call returned; refused",
        "[example.x] used workspaceFiles.removeFile after its call returned; refused",
    ]


def test_the_guest_sees_a_late_use_refused_with_a_plugin_error(
    runner: PluginRunner, scope: CallScope, workspace: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # Setup and execute share one isolate: a chain setup leaves behind runs after
    # setup's call settled, is refused, and execute can report what it saw.
    source = probe_source(
        "return refused;",
        prefix="let refused = null;",
        setup_body="""
let chain = Promise.resolve();
for (let i = 0; i < 50; i++) chain = chain.then(() => undefined);
chain.then(async () => {
  refused = await probe(() => context.workspaceFiles.writeText({
    filePath: 'between.txt', content: 'late', signal: new AbortController().signal,
  }));
});
""",
    )
    with caplog.at_level(logging.WARNING, logger="worker_host.plugin"):
        result = call(runner, source, scope)
    assert without_name([value_of(result)]) == [
        plugin_error("workspaceFiles.writeText was used after the host's call returned.")
    ]
    assert list(workspace.iterdir()) == []
    late = "[example.x] used workspaceFiles.writeText after its call returned; refused"
    # Once when the plugin was activated, once when its tool was called.
    assert [r.getMessage() for r in caplog.records if r.name == "worker_host.plugin"] == [
        late,
        late,
    ]


def test_setup_reads_the_workspace_to_decide_its_description(
    host_config: Callable[..., HostConfig], https_server: LoopbackServer
) -> None:
    source = plugin_source(
        """
const { content } = await context.workspaceFiles.readText({
  filePath: 'description.txt', signal: new AbortController().signal,
});
context.tools.register({
  id: 't', description: content, inputSchema: { type: 'object' }, execute: async () => 'called',
});
"""
    )

    async def scenario(session: Session) -> tuple[str, ToolResult, ToolResult]:
        (tool,) = session.tools()
        first = await session.call_tool("t", {})
        # Setup runs again for every call: a changed file changes what it registers.
        (session.workspace / "description.txt").write_text("Something else.")
        second = await session.call_tool("t", {})
        return tool.description, first, second

    description, first, second = in_session(
        host_config(),
        https_server,
        source,
        scenario,
        before=lambda workspace: (workspace / "description.txt").write_text("From the workspace."),
    )
    assert description == "From the workspace."
    assert first == ToolResult(value="called")
    assert second.code == "setup_nondeterministic"


def test_permissions_resolve_and_execute_writes_the_authorized_path(
    runner: PluginRunner, scope: CallScope, workspace: Path
) -> None:
    (workspace / "sub").mkdir()
    source = probe_source(
        """
const filePath = ctx.permissions[0].metadata.canonicalPath;
const written = await files.writeText({ filePath, content: input.body, signal: ctx.signal });
return { permissions: ctx.permissions, written };
""",
        permissions_body="""
const target = await context.workspaceFiles.resolvePath({
  filePath: `notes/${input.name}.md`, cwd: ctx.workdir,
});
const listing = await context.workspaceFiles.readDirectory({ dirPath: ctx.workdir,
                                                              signal: ctx.signal });
return [{
  action: 'edit',
  resources: [target.resource],
  save: ['*'],
  metadata: { canonicalPath: target.canonicalPath, seen: listing.totalEntries },
}];
""",
    )
    in_sub = dataclasses.replace(CONTEXT, workdir="sub")
    result = run(
        run_tool(runner, source, scope, {"name": "plan", "body": "# Plan\n"}, context=in_sub)
    )
    assert value_of(result) == {
        "permissions": [
            {
                "action": "edit",
                "resources": ["notes/plan.md"],
                "save": ["*"],
                "metadata": {"canonicalPath": "/workspace/sub/notes/plan.md", "seen": 0},
            }
        ],
        "written": {"filePath": "/workspace/sub/notes/plan.md", "byteLength": 7},
    }
    assert (workspace / "sub" / "notes" / "plan.md").read_text() == "# Plan\n"


def test_a_signal_passed_by_the_plugin_is_ignored(
    runner: PluginRunner, scope: CallScope, workspace: Path
) -> None:
    (workspace / "a.txt").write_text("still read")
    source = probe_source(
        """
const aborted = AbortSignal.abort(new Error('stop'));
const controller = new AbortController();
controller.abort();
return [
  await probe(() => files.readText({ filePath: 'a.txt', signal: aborted })),
  await probe(() => files.writeText({ filePath: 'b.txt', content: 'written',
                                      signal: controller.signal })),
  await probe(() => shell.execute({ command: 'cat b.txt', signal: aborted })),
  await probe(() => files.removeFile({ filePath: 'b.txt', signal: aborted })),
];
"""
    )
    assert value_of(call(runner, source, scope)) == [
        ok({"filePath": "a.txt", "content": "still read", "byteLength": 10}),
        ok({"filePath": "b.txt", "byteLength": 7}),
        ok(
            {
                "output": "written",
                "exitCode": 0,
                "signal": None,
                "timedOut": False,
                "truncated": False,
            }
        ),
        ok({"filePath": "b.txt"}),
    ]


@pytest.fixture
def tight_runner(runtime: GuestRuntime) -> PluginRunner:
    return PluginRunner(runtime, IsolateLimits(cpu_time_ms=300, wall_time_ms=600))


def test_a_tool_that_keeps_waiting_on_capabilities_runs_out_of_wall_time(
    tight_runner: PluginRunner, net_scope: CallScope, https_server: LoopbackServer
) -> None:
    https_server.serve_slow("/slow", [b"a", b"b"], 5.0, content_type=TEXT)
    timers = probe_source("while (true) await new Promise((r) => setTimeout(r, 100));")
    slow_fetch = probe_source(
        "return await web.fetchText({ url: input.url, format: 'text', timeoutMs: 60000,"
        " signal: ctx.signal });"
    )
    slow_shell = probe_source(
        "return await shell.execute({ command: 'sleep 5', signal: ctx.signal });"
    )
    assert call(tight_runner, timers, net_scope) == failed(TIMED_OUT)
    assert call(tight_runner, slow_fetch, net_scope, {"url": https_server.url("/slow")}) == failed(
        TIMED_OUT
    )
    assert call(tight_runner, slow_shell, net_scope) == failed(TIMED_OUT)


def test_the_wall_time_budget_covers_setup_and_execute_together(
    tight_runner: PluginRunner, scope: CallScope
) -> None:
    # Setup waits 300 ms on every run; execute waits `input.ms`. Each part alone
    # fits in 600 ms; only their sum can run out of it.
    source = probe_source(
        "await new Promise((r) => setTimeout(r, input.ms)); return input.ms;",
        setup_body="await new Promise((r) => setTimeout(r, 300));",
    )

    async def scenario() -> list[ToolResult]:
        code = plugin_code(source)
        manifest = await tight_runner.activate(code, scope)
        tool = manifest.tool("t")
        assert tool is not None
        return [
            await call_tool(
                tight_runner, code, manifest.fingerprint, tool, {"ms": ms}, CONTEXT, scope
            )
            for ms in (50, 400)
        ]

    assert run(scenario()) == [ToolResult(value=50), failed(TIMED_OUT)]


def test_a_command_cut_off_or_abandoned_does_not_outlive_the_call(
    tight_runner: PluginRunner, scope: CallScope, workspace: Path
) -> None:
    cut_off = probe_source(
        "return await shell.execute({ command: 'sleep 0.8; echo late > cut.txt',"
        " signal: ctx.signal });"
    )
    # The tool returns while its command still runs.
    abandoned = probe_source(
        """
const command = shell.execute({ command: 'sleep 0.8; echo late > abandoned.txt',
                                signal: ctx.signal });
return await Promise.race([command, new Promise((r) => setTimeout(() => r('early'), 100))]);
"""
    )

    async def scenario() -> list[ToolResult]:
        results = [
            await run_tool(tight_runner, cut_off, scope),
            await run_tool(tight_runner, abandoned, scope),
        ]
        await asyncio.sleep(1.2)
        return results

    assert run(scenario()) == [failed(TIMED_OUT), ToolResult(value="early")]
    assert list(workspace.iterdir()) == []


def test_setup_failing_on_a_capability_fails_activation_safely(
    runner: PluginRunner, scope: CallScope
) -> None:
    # An uncaught capability failure in setup is a setup failure with no detail.
    source = probe_source(
        "return null;",
        setup_body="await context.workspaceFiles.readText({ filePath: 'missing.txt' });",
    )
    with pytest.raises(WorkerHostError) as caught:
        run(runner.activate(plugin_code(source), scope))
    assert (caught.value.code, caught.value.message) == (
        "setup_failed",
        "Plugin example.x failed to set up.",
    )
