"""Hostile bundles: the host survives every one, and the same runner keeps working.

Each test runs the attack through a real isolate, asserts the exact code and
message a user sees, then proves the runner still serves an ordinary plugin.
"""

from __future__ import annotations

import asyncio
import logging

import pytest

from tests.worker_host.bundles import (
    CPU_TIME_EXCEEDED,
    INVALID_OUTPUT,
    MEMORY_LIMIT_EXCEEDED,
    OUTPUT_TOO_LARGE,
    RUNTIME_FAILED,
    STACK_OVERFLOW,
    STALLED,
    TIMED_OUT,
    MiB,
    activate_and_call,
    assert_healthy,
    call,
    failed,
    plugin_code,
    plugin_source,
    tool_source,
)
from worker_host import (
    GuestRuntime,
    IsolateFault,
    IsolateLimits,
    PluginRunner,
    ToolResult,
    WorkerHostError,
)
from worker_host._isolate import Isolate

HOSTILE_LIMITS = IsolateLimits(
    cpu_time_ms=300,
    wall_time_ms=1_000,
    memory_bytes=32 * MiB,
    max_output_bytes=64 * 1024,
)


@pytest.fixture
def hostile(guest_runtime: GuestRuntime) -> PluginRunner:
    return PluginRunner(guest_runtime, HOSTILE_LIMITS)


def activation_fault(runner: PluginRunner, source: bytes) -> tuple[str, str]:
    with pytest.raises(IsolateFault) as caught:
        asyncio.run(runner.activate(plugin_code(source)))
    return caught.value.code, caught.value.message


# ---- CPU time ---------------------------------------------------------------


def test_infinite_loop_in_execute(hostile: PluginRunner) -> None:
    assert call(hostile, tool_source("for (;;) {}")) == failed(CPU_TIME_EXCEEDED)
    assert_healthy(hostile)


def test_infinite_loop_in_setup(hostile: PluginRunner) -> None:
    assert activation_fault(hostile, plugin_source("for (;;) {}")) == CPU_TIME_EXCEEDED
    assert_healthy(hostile)


def test_infinite_loop_at_module_top_level(hostile: PluginRunner) -> None:
    source = plugin_source("", prefix="while (true) {}")
    assert activation_fault(hostile, source) == CPU_TIME_EXCEEDED
    assert_healthy(hostile)


def test_infinite_loop_in_an_async_continuation(hostile: PluginRunner) -> None:
    # The loop runs in a promise job after a timer, i.e. after the host resumed the guest.
    source = tool_source("await new Promise((r) => setTimeout(r, 1)); for (;;) {}")
    assert call(hostile, source) == failed(CPU_TIME_EXCEEDED)
    assert_healthy(hostile)


def test_catastrophic_regex_backtracking(hostile: PluginRunner) -> None:
    source = tool_source("return /^(a+)+$/.test('a'.repeat(64) + 'b');")
    assert call(hostile, source) == failed(CPU_TIME_EXCEEDED)
    assert_healthy(hostile)


# ---- memory -----------------------------------------------------------------


def test_memory_bomb_array_of_typed_arrays(hostile: PluginRunner) -> None:
    source = tool_source("const keep = []; for (;;) keep.push(new Uint8Array(1 << 20));")
    assert call(hostile, source) == failed(MEMORY_LIMIT_EXCEEDED)
    assert_healthy(hostile)


def test_memory_bomb_string_doubling_hits_the_engine_string_limit(hostile: PluginRunner) -> None:
    # `s + s` builds ropes without copying, so the engine's maximum string length
    # (2^30) is reached before memory: an ordinary uncaught InternalError.
    source = tool_source("let s = 'x'; for (;;) s = s + s;")
    assert call(hostile, source) == failed(RUNTIME_FAILED)
    assert_healthy(hostile)


def test_memory_bomb_flat_string_doubling(hostile: PluginRunner) -> None:
    source = tool_source("let s = 'x'; for (;;) s = s.repeat(2);")
    assert call(hostile, source) == failed(MEMORY_LIMIT_EXCEEDED)
    assert_healthy(hostile)


def test_memory_bomb_one_huge_array_buffer(hostile: PluginRunner) -> None:
    source = tool_source("return new ArrayBuffer(1e9).byteLength;")
    assert call(hostile, source) == failed(MEMORY_LIMIT_EXCEEDED)
    assert_healthy(hostile)


