"""Testing helpers for plugin authors: deterministic setup and tool calls.

Use them from pytest through the `plugin_harness` fixture (registered by the
`worker_host` pytest plugin when worker-host is installed) or directly::

    def test_setup_is_deterministic(plugin_harness):
        manifest = plugin_harness.check_setup("dist/example.notes.mjs", options={"folder": "n"})
        assert [tool.id for tool in manifest.tools] == ["notes_save"]

    def test_saves_a_note(plugin_harness):
        result = plugin_harness.call_tool("dist/example.notes.mjs", "notes_save",
                                          {"title": "Hi", "body": "there"})
        assert result.value == {"saved": "/workspace/notes/hi.md", "bytes": 13}
        assert plugin_harness.files["notes/hi.md"] == "# Hi\\n\\nthere\\n"

Every call runs in fresh isolates exactly as the host runs it: setup again,
the fingerprint compared, then the one function. Tools get in-memory
workspace files; shell, web fetch and fetch are absent (they throw a
`PluginError` in the plugin).
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from capabilities import InMemoryWorkspaceFiles

from ._activation import Activation, PluginCode, PluginRunner
from ._call_scope import CallScope
from ._errors import WorkerHostError
from ._limits import IsolateLimits
from ._manifest import Manifest
from ._runtime import shared_runtime
from ._tools import CallContext, ToolResult, call_tool
from ._verify import DEFAULT_RUNS, verify_bundle

__all__ = ["PluginHarness", "ToolResult"]

BundleSource = bytes | str | os.PathLike[str]


class PluginHarness:
    """Runs one author's bundles in isolates, synchronously, for tests.

    `files` is the in-memory workspace the tools see (`/workspace/...`); it
    starts as `files` given here and keeps what tools write.
    """

    def __init__(
        self,
        cache_dir: str | os.PathLike[str] | None = None,
        *,
        limits: IsolateLimits | None = None,
        files: Mapping[str, str] | None = None,
    ) -> None:
        self._runner = PluginRunner(shared_runtime(cache_dir), limits)
        self._workspace = InMemoryWorkspaceFiles(files)

    @property
    def files(self) -> dict[str, str]:
        """The in-memory workspace: guest-relative path -> content."""
        return self._workspace.files

    def check_setup(
        self,
        bundle: BundleSource,
        options: Mapping[str, Any] | None = None,
        *,
        runs: int = DEFAULT_RUNS,
    ) -> Manifest:
        """Asserts that setup activates and registers the same thing `runs` times.

        Returns the manifest. Raises `AssertionError` naming the first
        difference between two runs (``tool roll: description: ... then
        ...``), or the activation failure's code and message.
        """
        data = _bundle_bytes(bundle)

        async def verify() -> Manifest:
            report = await verify_bundle(
                self._runner, data, "", options_sets=[dict(options or {})], runs=runs,
                operations=self._scope(),
            )
            (result,) = report.results
            if result.difference is not None:
                raise AssertionError(f"setup is not deterministic: {result.difference}")
            return result.manifest

        try:
            return asyncio.run(verify())
        except WorkerHostError as error:
            raise AssertionError(f"setup failed: {error.code}: {error.message}") from error

    def call_tool(
        self,
        bundle: BundleSource,
        tool: str,
        tool_input: Any,
        *,
        options: Mapping[str, Any] | None = None,
        workdir: str = ".",
    ) -> ToolResult:
        """Activates the bundle, then calls `tool` as the host would.

        Returns the model-visible `ToolResult`. Raises `AssertionError` when
        the bundle does not activate or has no such tool.
        """
        data = _bundle_bytes(bundle)

        async def scenario() -> ToolResult:
            activation = Activation("session", "test", 1, "test")
            probe = PluginCode("", data, activation, dict(options or {}))
            manifest = await self._runner.activate(probe, self._scope(), check_id=False)
            code = PluginCode(manifest.plugin_id, data, activation, dict(options or {}))
            descriptor = manifest.tool(tool)
            if descriptor is None:
                raise AssertionError(f"{manifest.plugin_id} registers no tool {tool!r}")
            context = CallContext("test", str(uuid.uuid4()), str(uuid.uuid4()), workdir)
            return await call_tool(self._runner, code, manifest.fingerprint, descriptor,
                                   tool_input, context, self._scope())

        try:
            return asyncio.run(scenario())
        except WorkerHostError as error:
            raise AssertionError(f"{error.code}: {error.message}") from error

    def _scope(self) -> CallScope:
        return CallScope(files=self._workspace)


def _bundle_bytes(bundle: BundleSource) -> bytes:
    if isinstance(bundle, bytes):
        return bundle
    return Path(bundle).read_bytes()
