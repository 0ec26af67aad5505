"""Bundles, clients and host set-up shared by the Turn, revision and Turn CLI tests.

Bundles are inline ES modules (see `bundles.plugin_source`) served by the real
loopback HTTPS server and pinned through the embedding API. On top of the
failure classes there, every bundle here gets a few helpers:

- `appendLine(context, line, file?)` appends one line to a workspace file
  (`/workspace/log.txt` by default) through `context.workspaceFiles`, so a
  hook or tool leaves evidence that it ran, and in which order;
- `exists(context, file)` tells whether a workspace file exists;
- `sleep(ms)` awaits a host timer.

Every test gets its own data directory whose compiled-guest cache is a link to
one cache for the whole run, so only the first host of the run compiles the
guest.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar

import pytest

from tests.support.https_server import LoopbackServer
from tests.worker_host.bundles import plugin_source
from worker_host import (
    GuestRuntime,
    Host,
    HostConfig,
    HostPlugin,
    IsolateLimits,
    PermissionAnswer,
    PermissionRule,
    Session,
)

T = TypeVar("T")

LOG = "log.txt"
LIMITS = IsolateLimits(cpu_time_ms=2_000, wall_time_ms=20_000)

HELPERS = """
const LOG = '/workspace/log.txt';
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
async function readOr(context, filePath, fallback) {
  try {
    return (await context.workspaceFiles.readText({ filePath })).content;
  } catch (e) {
    if (e._tag === 'WorkspaceFileError' && e.code === 'not_found') return fallback;
    throw e;
  }
}
async function exists(context, filePath) {
  return (await readOr(context, filePath, null)) !== null;
}
async function appendLine(context, line, filePath = LOG) {
  const text = await readOr(context, filePath, '');
  await context.workspaceFiles.writeText({ filePath, content: text + line + '\\n' });
}
"""


def plugin(plugin_id: str, *parts: str) -> bytes:
    """A bundle for `plugin_id` whose setup runs `parts` (registrations) in order."""
    return plugin_source("\n".join(parts), plugin_id=plugin_id, prefix=HELPERS)


def tool(
    tool_id: str,
    execute: str = "return input;",
    *,
    schema: str = "{ type: 'object' }",
    permissions: str | None = None,
    description: str | None = None,
) -> str:
    """`context.tools.register(...)`; `execute` and `permissions` are bodies of
    `async (input, ctx) => {}`."""
    projector = "" if permissions is None else (
        f"  permissions: async (input, ctx) => {{\n{permissions}\n}},\n")
    return (
        "context.tools.register({\n"
        f"  id: {json.dumps(tool_id)},\n"
        f"  description: {json.dumps(description or f'The {tool_id} tool.')},\n"
        f"  inputSchema: {schema},\n"
        f"{projector}"
        f"  execute: async (input, ctx) => {{\n{execute}\n}},\n"
        "});"
    )


def hook(name: str, body: str) -> str:
    """`context.hooks.register(name, async (input) => { body })`."""
    return f"context.hooks.register({json.dumps(name)}, async (input) => {{\n{body}\n}});"


def logging_hook(name: str, label: str) -> str:
    """A hook that appends `label` to the workspace log and returns nothing."""
    return hook(name, f"await appendLine(context, {json.dumps(label)});")


def agent(agent_id: str, **members: Any) -> str:
    """`context.agents.register(...)` with a display name and description."""
    declaration = {"id": agent_id, "displayName": agent_id.title(),
                   "description": f"The {agent_id} agent.", **members}
    return f"context.agents.register({json.dumps(declaration)});"


def read_log(session: Session, name: str = LOG) -> list[str]:
    """The lines of a workspace log file; [] when nothing was logged."""
    path = session.workspace / name
    return path.read_text().splitlines() if path.exists() else []


def without(events: Iterable[dict[str, Any]], *keys: str) -> list[dict[str, Any]]:
    """`events` without the given (random) members."""
    return [{key: value for key, value in event.items() if key not in keys} for event in events]


def is_uuid(value: Any) -> bool:
    try:
        return isinstance(value, str) and str(uuid.UUID(value)) == value
    except ValueError:
        return False


def guest_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One compiled-guest cache for the whole run, compiled on first use."""
    cache = tmp_path_factory.getbasetemp() / "turn-guest-cache"
    if not any(cache.glob("guest-*.cwasm")):
        GuestRuntime(cache)
    return cache


def data_dir(directory: Path, cache: Path) -> Path:
    """A fresh data directory whose guest cache is the shared one."""
    data = directory / "data"
    data.mkdir(parents=True)
    (data / "cache").symlink_to(cache, target_is_directory=True)
    return data


@dataclass
class Env:
    """One test's data directory, CA and loopback HTTPS server.

    `config()` is the same data directory each time, so a second `Host` built
    from it is another process looking at the same state.
    """

    data: Path
    ca_file: Path
    server: LoopbackServer

    def config(self, **overrides: Any) -> HostConfig:
        return replace(HostConfig(data_dir=self.data, ca_bundle=self.ca_file,
                                  isolate_limits=LIMITS), **overrides)

    def url(self, name: str, source: bytes) -> str:
        """Serves `source` at `/<name>.mjs` and returns its URL."""
        self.server.serve(f"/{name}.mjs", source)
        return self.server.url(f"/{name}.mjs")

    def host_plugin(self, plugin_id: str, source: bytes) -> HostPlugin:
        return HostPlugin(plugin_id, self.url(plugin_id, source))

    async def session(self, host: Host, *plugins: tuple[str, bytes],
                      session_id: str = "s", rules: Sequence[tuple[str, str, str]] = ()) -> Session:
        """Creates a session, appends `rules` and adds `plugins` in order."""
        session = host.session(session_id, create=True)
        for action, resource, effect in rules:
            session.add_rule(action, resource, effect)
        for plugin_id, source in plugins:
            await session.add_plugin(self.url(f"{session_id}-{plugin_id}", source), plugin_id)
        return session


def run(scenario: Callable[[], Awaitable[T]]) -> T:
    """Runs one async scenario to completion, as a sync test does."""
    async def main() -> T:
        return await scenario()

    return asyncio.run(main())


ALLOW = ("*", "*", "allow")
ALLOW_RULE = (PermissionRule("*", "*", "allow"),)


@dataclass
class ScriptedClient:
    """Answers permission requests and questions from scripts, and records them.

    A reply or answer of None means "cannot answer"."""

    replies: list[PermissionAnswer | None] = field(default_factory=list)
    answers: list[list[list[str]] | None] = field(default_factory=list)
    permission_requests: list[dict[str, Any]] = field(default_factory=list)
    question_requests: list[dict[str, Any]] = field(default_factory=list)

    async def permission(self, request: dict[str, Any]) -> PermissionAnswer | None:
        self.permission_requests.append(request)
        return self.replies.pop(0)

    async def question(self, request: dict[str, Any]) -> list[list[str]] | None:
        self.question_requests.append(request)
        return self.answers.pop(0)


class SilentClient:
    """A client that never answers a permission request."""

    def __init__(self) -> None:
        self.asked = 0

    async def permission(self, request: dict[str, Any]) -> PermissionAnswer | None:
        self.asked += 1
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    async def question(self, request: dict[str, Any]) -> list[list[str]] | None:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")