def test_memory_bomb_caught_by_the_plugin_still_fails_the_call(hostile: PluginRunner) -> None:
    # Allocation past the limit fails the call even if the plugin swallows the error:
    # the isolate is not trusted to continue after its allocator failed.
    source = tool_source("try { new ArrayBuffer(1e9); } catch { } return 'survived';")
    assert call(hostile, source) == failed(MEMORY_LIMIT_EXCEEDED)
    assert_healthy(hostile)


def test_memory_bomb_huge_filled_array(hostile: PluginRunner) -> None:
    source = tool_source("return new Array(1e9).fill(0).length;")
    assert call(hostile, source) == failed(MEMORY_LIMIT_EXCEEDED)
    assert_healthy(hostile)


def test_memory_bomb_in_setup(hostile: PluginRunner) -> None:
    source = plugin_source("const keep = []; for (;;) keep.push(new Float64Array(1 << 17));")
    assert activation_fault(hostile, source) == MEMORY_LIMIT_EXCEEDED
    assert_healthy(hostile)


# ---- stack ------------------------------------------------------------------


def test_deep_recursion_uncaught(hostile: PluginRunner) -> None:
    # The guest's JS stack limit throws a RangeError the prelude flags as a stack
    # overflow (`stackOverflow: true`); the model-visible code is `stack_overflow`.
    source = tool_source("const f = (n) => f(n + 1) + 1; return f(0);")
    assert call(hostile, source) == failed(STACK_OVERFLOW)
    assert_healthy(hostile)


def test_deep_recursion_caught_inside_the_plugin(hostile: PluginRunner) -> None:
    source = tool_source(
        "const f = (n) => f(n + 1) + 1;\n"
        "try { return f(0); } catch (e) { return [String(e), e instanceof RangeError]; }"
    )
    assert call(hostile, source) == ToolResult(
        value=["RangeError: Maximum call stack size exceeded", True]
    )
    assert_healthy(hostile)


def test_deep_recursion_in_setup_fails_setup(hostile: PluginRunner) -> None:
    source = plugin_source("const f = (n) => f(n + 1) + 1; f(0);")
    with pytest.raises(WorkerHostError) as caught:
        asyncio.run(hostile.activate(plugin_code(source)))
    assert (caught.value.code, caught.value.message) == (
        "setup_failed",
        "Plugin example.x failed to set up.",
    )
    assert_healthy(hostile)


# ---- never settling, too much, too deep, cycles -----------------------------


def test_promise_that_never_settles(hostile: PluginRunner) -> None:
    assert call(hostile, tool_source("await new Promise(() => {});")) == failed(STALLED)
    assert_healthy(hostile)


def test_setup_that_never_settles(hostile: PluginRunner) -> None:
    assert activation_fault(hostile, plugin_source("await new Promise(() => {});")) == STALLED
    assert_healthy(hostile)


def test_huge_output_string(hostile: PluginRunner) -> None:
    source = tool_source("return 'x'.repeat(100 * 1024);")
    assert call(hostile, source) == failed(OUTPUT_TOO_LARGE)
    assert_healthy(hostile)


def test_output_just_under_the_limit_is_returned(hostile: PluginRunner) -> None:
    source = tool_source("return 'x'.repeat(60 * 1024);")
    assert call(hostile, source) == ToolResult(value="x" * 60 * 1024)


def test_deeply_nested_output_object(hostile: PluginRunner) -> None:
    source = tool_source("let o = {}; for (let i = 0; i < 100000; i++) o = { a: o }; return o;")
    assert call(hostile, source) == failed(INVALID_OUTPUT)
    assert_healthy(hostile)


def test_deeply_nested_output_array(hostile: PluginRunner) -> None:
    source = tool_source("let o = []; for (let i = 0; i < 100000; i++) o = [o]; return o;")
    assert call(hostile, source) == failed(INVALID_OUTPUT)
    assert_healthy(hostile)


def test_nesting_within_the_depth_limit_is_returned(hostile: PluginRunner) -> None:
    source = tool_source("let o = 0; for (let i = 0; i < 200; i++) o = [o]; return o;")
    expected: object = 0
    for _ in range(200):
        expected = [expected]
    assert call(hostile, source) == ToolResult(value=expected)


def test_cyclic_output(hostile: PluginRunner) -> None:
    source = tool_source("const o = { list: [] }; o.list.push(o); return o;")
    assert call(hostile, source) == failed(INVALID_OUTPUT)
    assert_healthy(hostile)


