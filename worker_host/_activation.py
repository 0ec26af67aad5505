"""Activation and invocation of one plugin, each in a fresh isolate.

Activation runs `setup` and validates what it registered into a `Manifest`.
Every invocation runs `setup` again in its own isolate, compares the manifest's
fingerprint with the activation's and only then calls the one function: a
plugin whose registrations changed fails closed and nothing else runs.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import dataclass, field
from typing import Any, Literal

from ._calls import HostOperations, NoCapabilities, drive
from ._errors import WorkerHostError
from ._isolate import GuestAnswer, Isolate
from ._limits import IsolateLimits
from ._manifest import Manifest, RejectedTool, build_manifest, manifest_fingerprint, quoted
from ._runtime import GuestRuntime

log = logging.getLogger("worker_host.activation")

MAX_SETUP_PUBLIC_MESSAGE = 512


@dataclass(frozen=True)
class Activation:
    """Where setup runs, as the guest's `context.activation` shows it."""

    scope: Literal["host", "session"]
    revision_id: str
    revision_version: int
    session_id: str | None = None

    def to_json(self) -> dict[str, Any]:
        value: dict[str, Any] = {
            "scope": self.scope,
            "revision": {"id": self.revision_id, "version": self.revision_version},
        }
        if self.scope == "session":
            value["sessionId"] = self.session_id
        return value


@dataclass(frozen=True)
class PluginCode:
    """A pinned plugin ready to run: its bundle bytes, options and activation."""

    plugin_id: str
    bundle: bytes
    activation: Activation
    options: dict[str, Any] = field(default_factory=dict)


class SetupFailed(WorkerHostError):
    """`setup` threw. `public_message` is the trimmed `publicMessage`, if any."""

    def __init__(self, plugin_id: str, public_message: str | None) -> None:
        suffix = f": {public_message}" if public_message else "."
        super().__init__("setup_failed", f"Plugin {plugin_id} failed to set up{suffix}")
        self.public_message = public_message


def trimmed_public_message(failure: dict[str, Any], limit: int) -> str | None:
    """A `PluginError`'s `publicMessage`, trimmed and cut to `limit`; None if blank."""
    if failure.get("_tag") != "PluginError":
        return None
    message = failure.get("publicMessage")
    if not isinstance(message, str) or not message.strip():
        return None
    return message.strip()[:limit]


