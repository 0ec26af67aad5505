"""An `always` reply resolves the session's other pending requests it now allows."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from worker_host import Host, HostConfig, PermissionAnswer, ToolCall
from worker_host._storage import Pin

SOURCE = b"""export default { id: 'example.deploy', setup(context) {
  context.tools.register({ id: 'deploy', description: 'Deploy.',
    inputSchema: { type: 'object', properties: { env: { type: 'string' } } },
    permissions: async (input) => [{ action: 'deploy', resources: [input.env],
                                     save: [input.env] }],
    execute: async (input) => `deployed ${input.env}` });
} };"""


class Client:
    """Answers the first request `always` (after the second is waiting), and
    never answers the second: only the saved pattern can settle it."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    async def permission(self, request: dict[str, Any]) -> PermissionAnswer | None:
        self.asked.append(request["resources"][0])
        if len(self.asked) == 1:
            while len(self.asked) < 2:
                await asyncio.sleep(0.01)
            return PermissionAnswer("always")
        await asyncio.Event().wait()
        return None

    async def question(self, request: dict[str, Any]) -> list[list[str]] | None:
        return None


def test_an_always_reply_releases_a_pending_request_it_now_allows(tmp_path: Path) -> None:
    async def scenario() -> tuple[list[Any], list[dict[str, Any]]]:
        async with Host(HostConfig(data_dir=tmp_path)) as host:
            session = host.session("demo", create=True)
            digest = host._bundles.put(SOURCE)
            pin = Pin("example.deploy", "https://x.invalid/", digest, {}, "", "")
            await session._commit(session.revision(), [pin])
            client = Client()
            first = await session.begin_turn(client=client)
            second = await session.begin_turn(client=client)
            results = await asyncio.gather(
                first.call_tools([ToolCall("deploy", {"env": "staging"})]),
                second.call_tools([ToolCall("deploy", {"env": "staging"})]),
            )
            assert sorted(client.asked) == ["staging", "staging"]
            return [r[0].value for r in results], second.events() + first.events()

    values, events = asyncio.run(scenario())
    assert values == ["deployed staging", "deployed staging"]
    sources = sorted(event["source"] for event in events if event["type"] == "approval.resolved")
    assert sources == ["callback", "saved"]
