"""A call's host operations are bounded: in flight at once, and in all."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from worker_host import Activation, IsolateLimits, PluginCode, PluginRunner, shared_runtime
from worker_host._calls import Deliver, NoCapabilities
from worker_host._isolate import HostRequest

FLOOD = b"""export default { id: 'example.flood', setup(context) {
  context.tools.register({ id: 'flood', description: 'Many capability calls at once.',
    inputSchema: { type: 'object' },
    execute: async (input) => {
      const settled = await Promise.allSettled(Array.from({ length: input.n },
        () => context.workspaceFiles.readText({ filePath: 'a.md' })));
      const refused = settled.filter((s) => s.status === 'rejected');
      return { ok: settled.length - refused.length,
               refused: refused.map((s) => s.reason && s.reason.message)[0] ?? null };
    } });
} };"""


class Counting(NoCapabilities):
    """Capability calls that take a moment and record how many ran at once."""

    def __init__(self) -> None:
        self.running = 0
        self.most = 0

    async def perform(self, request: HostRequest, deliver: Deliver) -> Any:
        self.running += 1
        self.most = max(self.most, self.running)
        try:
            await asyncio.sleep(0.005)
            return None
        finally:
            self.running -= 1


def flood(tmp_path: Path, n: int, limits: IsolateLimits) -> tuple[Any, int]:
    runner = PluginRunner(shared_runtime(tmp_path / "cache"), limits)
    code = PluginCode("example.flood", FLOOD, Activation("session", "r", 1, "s"))
    operations = Counting()

    async def scenario() -> Any:
        manifest = await runner.activate(code)
        request = {"target": {"kind": "tool.execute", "toolId": "flood"}, "input": {"n": n},
                   "context": {}}
        return await runner.invoke(code, manifest.fingerprint, request, operations)

    answer = asyncio.run(scenario())
    return answer.value, operations.most


def test_operations_in_flight_are_capped(tmp_path: Path) -> None:
    value, most = flood(tmp_path, 64, IsolateLimits(max_concurrent_operations=4))
    assert value == {"ok": 64, "refused": None}
    assert most == 4


def test_operations_past_the_budget_are_refused_in_the_guest(tmp_path: Path) -> None:
    value, _ = flood(tmp_path, 30, IsolateLimits(max_operations=20))
    assert value == {"ok": 20, "refused": "Too many host operations in one call."}