class PluginRunner:
    """Runs plugin code in fresh isolates with the given limits.

    `operations` performs what the guest asks of the host during a call
    (timers, capabilities); by default there are timers and no capabilities.
    """

    def __init__(
        self,
        runtime: GuestRuntime,
        limits: IsolateLimits | None = None,
        executor: Executor | None = None,
    ) -> None:
        self._runtime = runtime
        self._limits = limits or IsolateLimits()
        self._executor = executor

    async def activate(
        self,
        plugin: PluginCode,
        operations: HostOperations | None = None,
        *,
        check_id: bool = True,
        clean_up_rejected: bool = False,
    ) -> Manifest:
        """Runs setup once and returns the validated manifest.

        Raises `WorkerHostError`: `bundle_invalid` (not a loadable ES module or
        no plugin default export), `setup_failed` (`SetupFailed`),
        `invalid_contribution`, `plugin_id_mismatch` (unless `check_id` is
        False, for bundles whose id is not known yet), or an isolate fault.
        With `clean_up_rejected`, a setup whose tool declaration is rejected
        (`RejectedTool`) first has the cleanup it returned run, as a host
        scope does when it skips the plugin.
        """
        deadline = self._deadline()
        isolate = await self._start(plugin)
        operations = operations or NoCapabilities()
        try:
            registered = await self._run_setup(isolate, plugin, operations, deadline)
            try:
                manifest = build_manifest(registered)
            except RejectedTool:
                if clean_up_rejected and isinstance(registered, dict) and registered.get("cleanup"):
                    cleanup = {"op": "invoke", "target": {"kind": "cleanup"}, "input": None,
                               "context": {}}
                    await self._drive(isolate, plugin, lambda: isolate.call(cleanup), operations,
                                      deadline)
                raise
        finally:
            await self._close(isolate)
        if check_id and manifest.plugin_id != plugin.plugin_id:
            raise WorkerHostError(
                "plugin_id_mismatch",
                f"The bundle's plugin id is {quoted(manifest.plugin_id)}, "
                f"not {plugin.plugin_id!r}.",
            )
        return manifest

    async def invoke(
        self,
        plugin: PluginCode,
        fingerprint: str,
        request: dict[str, Any],
        operations: HostOperations | None = None,
    ) -> GuestAnswer:
        """Runs setup, checks its fingerprint, then one registered function.

        `request` is the prelude's invoke request (`target`, `input`,
        `context`). Returns the settled answer (`done` or `failed`). Raises
        `setup_nondeterministic` when setup registered something else than at
        activation, plus everything `activate` raises.
        """
        operations = operations or NoCapabilities()
        deadline = self._deadline()
        isolate = await self._start(plugin)
        try:
            registered = await self._run_setup(isolate, plugin, operations, deadline)
            if manifest_fingerprint(registered) != fingerprint:
                raise WorkerHostError(
                    "setup_nondeterministic",
                    f"Plugin {plugin.plugin_id} registered different contributions than when it "
                    "was activated; the call was refused.",
                )
            invoke = {"op": "invoke", **request}
            return await self._drive(
                isolate, plugin, lambda: isolate.call(invoke), operations, deadline
            )
        finally:
            await self._close(isolate)

    def _deadline(self) -> float:
        """When the wall-clock budget of a call starting now ends (loop time)."""
        return asyncio.get_running_loop().time() + self._limits.wall_time_ms / 1000

    async def _start(self, plugin: PluginCode) -> Isolate:
        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(self._executor, Isolate, self._runtime,
                                              self._limits)
        except RuntimeError as exc:  # the host's worker threads were shut down
            raise WorkerHostError("host_closed", "The host was closed.") from exc

    async def _close(self, isolate: Isolate) -> None:
        await asyncio.get_running_loop().run_in_executor(self._executor, isolate.close)

    async def _drive(
        self,
        isolate: Isolate,
        plugin: PluginCode,
        step: Callable[[], GuestAnswer],
        operations: HostOperations,
        deadline: float,
    ) -> GuestAnswer:
        return await drive(
            isolate,
            step,
            operations,
            executor=self._executor,
            deadline=deadline,
            log_name=plugin.plugin_id,
            limits=self._limits,
        )

    async def _run_setup(
        self,
        isolate: Isolate,
        plugin: PluginCode,
        operations: HostOperations,
        deadline: float,
    ) -> Any:
        """Loads the bundle and runs setup; returns what it registered, unvalidated."""
        loaded = await self._drive(
            isolate, plugin, lambda: isolate.load(plugin.bundle), operations, deadline
        )
        if loaded.status == "failed":
            log.info("bundle for %s failed to load: %s", plugin.plugin_id, loaded.error)
            raise WorkerHostError(
                "bundle_invalid", "The bundle is not a self-contained ES module that loads."
            )
        request = {
            "op": "setup",
            "activation": plugin.activation.to_json(),
            "options": plugin.options,
        }
        answer = await self._drive(
            isolate, plugin, lambda: isolate.call(request), operations, deadline
        )
        if answer.status == "failed":
            failure = answer.error or {}
            log.info("setup of %s failed: %s", plugin.plugin_id, failure)
            if failure.get("_tag") == "NotAPlugin":
                raise WorkerHostError(
                    "bundle_invalid",
                    "The bundle's default export is not a plugin with an id and a setup function.",
                )
            raise SetupFailed(
                plugin.plugin_id, trimmed_public_message(failure, MAX_SETUP_PUBLIC_MESSAGE)
            )
        return answer.value
