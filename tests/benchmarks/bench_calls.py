"""Benchmarks of isolate start-up and tool calls. A script, not a timed test.

    .venv/bin/pip install -e '.[bench]'     # the quickjs-rs peer (optional)
    .venv/bin/python tests/benchmarks/bench_calls.py [--rounds N]

Prints the median (and p90) of, measured side by side in one run:
- first call in a new process: interpreter start, import, guest module from
  the disk cache, one fresh isolate with setup and one `shout` call;
- fresh isolate: `PluginRunner.invoke` (new instance, prelude, bundle load,
  setup, fingerprint check, one `shout` call);
- `tools call` end to end through the embedding API (`Session.call_tool`:
  a Turn of its own with its events in SQLite, state and bundle read and
  re-verified, input validation, authorization, one isolate);
- the peer: quickjs-rs with a fresh runtime and context per call, loading
  the same bundle and making the same call.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

SHOUT = """export default {
  id: 'example.shout',
  setup(context) {
    context.tools.register({
      id: 'shout',
      description: 'Uppercase a short string.',
      inputSchema: { type: 'object', properties: { text: { type: 'string', minLength: 1 } },
                     required: ['text'], additionalProperties: false },
      execute: async (input) => input.text.toUpperCase(),
    });
  },
};
"""


def report(name: str, samples: list[float]) -> float:
    ordered = sorted(samples)
    median = statistics.median(ordered)
    p90 = ordered[int(len(ordered) * 0.9) - 1] if len(ordered) >= 10 else ordered[-1]
    print(f"{name:<46} median {median * 1e3:8.3f} ms   p90 {p90 * 1e3:8.3f} ms   n={len(samples)}")
    return median


def first_call_in_new_process(cache_dir: Path, rounds: int) -> list[float]:
    script = textwrap.dedent(f"""
        import time
        started = time.perf_counter()
        import asyncio
        from worker_host import Activation, PluginCode, PluginRunner, shared_runtime
        runner = PluginRunner(shared_runtime({str(cache_dir)!r}))
        code = PluginCode('example.shout', {SHOUT.encode()!r}, Activation('session', 'r', 1, 's'))
        async def main():
            manifest = await runner.activate(code)
            request = {{'target': {{'kind': 'tool.execute', 'toolId': 'shout'}},
                       'input': {{'text': 'hi'}}, 'context': {{}}}}
            answer = await runner.invoke(code, manifest.fingerprint, request)
            assert answer.value == 'HI'
        asyncio.run(main())
        print(time.perf_counter() - started)
    """)
    samples = []
    for _ in range(rounds + 1):  # the first run fills the module cache
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", script], check=True, capture_output=True)
        samples.append(time.perf_counter() - started)
    return samples[1:]


async def measure(step: Callable[[], object], rounds: int) -> list[float]:
    samples = []
    for _ in range(rounds):
        started = time.perf_counter()
        await step()  # type: ignore[misc]
        samples.append(time.perf_counter() - started)
    return samples


async def worker_host_samples(data_dir: Path, rounds: int) -> dict[str, list[float]]:
    from worker_host import (
        Activation,
        Host,
        HostConfig,
        PermissionRule,
        PluginCode,
        PluginRunner,
        Session,
        shared_runtime,
    )

    runner = PluginRunner(shared_runtime(data_dir / "cache"))
    code = PluginCode("example.shout", SHOUT.encode(), Activation("session", "r", 1, "s"))
    manifest = await runner.activate(code)
    request = {"target": {"kind": "tool.execute", "toolId": "shout"},
               "input": {"text": "hi"}, "context": {}}

    async def fresh_isolate() -> None:
        answer = await runner.invoke(code, manifest.fingerprint, request)
        assert answer.value == "HI"

    # The embedding API needs a pinned plugin: pin the bundle bytes directly
    # (the HTTPS fetch is not what this measures).
    allow = (PermissionRule("*", "*", "allow"),)
    host = Host(HostConfig(data_dir=data_dir, permissions=allow))
    session: Session = host.session("bench", create=True)
    digest = host._bundles.put(SHOUT.encode())
    from worker_host._storage import Pin

    await session._commit(session.revision(), [Pin("example.shout", "https://bench.invalid/",
                                                   digest, {}, "", "")])

    async def tools_call() -> None:
        result = await session.call_tool("shout", {"text": "hi"})
        assert result.text == "HI"

    await fresh_isolate()
    await tools_call()
    samples = {
        "fresh isolate (setup + one shout call)": await measure(fresh_isolate, rounds),
        "tools call through the embedding API": await measure(tools_call, rounds),
    }
    host.close()
    return samples


def peer_samples(rounds: int) -> list[float] | None:
    try:
        import quickjs_rs
    except ImportError:
        return None
    source = SHOUT.replace("export default", "globalThis.plugin =") + "\nundefined;"
    driver = """
      const tools = {};
      await plugin.setup({ tools: { register: (d) => { tools[d.id] = d; } } });
      const result = await tools.shout.execute({ text: 'hi' });
      result
    """

    def call() -> None:
        runtime = quickjs_rs.Runtime()
        context = runtime.new_context()
        context.eval(source)
        result = asyncio.run(context.eval_async(driver))
        assert result == "HI"
        context.close()
        runtime.close()

    call()
    samples = []
    for _ in range(rounds):
        started = time.perf_counter()
        call()
        samples.append(time.perf_counter() - started)
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--process-rounds", type=int, default=10)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="worker-host-bench-") as temp:
        data_dir = Path(temp)
        report("first call in a new process (warm disk cache)",
               first_call_in_new_process(data_dir / "cache", args.process_rounds))
        samples = asyncio.run(worker_host_samples(data_dir, args.rounds))
        medians = {name: report(name, values) for name, values in samples.items()}
        peer = peer_samples(args.rounds)
        if peer is None:
            print("peer quickjs-rs not installed: pip install -e '.[bench]'")
        else:
            peer_median = report("peer: quickjs-rs fresh runtime + same call", peer)
            fresh = medians["fresh isolate (setup + one shout call)"]
            print(f"ratio fresh isolate / peer: {fresh / peer_median:.2f}")


if __name__ == "__main__":
    main()