def test_shared_but_acyclic_output_is_fine(hostile: PluginRunner) -> None:
    source = tool_source("const leaf = { n: 1 }; return { a: leaf, b: leaf };")
    assert call(hostile, source) == ToolResult(value={"a": {"n": 1}, "b": {"n": 1}})


# ---- the prelude's entry points and intrinsics ------------------------------


@pytest.mark.parametrize("entry", ["__wh_poll", "__wh_dispatch", "__wh_bundle_loaded"])
def test_entry_points_cannot_be_overwritten(hostile: PluginRunner, entry: str) -> None:
    source = tool_source(
        'const forged = () => \'{"status":"done","value":"forged"}\';\n'
        "const attempts = [];\n"
        f"try {{ globalThis.{entry} = forged; attempts.push('assigned'); }}\n"
        "catch (e) { attempts.push(String(e)); }\n"
        f"try {{ Object.defineProperty(globalThis, '{entry}', {{ value: forged }});\n"
        "      attempts.push('defined'); }\n"
        "catch (e) { attempts.push(String(e)); }\n"
        f"try {{ delete globalThis.{entry}; attempts.push('deleted'); }}\n"
        "catch (e) { attempts.push(String(e)); }\n"
        "return attempts;"
    )
    assert call(hostile, source) == ToolResult(
        value=[
            f"TypeError: '{entry}' is read-only",
            "TypeError: property is not configurable",
            "TypeError: could not delete property",
        ]
    )
    assert_healthy(hostile)


def test_uncaught_overwrite_of_poll_fails_only_that_call(hostile: PluginRunner) -> None:
    source = tool_source("globalThis.__wh_poll = () => 'forged'; return 'real';")
    assert call(hostile, source) == failed(RUNTIME_FAILED)
    assert_healthy(hostile)


def test_replaced_json_stringify_cannot_forge_the_answer(hostile: PluginRunner) -> None:
    source = tool_source(
        'JSON.stringify = () => \'{"status":"done","value":"forged"}\';\n'
        "JSON.parse = () => ({ op: 'invoke' });\n"
        "console.log({ logged: true });\n"
        "return 'real';"
    )
    assert call(hostile, source) == ToolResult(value="real")
    assert_healthy(hostile)


def test_replaced_promise_then_cannot_forge_the_answer(hostile: PluginRunner) -> None:
    source = tool_source(
        "Promise.prototype.then = function () { throw new Error('hijacked'); };\n"
        "Promise.resolve = () => 'forged';\n"
        "await new Promise((resolve) => setTimeout(resolve, 1));\n"
        "return 'real';"
    )
    assert call(hostile, source) == ToolResult(value="real")
    assert_healthy(hostile)


def test_replaced_promise_then_in_setup(hostile: PluginRunner) -> None:
    source = tool_source(
        "return 'real';",
        setup_body="Promise.prototype.then = function () { return 'forged'; };",
    )
    assert call(hostile, source) == ToolResult(value="real")
    assert_healthy(hostile)


def test_object_prototype_to_json_cannot_forge_the_answer(hostile: PluginRunner) -> None:
    # The prelude promises that the host reads only its own plain-JSON copy; an
    # inherited toJSON must not get to run while the answer is serialized.
    source = tool_source(
        "Object.prototype.toJSON = function () {\n"
        "  return { status: 'done', value: 'forged' };\n"
        "};\n"
        "return 'real';"
    )
    assert call(hostile, source) == ToolResult(value="real")
    assert_healthy(hostile)


def test_object_prototype_setter_cannot_forge_the_answer(hostile: PluginRunner) -> None:
    source = tool_source(
        "Object.defineProperty(Object.prototype, 'logs', {\n"
        "  set(value) { this.value = 'forged'; }, configurable: true,\n"
        "});\n"
        "console.log('a line, so that the answer carries logs');\n"
        "return 'real';"
    )
    assert call(hostile, source) == ToolResult(value="real")
    assert_healthy(hostile)


def test_forged_deeply_nested_answer_does_not_escape_the_host_api(
    guest_runtime: GuestRuntime,
) -> None:
    # With the default 8 MiB output limit a forged answer nested 5000 deep fits;
    # whatever the guest writes, the host must answer with a result or a
    # WorkerHostError, never a raw Python exception such as RecursionError.
    runner = PluginRunner(guest_runtime, IsolateLimits(cpu_time_ms=300, wall_time_ms=1_000))
    source = tool_source(
        "Object.prototype.toJSON = function () {\n"
        "  delete Object.prototype.toJSON;\n"
        "  let v = []; for (let i = 0; i < 5000; i++) v = [v];\n"
        "  return { status: 'done', value: v };\n"
        "};\n"
        "return 'real';"
    )
    assert call(runner, source) == ToolResult(value="real")
    assert_healthy(runner)


