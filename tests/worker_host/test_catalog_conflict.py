"""A host revision that comes to clash with a session's plugins is reported."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path

import pytest

from tests.support.https_server import LoopbackServer, ThrowawayCA
from tests.support.operator import ALLOW_ALL
from worker_host import Host, HostConfig, HostPlugin, WorkerHostError


def bundle(plugin_id: str) -> bytes:
    return (b"export default { id: '" + plugin_id.encode() + b"', setup(context) {"
            b" context.tools.register({ id: 'search', description: 'Search.',"
            b" inputSchema: { type: 'object' }, execute: async () => '"
            + plugin_id.encode() + b"' }); } };")


def test_a_new_host_tool_never_shadows_a_session_tool(
    tmp_path: Path, tls_ca: ThrowawayCA, https_server: LoopbackServer
) -> None:
    https_server.serve("/session.mjs", bundle("example.mine"))
    https_server.serve("/host.mjs", bundle("example.shared"))
    config = HostConfig(data_dir=tmp_path, ca_bundle=tls_ca.ca_file, permissions=ALLOW_ALL)

    async def scenario() -> WorkerHostError:
        async with Host(config) as host:
            session = host.session("demo", create=True)
            await session.add_plugin(https_server.url("/session.mjs"), "example.mine")
        later = replace(config, host_plugins=(
            HostPlugin("example.shared", https_server.url("/host.mjs")),))
        async with Host(later) as host:
            with pytest.raises(WorkerHostError) as caught:
                await host.session("demo").call_tool("search", {})
            return caught.value

    error = asyncio.run(scenario())
    assert error.code == "catalog_conflict"
    assert error.message == (
        "Session demo's plugins conflict with the host's: tool 'search' of example.mine is "
        "already declared by example.shared. Remove or replace the session's plugin."
    )
