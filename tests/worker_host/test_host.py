"""The embedding API against a real HTTPS server: pins, refresh, revisions."""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Awaitable
from pathlib import Path
from typing import Any, TypeVar

import pytest

from tests.support.https_server import LoopbackServer, ThrowawayCA
from tests.support.operator import ALLOW_ALL
from worker_host import Host, HostConfig, IsolateLimits, WorkerHostError

T = TypeVar("T")

SHOUT = b"""export default {
  id: 'example.shout',
  setup(context) {
    context.tools.register({
      id: 'shout',
      description: 'Uppercase a short string.',
      inputSchema: {
        type: 'object',
        properties: { text: { type: 'string', minLength: 1 } },
        required: ['text'],
        additionalProperties: false,
      },
      execute: async (input) => input.text.toUpperCase(),
    });
  },
};
"""

WHISPER = SHOUT.replace(b"toUpperCase", b"toLowerCase")


def run(awaitable: Awaitable[T]) -> T:
    async def wrapper() -> T:
        return await awaitable

    return asyncio.run(wrapper())


@pytest.fixture
def config(tmp_path: Path, tls_ca: ThrowawayCA) -> HostConfig:
    return HostConfig(permissions=ALLOW_ALL, data_dir=tmp_path / "data", ca_bundle=tls_ca.ca_file)


def add(config: HostConfig, url: str, plugin_id: str = "example.shout", **kwargs: Any) -> Any:
    async def scenario() -> Any:
        async with Host(config) as host:
            session = host.session("demo", create=True)
            return await session.add_plugin(url, plugin_id, **kwargs)

    return run(scenario())


def call(config: HostConfig, name: str, tool_input: Any) -> Any:
    async def scenario() -> Any:
        async with Host(config) as host:
            return await host.session("demo").call_tool(name, tool_input)

    return run(scenario())


def test_add_list_and_call_survive_a_new_host(
    config: HostConfig, https_server: LoopbackServer
) -> None:
    https_server.serve("/shout.mjs", SHOUT)
    plugin = add(config, https_server.url("/shout.mjs"))
    assert plugin.plugin_id == "example.shout"
    assert plugin.shape == "tools-only"
    assert len(plugin.sha256) == 64

    with Host(config) as host:
        session = host.session("demo")
        assert [p.sha256 for p in session.plugins()] == [plugin.sha256]
        (tool,) = session.tools()
        assert tool.to_json() == {
            "name": "shout",
            "description": "Uppercase a short string.",
            "inputSchema": {
                "type": "object",
                "properties": {"text": {"type": "string", "minLength": 1}},
                "required": ["text"],
                "additionalProperties": False,
            },
            "pluginId": "example.shout",
        }
    result = call(config, "shout", {"text": "hi"})
    assert (result.ok, result.text) == (True, "HI")


def test_a_changed_file_at_the_same_url_needs_a_refresh(
    config: HostConfig, https_server: LoopbackServer
) -> None:
    https_server.serve("/shout.mjs", SHOUT)
    first = add(config, https_server.url("/shout.mjs"))
    https_server.serve("/shout.mjs", WHISPER)

    assert call(config, "shout", {"text": "Hi"}).text == "HI"

    async def refresh() -> Any:
        async with Host(config) as host:
            return await host.session("demo").refresh_plugin("example.shout")

    refreshed = run(refresh())
    assert refreshed.changed is True
    assert refreshed.previous_sha256 == first.sha256
    assert refreshed.plugin.sha256 != first.sha256
    assert call(config, "shout", {"text": "Hi"}).text == "hi"

    again = run(refresh())
    assert again.changed is False
    assert again.plugin.sha256 == refreshed.plugin.sha256


def test_a_digest_mismatch_activates_nothing(
    config: HostConfig, https_server: LoopbackServer
) -> None:
    https_server.serve("/shout.mjs", SHOUT)
    wrong = "0" * 64
    with pytest.raises(WorkerHostError) as caught:
        add(config, https_server.url("/shout.mjs"), sha256=wrong)
    assert caught.value.code == "integrity_mismatch"

    with Host(config) as host:
        session = host.session("demo")
        assert session.plugins() == []
        assert session.revision().version == 0
        assert not (config.data_dir / "bundles" / "sha256").exists() or not any(
            (config.data_dir / "bundles" / "sha256").rglob("*")
        )


def test_the_right_digest_is_accepted_in_either_case(
    config: HostConfig, https_server: LoopbackServer
) -> None:
    https_server.serve("/shout.mjs", SHOUT)
    digest = hashlib.sha256(SHOUT).hexdigest()
    plugin = add(config, https_server.url("/shout.mjs"), sha256=digest.upper())
    assert plugin.sha256 == digest


def test_a_failed_activation_leaves_the_previous_revision(
    config: HostConfig, https_server: LoopbackServer
) -> None:
    https_server.serve("/shout.mjs", SHOUT)
    broken = b"export default { id: 'example.broken', setup() { throw 1 } };"
    https_server.serve("/broken.mjs", broken)
    add(config, https_server.url("/shout.mjs"))
    with pytest.raises(WorkerHostError) as caught:
        add(config, https_server.url("/broken.mjs"), plugin_id="example.broken")
    assert (caught.value.code, caught.value.message) == (
        "setup_failed",
        "Plugin example.broken failed to set up.",
    )
    with Host(config) as host:
        session = host.session("demo")
        assert session.revision().version == 1
        assert [p.plugin_id for p in session.plugins()] == ["example.shout"]