# ---- throwing things that are not errors ------------------------------------


def test_throwing_a_string(hostile: PluginRunner) -> None:
    assert call(hostile, tool_source("throw 'boom';")) == failed(RUNTIME_FAILED)
    assert_healthy(hostile)


def test_throwing_undefined(hostile: PluginRunner) -> None:
    assert call(hostile, tool_source("throw undefined;")) == failed(RUNTIME_FAILED)
    assert_healthy(hostile)


def test_throwing_a_proxy_whose_traps_throw(hostile: PluginRunner) -> None:
    source = tool_source(
        "const trap = () => { throw new Error('trap'); };\n"
        "throw new Proxy({}, { get: trap, has: trap, getOwnPropertyDescriptor: trap,\n"
        "                      getPrototypeOf: trap, ownKeys: trap });"
    )
    assert call(hostile, source) == failed(RUNTIME_FAILED)
    assert_healthy(hostile)


def test_throwing_a_proxy_whose_get_prototype_of_throws(hostile: PluginRunner) -> None:
    source = tool_source(
        "throw new Proxy(new Error('e'), {\n  getPrototypeOf() { throw new Error('trap'); },\n});"
    )
    assert call(hostile, source) == failed(RUNTIME_FAILED)
    assert_healthy(hostile)


def test_throwing_a_proxy_from_setup(hostile: PluginRunner) -> None:
    source = plugin_source(
        "throw new Proxy({}, { getPrototypeOf() { throw new Error('trap'); } });"
    )
    with pytest.raises(WorkerHostError) as caught:
        asyncio.run(hostile.activate(plugin_code(source)))
    assert (caught.value.code, caught.value.message) == (
        "setup_failed",
        "Plugin example.x failed to set up.",
    )
    assert_healthy(hostile)


def test_throwing_an_object_with_a_throwing_tag_getter(hostile: PluginRunner) -> None:
    source = tool_source(
        "throw { get _tag() { throw new Error('getter'); },\n"
        "        get publicMessage() { throw new Error('getter'); }, message: 'secret' };"
    )
    result = call(hostile, source)
    assert result == failed(RUNTIME_FAILED)
    assert_healthy(hostile)


def test_a_getter_tag_is_not_a_plugin_error(hostile: PluginRunner) -> None:
    # Only an own `_tag` data property makes a PluginError; an accessor never runs.
    source = tool_source(
        "const e = new Error('secret');\n"
        "Object.defineProperty(e, '_tag', { get() { return 'PluginError'; } });\n"
        "e.publicMessage = 'must not be shown';\n"
        "throw e;"
    )
    assert call(hostile, source) == failed(RUNTIME_FAILED)
    assert_healthy(hostile)


# ---- timers -----------------------------------------------------------------


@pytest.fixture
def impatient(guest_runtime: GuestRuntime) -> PluginRunner:
    return PluginRunner(guest_runtime, IsolateLimits(cpu_time_ms=300, wall_time_ms=400))


def test_timer_past_the_wall_time_limit(impatient: PluginRunner) -> None:
    source = tool_source("await new Promise((r) => setTimeout(r, 60000)); return 'late';")
    assert call(impatient, source) == failed(TIMED_OUT)
    assert_healthy(impatient)


def test_timer_past_the_wall_time_limit_in_setup(impatient: PluginRunner) -> None:
    source = plugin_source("await new Promise((r) => setTimeout(r, 60000));")
    with pytest.raises(WorkerHostError) as caught:
        asyncio.run(impatient.activate(plugin_code(source)))
    assert (caught.value.code, caught.value.message) == TIMED_OUT
    assert_healthy(impatient)


def test_timers_work(hostile: PluginRunner) -> None:
    source = tool_source(
        "const order = [];\n"
        "const a = new Promise((r) => setTimeout(() => { order.push('slow'); r(); }, 30));\n"
        "const b = new Promise((r) => setTimeout(() => { order.push('fast'); r(); }, 5));\n"
        "await new Promise((r) => setTimeout(r, 10));\n"
        "await Promise.all([a, b]);\n"
        "return order;"
    )
    assert call(hostile, source) == ToolResult(value=["fast", "slow"])


