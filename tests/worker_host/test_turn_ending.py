"""A Turn ends once: cancelling it while calls run discards their results."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.support.operator import ALLOW_ALL
from worker_host import Host, HostConfig, ToolCall, WorkerHostError
from worker_host._storage import Pin

SLOW = b"""export default { id: 'example.slow', setup(context) {
  context.tools.register({ id: 'slow', description: 'Takes a moment.',
    inputSchema: { type: 'object' },
    execute: async () => { await new Promise((r) => setTimeout(r, 300)); return 'done'; } });
} };"""


def test_cancelling_a_turn_while_a_call_runs(tmp_path: Path) -> None:
    async def scenario() -> list[dict[str, object]]:
        async with Host(HostConfig(data_dir=tmp_path, permissions=ALLOW_ALL)) as host:
            session = host.session("demo", create=True)
            pin = Pin("example.slow", "https://x.invalid/", host._bundles.put(SLOW), {}, "", "")
            await session._commit(session.revision(), [pin])
            turn = await session.begin_turn()
            calling = asyncio.ensure_future(turn.call_tools([ToolCall("slow", {})]))
            await asyncio.sleep(0.1)
            await turn.cancel("user stopped")
            with pytest.raises(WorkerHostError) as ended:
                await calling
            assert ended.value.code == "turn_ended"
            with pytest.raises(WorkerHostError):
                await turn.end("too late")
            return turn.events()

    events = asyncio.run(scenario())
    terminal = [event for event in events if event["type"] == "turn.terminal"]
    assert len(terminal) == 1
    assert terminal[0]["outcome"]["kind"] == "cancelled"
    assert events[-1]["type"] == "turn.terminal"