def test_add_twice_remove_and_unknown_names(
    config: HostConfig, https_server: LoopbackServer
) -> None:
    https_server.serve("/shout.mjs", SHOUT)
    add(config, https_server.url("/shout.mjs"))
    with pytest.raises(WorkerHostError) as caught:
        add(config, https_server.url("/shout.mjs"))
    assert caught.value.code == "plugin_exists"

    async def scenario() -> None:
        async with Host(config) as host:
            session = host.session("demo")
            await session.remove_plugin("example.shout")
            assert session.tools() == []
            assert session.revision().version == 2
            with pytest.raises(WorkerHostError) as missing:
                await session.remove_plugin("example.shout")
            assert missing.value.code == "plugin_not_found"
            with pytest.raises(WorkerHostError) as unknown:
                await session.call_tool("shout", {"text": "x"})
            assert unknown.value.code == "unknown_tool"

    run(scenario())


@pytest.mark.parametrize(
    ("plugin_id", "session_id", "code"),
    [
        ("Example", "demo", "invalid_plugin_id"),
        ("example.shout", "../etc", "invalid_session_id"),
        ("example.shout", "", "invalid_session_id"),
    ],
)
def test_bad_names_are_refused_before_any_fetch(
    config: HostConfig, https_server: LoopbackServer, plugin_id: str, session_id: str, code: str
) -> None:
    async def scenario() -> None:
        async with Host(config) as host:
            session = host.session(session_id, create=True)
            await session.add_plugin(https_server.url("/x.mjs"), plugin_id)

    with pytest.raises(WorkerHostError) as caught:
        run(scenario())
    assert caught.value.code == code
    assert https_server.requests == []


def test_options_reach_setup_as_given(config: HostConfig, https_server: LoopbackServer) -> None:
    source = b"""export default { id: 'example.opts', setup(context) {
      context.tools.register({ id: 'opts', description: 'Echo options.',
        inputSchema: { type: 'object' }, execute: async () => context.options });
    } };"""
    https_server.serve("/opts.mjs", source)
    plugin = add(config, https_server.url("/opts.mjs"), plugin_id="example.opts",
                 options={"folder": "notes", "n": 2})
    assert plugin.options == {"folder": "notes", "n": 2}
    assert call(config, "opts", {}).value == {"folder": "notes", "n": 2}


def test_a_closed_host_refuses_use(config: HostConfig) -> None:
    host = Host(config)
    host.close()
    host.close()
    with pytest.raises(WorkerHostError) as caught:
        host.session("demo", create=True)
    assert caught.value.code == "host_closed"


def test_a_nondeterministic_setup_fails_closed_on_its_first_call(
    config: HostConfig, https_server: LoopbackServer
) -> None:
    source = b"""export default { id: 'example.dice', setup(context) {
      context.tools.register({ id: 'roll', description: 'Roll ' + Math.random(),
        inputSchema: { type: 'object' }, execute: async () => 'rolled' });
    } };"""
    https_server.serve("/dice.mjs", source)
    add(config, https_server.url("/dice.mjs"), plugin_id="example.dice")
    result = call(config, "roll", {})
    assert (result.code, result.message) == (
        "setup_nondeterministic",
        "Plugin example.dice registered different contributions than when it was activated; "
        "the call was refused.",
    )
    with Host(config) as host:
        assert host.session("demo").revision().version == 1


def test_runaway_tools_fail_and_the_next_call_on_the_same_host_succeeds(
    tmp_path: Path, tls_ca: ThrowawayCA, https_server: LoopbackServer
) -> None:
    source = b"""export default { id: 'example.hostile', setup(context) {
      const tool = (id, execute) => context.tools.register(
        { id, description: id, inputSchema: { type: 'object' }, execute });
      tool('spin', async () => { for (;;) {} });
      tool('hoard', async () => { const kept = []; for (;;) kept.push(new Uint8Array(1 << 20)); });
      tool('ok', async () => 'still here');
    } };"""
    https_server.serve("/hostile.mjs", source)
    limits = IsolateLimits(cpu_time_ms=300, memory_bytes=32 * 1024 * 1024)
    config = HostConfig(permissions=ALLOW_ALL, data_dir=tmp_path / "data", ca_bundle=tls_ca.ca_file,
                        isolate_limits=limits)

    async def scenario() -> list[tuple[str | None, str | None]]:
        async with Host(config) as host:
            session = host.session("demo", create=True)
            await session.add_plugin(https_server.url("/hostile.mjs"), "example.hostile")
            outcomes = []
            for name in ("spin", "ok", "hoard", "ok"):
                result = await session.call_tool(name, {})
                outcomes.append((result.code, result.message if result.code else result.value))
            return outcomes

    assert run(scenario()) == [
        ("cpu_time_exceeded", "The plugin ran past its CPU time limit."),
        (None, "still here"),
        ("memory_limit_exceeded", "The plugin ran past its memory limit."),
        (None, "still here"),
    ]