def test_cleared_timer_never_fires(hostile: PluginRunner) -> None:
    source = tool_source(
        "let fired = false;\n"
        "const id = setTimeout(() => { fired = true; }, 1);\n"
        "clearTimeout(id);\n"
        "await new Promise((r) => setTimeout(r, 20));\n"
        "return fired;"
    )
    assert call(hostile, source) == ToolResult(value=False)


def test_timer_left_running_when_execute_returns(hostile: PluginRunner) -> None:
    # The call settles without waiting for it; the isolate is discarded with it.
    source = tool_source("setTimeout(() => { for (;;) {} }, 0); return 'done';")
    assert call(hostile, source) == ToolResult(value="done")
    assert_healthy(hostile)


# ---- floods and concurrency -------------------------------------------------


def test_log_flood_is_bounded(
    plugin_runner: PluginRunner, caplog: pytest.LogCaptureFixture
) -> None:
    # The lines travel in the answer, so they count against max_output_bytes:
    # this runner has the default (8 MiB).
    source = tool_source(
        "for (let i = 0; i < 10000; i++) console.log('line ' + i + ' ' + 'x'.repeat(5000));\n"
        "return 'logged';"
    )
    with caplog.at_level(logging.DEBUG, logger="worker_host.plugin"):
        assert call(plugin_runner, source) == ToolResult(value="logged")
    lines = [r.getMessage() for r in caplog.records if r.name == "worker_host.plugin"]
    # Setup runs twice (activation, then the call's own isolate); only execute logs.
    assert len(lines) == 200
    assert lines[0] == "[example.x] line 0 " + "x" * (1000 - len("line 0 "))
    assert all(len(line) == len("[example.x] ") + 1000 for line in lines)
    assert_healthy(plugin_runner)


def test_a_looping_call_does_not_hold_up_concurrent_calls(hostile: PluginRunner) -> None:
    looping = plugin_code(tool_source("for (;;) {}"))
    ordinary = [plugin_code(tool_source(f"return {n};")) for n in range(4)]

    async def together() -> list[ToolResult]:
        return list(
            await asyncio.gather(
                activate_and_call(hostile, looping, {}),
                *(activate_and_call(hostile, code, {}) for code in ordinary),
            )
        )

    assert asyncio.run(together()) == [
        failed(CPU_TIME_EXCEEDED),
        *(ToolResult(value=n) for n in range(4)),
    ]
    assert_healthy(hostile)


# ---- a trapped isolate is discarded -----------------------------------------


def test_isolate_used_after_a_trap_is_closed(guest_runtime: GuestRuntime) -> None:
    isolate = Isolate(guest_runtime, HOSTILE_LIMITS)
    with pytest.raises(IsolateFault) as trapped:
        isolate.load(plugin_source("", prefix="for (;;) {}"))
    assert (trapped.value.code, trapped.value.message) == CPU_TIME_EXCEEDED
    with pytest.raises(IsolateFault) as closed:
        isolate.call({"op": "setup", "activation": {}, "options": {}})
    assert (closed.value.code, closed.value.message) == (
        "isolate_closed",
        "The isolate was already discarded.",
    )
    with pytest.raises(IsolateFault) as again:
        isolate.load(tool_source("return 1;"))
    assert again.value.code == "isolate_closed"
    isolate.close()
    isolate.close()


def test_isolate_used_after_running_out_of_memory_is_closed(guest_runtime: GuestRuntime) -> None:
    with Isolate(guest_runtime, HOSTILE_LIMITS) as isolate:
        with pytest.raises(IsolateFault) as trapped:
            isolate.load(plugin_source("", prefix="new ArrayBuffer(1e9);"))
        assert (trapped.value.code, trapped.value.message) == MEMORY_LIMIT_EXCEEDED
        with pytest.raises(IsolateFault) as closed:
            isolate.call({"op": "setup", "activation": {}, "options": {}})
        assert closed.value.code == "isolate_closed"


def test_closed_isolate_refuses_work(guest_runtime: GuestRuntime) -> None:
    isolate = Isolate(guest_runtime, HOSTILE_LIMITS)
    isolate.close()
    with pytest.raises(IsolateFault) as closed:
        isolate.load(tool_source("return 1;"))
    assert (closed.value.code, closed.value.message) == (
        "isolate_closed",
        "The isolate was already discarded.",
    )
