"""Every example plugin builds with the real esbuild and runs in the host."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from sdk import build_bundle
from tests.support.https_server import LoopbackServer, ThrowawayCA
from tests.support.operator import ALLOW_ALL
from worker_host import Host, HostConfig

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.mark.parametrize(
    ("example", "plugin_id", "tool", "tool_input", "expected"),
    [
        ("shout/plugin.mjs", "example.shout", "shout", {"text": "hi"}, "HI"),
        ("shout-ts/plugin.ts", "example.shout", "shout", {"text": "hi"}, "HI"),
        ("basic/plugin.mjs", "example.basic", "double", {"value": 21}, {"value": 42}),
        ("approval-hook/plugin.mjs", "example.approval-hook", "double", {"value": 2},
         {"value": 4}),
    ],
)
def test_example_builds_and_runs(
    tmp_path: Path,
    tls_ca: ThrowawayCA,
    https_server: LoopbackServer,
    example: str,
    plugin_id: str,
    tool: str,
    tool_input: dict[str, Any],
    expected: Any,
) -> None:
    bundle = build_bundle(EXAMPLES / example, tmp_path / "bundle.mjs")
    https_server.serve("/bundle.mjs", bundle)
    config = HostConfig(permissions=ALLOW_ALL, data_dir=tmp_path / "data", ca_bundle=tls_ca.ca_file)

    async def scenario() -> Any:
        async with Host(config) as host:
            session = host.session("demo", create=True)
            await session.add_plugin(https_server.url("/bundle.mjs"), plugin_id)
            return await session.call_tool(tool, tool_input)

    result = asyncio.run(scenario())
    assert (result.code, result.value) == (None, expected)


def test_notes_saves_a_note_into_the_session_workspace(
    tmp_path: Path, tls_ca: ThrowawayCA, https_server: LoopbackServer
) -> None:
    bundle = build_bundle(EXAMPLES / "notes" / "plugin.mjs", tmp_path / "notes.mjs")
    https_server.serve("/notes.mjs", bundle)
    config = HostConfig(permissions=ALLOW_ALL, data_dir=tmp_path / "data", ca_bundle=tls_ca.ca_file)

    async def scenario() -> tuple[Any, Path]:
        async with Host(config) as host:
            session = host.session("demo", create=True)
            plugin = await session.add_plugin(https_server.url("/notes.mjs"), "example.notes")
            assert plugin.shape == "mixed"
            saved = await session.call_tool(
                "notes_save", {"title": "Release plan", "body": "  - ship it\n"}
            )
            return saved, session.workspace

    saved, workspace = asyncio.run(scenario())
    assert (saved.code, saved.value) == (
        None,
        {"saved": "/workspace/notes/release-plan.md", "bytes": 26},
    )
    assert (workspace / "notes" / "release-plan.md").read_text() == (
        "# Release plan\n\n- ship it\n"
    )


def test_the_demo_runs_end_to_end() -> None:
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / "demo.py")], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-2:] == ["HI", "demo: ok"]
