"""Bundle fetches go through the host's network policy (no request forgery)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from capabilities import NetworkPolicy
from tests.support.https_server import LoopbackServer, ThrowawayCA
from worker_host import Host, HostConfig, WorkerHostError


def add(config: HostConfig, url: str) -> WorkerHostError:
    async def scenario() -> None:
        async with Host(config) as host:
            await host.session("demo", create=True).add_plugin(url, "example.x")

    with pytest.raises(WorkerHostError) as caught:
        asyncio.run(scenario())
    return caught.value


def test_a_host_that_refuses_loopback_never_reaches_it(
    tmp_path: Path, tls_ca: ThrowawayCA, https_server: LoopbackServer
) -> None:
    https_server.serve("/x.mjs", b"export default {};")
    config = HostConfig(data_dir=tmp_path, ca_bundle=tls_ca.ca_file,
                        bundle_network=NetworkPolicy(allow_loopback=False))
    error = add(config, https_server.url("/x.mjs"))
    assert error.code == "request_failed"
    assert https_server.requests == []


def test_the_default_refuses_the_cloud_metadata_address(tmp_path: Path) -> None:
    # The policy refuses before connecting: nothing is sent to the address.
    error = add(HostConfig(data_dir=tmp_path), "https://169.254.169.254/latest/bundle.mjs")
    assert error.code == "request_failed"
