"""The call scope: host capabilities as a guest sees them during one call.

A `CallScope` performs what the guest asks while the host is calling it
(setup, a tool's `permissions` or `execute`, a hook) and nothing after: the
guest refuses requests once its call has settled, and the host discards the
isolate. Failures reach the guest only as the contract's tagged errors with
safe codes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Protocol

from capabilities import (
    CapabilityError,
    FetchFailed,
    NetworkPolicy,
    PlainFetch,
    ShellDisabled,
    ShellPolicy,
    WebFetch,
    WorkspaceFiles,
    WorkspaceShell,
)

from ._calls import QUESTION_DISMISSED, Deliver, GuestFailure, no_capability, timer_seconds
from ._isolate import HostRequest


@dataclass(frozen=True)
class CapabilityPolicy:
    """What an operator lets plugins reach. Defaults are the safe ones.

    - `network`: targets of `webFetch` and `fetch`. By default loopback,
      private, link-local (cloud metadata included) and other non-public
      addresses are refused, on every redirect hop, against DNS rebinding.
    - `shell`: the sandboxed shell; `ShellPolicy(enabled=False)` turns it off,
      and `execute` then throws a `PluginError` in the guest.
    - `workspace_files`: False removes `workspaceFiles` (every method throws a
      `PluginError`).
    """

    network: NetworkPolicy = NetworkPolicy()
    shell: ShellPolicy = ShellPolicy()
    workspace_files: bool = True


@lru_cache(maxsize=16)
def _network_capabilities(policy: NetworkPolicy) -> tuple[WebFetch, PlainFetch]:
    """One WebFetch and PlainFetch per network policy: building them loads the
    TLS trust store (tens of milliseconds), and they keep no per-call state."""
    return WebFetch(policy), PlainFetch(policy)


class FilesCapability(Protocol):
    """`workspaceFiles` as the host implements it: `WorkspaceFiles` on disk, or
    `InMemoryWorkspaceFiles` for tests."""

    async def resolve_path(self, request: Mapping[str, Any]) -> dict[str, Any]: ...
    async def read_text(self, request: Mapping[str, Any]) -> dict[str, Any]: ...
    async def write_text(self, request: Mapping[str, Any]) -> dict[str, Any]: ...
    async def remove_file(self, request: Mapping[str, Any]) -> dict[str, Any]: ...
    async def read_directory(self, request: Mapping[str, Any]) -> dict[str, Any]: ...


class CallScope:
    """Performs one session's guest requests; see the module docstring.

    Each capability is optional: one that is None answers as a host without
    it (a `PluginError` in the guest).
    """

    def __init__(
        self,
        *,
        files: FilesCapability | None = None,
        shell: WorkspaceShell | None = None,
        web: WebFetch | None = None,
        fetch: PlainFetch | None = None,
    ) -> None:
        self._files = files
        self._shell = shell
        self._web = web
        self._fetch = fetch
        self._handlers: Mapping[str, Callable[[Any, Deliver], Awaitable[Any]]] = {
            "timer": self._timer,
            "askQuestion": self._dismiss,
            "reportActivity": self._drop,
            "webFetch.fetchText": self._fetch_text,
            "workspaceShell.execute": self._execute,
            "fetch": self._plain_fetch,
        }

    @classmethod
    def for_workspace(cls, workspace: Path, policy: CapabilityPolicy) -> CallScope:
        """The real capabilities over a session's workspace directory."""
        web, fetch = _network_capabilities(policy.network)
        return cls(
            files=WorkspaceFiles(workspace) if policy.workspace_files else None,
            shell=WorkspaceShell(workspace, policy.shell),
            web=web,
            fetch=fetch,
        )

    async def perform(self, request: HostRequest, deliver: Deliver) -> Any:
        handler = self._handlers.get(request.kind)
        if handler is None:
            handler = self._file_handler(request.kind)
        try:
            return await handler(request.input, deliver)
        except CapabilityError as error:
            raise GuestFailure(error.to_guest()) from error

    def _file_handler(self, kind: str) -> Callable[[Any, Deliver], Awaitable[Any]]:
        methods = {
            "workspaceFiles.resolvePath": "resolve_path",
            "workspaceFiles.readText": "read_text",
            "workspaceFiles.writeText": "write_text",
            "workspaceFiles.removeFile": "remove_file",
            "workspaceFiles.readDirectory": "read_directory",
        }
        if self._files is None or kind not in methods:
            raise no_capability(kind)
        method = getattr(self._files, methods[kind])
        return lambda request, _: method(request)

    @staticmethod
    async def _timer(request: Any, _: Deliver) -> None:
        await asyncio.sleep(timer_seconds(request))

    @staticmethod
    async def _dismiss(request: Any, _: Deliver) -> None:
        raise GuestFailure(QUESTION_DISMISSED)

    @staticmethod
    async def _drop(request: Any, _: Deliver) -> None:
        return None

    async def _fetch_text(self, request: Any, _: Deliver) -> Any:
        if self._web is None:
            raise no_capability("webFetch.fetchText")
        return await self._web.fetch_text(request)

    async def _execute(self, request: Any, deliver: Deliver) -> Any:
        if self._shell is None:
            raise no_capability("workspaceShell.execute")
        try:
            return await self._shell.execute(request, on_output=deliver)
        except ShellDisabled as exc:
            raise no_capability("workspaceShell.execute") from exc

    async def _plain_fetch(self, request: Any, _: Deliver) -> Any:
        if self._fetch is None:
            raise no_capability("fetch")
        try:
            return await self._fetch.fetch(request)
        except FetchFailed as exc:
            raise GuestFailure({"_tag": "FetchFailed", "message": str(exc)}) from exc
