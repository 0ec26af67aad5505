"""Turns through real bundles in real isolates: events, hooks, approvals, a
running tool's context, permission hiding and agents.

Every plugin here is an inline ES module served by the loopback HTTPS server
and pinned through the embedding API. Hooks and tools leave evidence in the
session workspace (`log.txt`) through `context.workspaceFiles`.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from sdk import build_bundle
from tests.support.https_server import LoopbackServer, ThrowawayCA
from tests.worker_host.turn_bundles import (
    ALLOW,
    ALLOW_RULE,
    Env,
    ScriptedClient,
    SilentClient,
    agent,
    data_dir,
    guest_cache,
    hook,
    is_uuid,
    logging_hook,
    plugin,
    read_log,
    run,
    tool,
    without,
)
from worker_host import (
    Host,
    IsolateLimits,
    PermissionAnswer,
    PermissionRule,
    ToolCall,
    ToolResult,
    TurnFailed,
    WorkerHostError,
)

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
MODEL = {"providerId": "openai", "modelId": "gpt-5-mini"}
INVALID_INPUT = ToolResult(code="invalid_input", message="Tool input validation failed.")
NUMBER_SCHEMA = ("{ type: 'object', properties: { n: { type: 'number' } }, required: ['n'], "
                 "additionalProperties: false }")
ECHO = plugin("p.echo", tool("t", schema=NUMBER_SCHEMA))


@pytest.fixture
def env(tmp_path: Path, tls_ca: ThrowawayCA, https_server: LoopbackServer,
        tmp_path_factory: pytest.TempPathFactory) -> Env:
    return Env(data_dir(tmp_path, guest_cache(tmp_path_factory)), tls_ca.ca_file, https_server)


def terminal(turn_id: str, outcome: dict[str, Any]) -> dict[str, Any]:
    return {"type": "turn.terminal", "turnId": turn_id, "outcome": outcome}


def failed(turn_id: str, code: str, message: str) -> dict[str, Any]:
    return {"kind": "failed", "turnId": turn_id, "fault": {"code": code, "message": message}}


def requested(turn_id: str, call_id: str, tool_id: str = "t") -> dict[str, Any]:
    return {"type": "tool.requested", "turnId": turn_id, "toolId": tool_id, "toolCallId": call_id}


def resolved(turn_id: str, call_id: str, decision: str, source: str, tool_id: str = "t",
             **extra: Any) -> dict[str, Any]:
    """An `approval.resolved` event without its random `requestId`."""
    return {"type": "approval.resolved", "turnId": turn_id, "toolId": tool_id,
            "toolCallId": call_id, "decision": decision, "source": source, **extra}


def completed(turn_id: str, call_id: str, ok: bool = True, tool_id: str = "t") -> dict[str, Any]:
    return {"type": "tool.completed", "turnId": turn_id, "toolId": tool_id,
            "toolCallId": call_id, "ok": ok}


# ---- turns and events ----------------------------------------------------------------


def test_begin_turn_records_turn_started_then_runs_turn_before(env: Env) -> None:
    source = plugin("p.turn", hook(
        "turn.before",
        "await context.workspaceFiles.writeText("
        "{ filePath: '/workspace/turn.json', content: JSON.stringify(input) });"))

    async def scenario() -> None:
        async with Host(env.config()) as host:
            session = await env.session(host, ("p.turn", source))
            turn = await session.begin_turn("hello there", model=MODEL)
            assert json.loads((session.workspace / "turn.json").read_text()) == {
                "turnId": turn.id,
                "prompt": [{"type": "text", "text": "hello there"}],
                "model": MODEL,
            }
            assert turn.events() == [{"type": "turn.started", "turnId": turn.id, "model": MODEL}]
            assert turn.outcome is None

    run(scenario)


def test_turn_started_is_recorded_before_a_throwing_turn_before_hook(env: Env) -> None:
    source = plugin("p.turn", hook(
        "turn.before", "throw new PluginError({ message: 'secret', publicMessage: ' No. ' });"))

    async def scenario() -> None:
        async with Host(env.config()) as host:
            session = await env.session(host, ("p.turn", source))
            with pytest.raises(TurnFailed) as caught:
                await session.begin_turn("hi", model=MODEL)
            (started, last) = session.turn(caught.value.outcome["turnId"]).events()
            turn_id = started["turnId"]
            assert (caught.value.code, caught.value.message) == ("runtime_failed", "No.")
            assert started == {"type": "turn.started", "turnId": turn_id, "model": MODEL}
            assert last == terminal(turn_id, failed(turn_id, "runtime_failed", "No."))

    run(scenario)


def test_model_request_runs_model_request_before_with_iteration_and_messages(env: Env) -> None:
    source = plugin("p.model", hook(
        "model.request.before",
        "await appendLine(context, JSON.stringify(input));"))
    messages = [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]

    async def scenario() -> None:
        async with Host(env.config()) as host:
            session = await env.session(host, ("p.model", source))
            turn = await session.begin_turn("hi", model=MODEL)
            await turn.model_request(0, messages, system_prompt="Be brief.")
            await turn.model_request(1, messages)
            first, second = (json.loads(line) for line in read_log(session))
            assert first == {"turnId": turn.id, "providerId": "openai", "modelId": "gpt-5-mini",
                             "iteration": 0, "messages": messages, "systemPrompt": "Be brief."}
            assert second == {"turnId": turn.id, "providerId": "openai",
                              "modelId": "gpt-5-mini", "iteration": 1, "messages": messages}

    run(scenario)


def test_call_tools_records_events_in_order_and_runs_after_hooks(env: Env) -> None:
    source = plugin(
        "p.tools",
        tool("t", "return { n: input.n * 10 };", schema=NUMBER_SCHEMA),
        tool("u", "return 'u' + input.n;", schema=NUMBER_SCHEMA),
        hook("tool.execute.after", "await appendLine(context, JSON.stringify(input));"),
    )

    async def scenario() -> None:
        async with Host(env.config()) as host:
            session = await env.session(host, ("p.tools", source), rules=[ALLOW])
            turn = await session.begin_turn("go", model=MODEL)
            results = await turn.call_tools([ToolCall("t", {"n": 1}, id="c1"),
                                             ToolCall("u", {"n": 2}, id="c2")])
            assert results == [ToolResult(value={"n": 10}), ToolResult(value="u2")]
            events = turn.events()
            assert without(events[1:], "requestId") == [
                requested(turn.id, "c1"),
                resolved(turn.id, "c1", "allow", "config"),
                requested(turn.id, "c2", "u"),
                resolved(turn.id, "c2", "allow", "config", "u"),
                completed(turn.id, "c1"),
                completed(turn.id, "c2", tool_id="u"),
            ]
            assert all(is_uuid(event["requestId"]) for event in events
                       if event["type"] == "approval.resolved")
            assert [json.loads(line) for line in read_log(session)] == [
                {"turnId": turn.id, "toolId": "t", "toolCallId": "c1", "input": {"n": 1},
                 "ok": True, "result": {"n": 10}},
                {"turnId": turn.id, "toolId": "u", "toolCallId": "c2", "input": {"n": 2},
                 "ok": True, "result": "u2"},
            ]

    run(scenario)


def test_after_hooks_run_only_for_calls_that_executed(env: Env) -> None:
    source = plugin(
        "p.tools",
        tool("t", "if (input.n < 0) throw new PluginError({ message: 'x', publicMessage: 'Neg.' });"
                  " return input.n;", schema=NUMBER_SCHEMA),
        hook("tool.execute.after",
             "await appendLine(context, input.toolCallId + ' ' + JSON.stringify(input.result));"),
    )

    async def scenario() -> None:
        async with Host(env.config()) as host:
            session = await env.session(host, ("p.tools", source), rules=[ALLOW])
            turn = await session.begin_turn("go", model=MODEL)
            results = await turn.call_tools([
                ToolCall("t", {"n": 1}, id="ran"),
                ToolCall("t", {"n": "one"}, id="invalid"),
                ToolCall("t", {"n": -1}, id="threw"),
                ToolCall("nope", {}, id="unknown"),
            ])
            assert results == [
                ToolResult(value=1),
                INVALID_INPUT,
                ToolResult(code="runtime_failed", message="Neg."),
                ToolResult(code="unknown_tool", message="There is no tool named nope."),
            ]
            assert read_log(session) == ['ran 1', 'threw {"error":"Neg."}']

    run(scenario)


@pytest.mark.parametrize(
    ("hooks", "permissions", "tool_input", "result"),
    [
        ([], None, {"n": "one"}, INVALID_INPUT),
        (["return { input: { n: 'one' } };"], None, {"n": 1}, INVALID_INPUT),
        ([], "throw new PluginError({ message: 'x', publicMessage: 'No target.' });", {"n": 1},
         ToolResult(code="runtime_failed", message="No target.")),
    ],
    ids=["invalid-input", "invalid-replacement", "projector-threw"],
)
def test_every_requested_call_settles_with_tool_completed(
    env: Env, hooks: list[str], permissions: str | None, tool_input: Any, result: ToolResult
) -> None:
    """`tool.requested` records a call and `tool.completed` says it settled,
    "successfully or not": a call that failed before it could run was
    requested too, and must not be left open in the event stream."""
    source = plugin("p.tools", *(hook("tool.execute.before", body) for body in hooks),
                    tool("t", schema=NUMBER_SCHEMA, permissions=permissions))

    async def scenario() -> None:
        async with Host(env.config()) as host:
            session = await env.session(host, ("p.tools", source), rules=[ALLOW])
            turn = await session.begin_turn("go", model=MODEL)
            assert await turn.call_tools([ToolCall("t", tool_input, id="c1")]) == [result]
            events = turn.events()[1:]
            assert events[0] == requested(turn.id, "c1")
            assert events[-1] == completed(turn.id, "c1", ok=False)

    run(scenario)


@pytest.mark.parametrize(
    ("returned", "reason"),
    [
        ("[]", "a non-empty list of projections is required"),
        ("[{ action: 'x', resources: [] }]",
         "resources must be 1 to 64 strings of at most 4096 characters"),
        ("[{ action: 'x', resources: ['*'], save: undefined }]", "it is not plain JSON"),
        ("[{ action: 'x', resources: ['*'], extra: 1 }]", "a projection has an unknown member"),
    ],
)
def test_an_invalid_permissions_answer_fails_the_turn(
    env: Env, returned: str, reason: str
) -> None:
    source = plugin("p.tools", tool("t", "await appendLine(context, 'tool ran'); return 1;",
                                    permissions=f"return {returned};"))

    async def scenario() -> None:
        async with Host(env.config()) as host:
            session = await env.session(host, ("p.tools", source), rules=[ALLOW])
            turn = await session.begin_turn("go", model=MODEL)
            with pytest.raises(TurnFailed) as caught:
                await turn.call_tools([ToolCall("t", {})])
            message = f"The tool's permission projection is invalid: {reason}."
            assert caught.value.outcome == failed(turn.id, "invalid_permissions", message)
            assert turn.events()[-1] == terminal(turn.id, caught.value.outcome)
            assert read_log(session) == []

    run(scenario)


MEET = plugin("p.meet", tool(
    "meet",
    """
    await appendLine(context, 'start ' + input.me, '/workspace/meet/' + input.me);
    let saw = false;
    for (let i = 0; i < 300 && !saw; i++) {
      saw = await exists(context, '/workspace/meet/' + input.other);
      if (!saw) await sleep(10);
    }
    if (input.waitFor) {
      for (let i = 0; i < 300 && !(await exists(context, '/workspace/done-' + input.waitFor)); i++)
        await sleep(10);
    }
    await appendLine(context, 'done ' + input.me);
    await appendLine(context, 'x', '/workspace/done-' + input.me);
    return { me: input.me, sawOther: saw };
    """,
))


def test_approved_calls_execute_concurrently_and_results_keep_the_model_order(env: Env) -> None:
    """Each call waits until the other has started (a rendezvous that can only
    succeed when both run at once), and the first finishes only after the
    second: results still come back in the model's order."""

    async def scenario() -> None:
        async with Host(env.config()) as host:
            session = await env.session(host, ("p.meet", MEET), rules=[ALLOW])
            turn = await session.begin_turn("go", model=MODEL)
            results = await turn.call_tools([
                ToolCall("meet", {"me": "a", "other": "b", "waitFor": "b"}, id="a"),
                ToolCall("meet", {"me": "b", "other": "a"}, id="b"),
            ])
            assert results == [ToolResult(value={"me": "a", "sawOther": True}),
                               ToolResult(value={"me": "b", "sawOther": True})]
            assert read_log(session) == ["done b", "done a"]

    run(scenario)


def test_end_and_cancel_record_the_terminal_event_and_close_the_turn(env: Env) -> None:
    async def scenario() -> None:
        async with Host(env.config()) as host:
            session = await env.session(host, ("p.echo", ECHO), rules=[ALLOW])
            ended = await session.begin_turn("one", model=MODEL)
            outcome = await ended.end("All done.")
            assert outcome == {"kind": "completed", "turnId": ended.id, "text": "All done."}
            assert ended.outcome == outcome
            assert ended.events()[-1] == terminal(ended.id, outcome)

            cancelled = await session.begin_turn("two", model=MODEL)
            reason = await cancelled.cancel("user stopped")
            assert reason == {"kind": "cancelled", "turnId": cancelled.id,
                              "reason": "user stopped"}
            bare = await session.begin_turn("three", model=MODEL)
            assert await bare.cancel() == {"kind": "cancelled", "turnId": bare.id}

            for turn in (ended, cancelled, bare):
                count = len(turn.events())
                attempts = [turn.call_tools([ToolCall("t", {"n": 1})]),
                            turn.model_request(0, []), turn.end(), turn.cancel()]
                for attempt in attempts:
                    with pytest.raises(WorkerHostError) as caught:
                        await attempt
                    assert (caught.value.code, caught.value.message) == (
                        "turn_ended", f"Turn {turn.id} has already ended.")
                assert len(turn.events()) == count

    run(scenario)


def test_a_turn_reloaded_by_another_host_continues_its_events(env: Env) -> None:
    async def first() -> str:
        async with Host(env.config()) as host:
            session = await env.session(host, ("p.echo", ECHO), rules=[ALLOW])
            turn = await session.begin_turn("go", model=MODEL)
            await turn.call_tools([ToolCall("t", {"n": 1}, id="c1")])
            return turn.id

    turn_id = run(first)

    async def second() -> None:
        async with Host(env.config()) as host:
            session = host.session("s")
            turn = session.turn(turn_id)
            assert (turn.id, turn.model, turn.outcome) == (turn_id, MODEL, None)
            assert [event["type"] for event in turn.events()] == [
                "turn.started", "tool.requested", "approval.resolved", "tool.completed"]
            assert await turn.call_tools([ToolCall("t", {"n": 2}, id="c2")]) == [
                ToolResult(value={"n": 2})]
            await turn.end("bye")
            assert without(turn.events()[4:], "requestId") == [
                requested(turn_id, "c2"), resolved(turn_id, "c2", "allow", "config"),
                completed(turn_id, "c2"),
                terminal(turn_id, {"kind": "completed", "turnId": turn_id, "text": "bye"}),
            ]
            with pytest.raises(WorkerHostError) as caught:
                session.turn("no-such-turn")
            assert (caught.value.code, caught.value.message) == (
                "turn_not_found", "Session s has no turn 'no-such-turn'.")

    run(second)


def test_a_reloaded_turn_keeps_the_agent_it_began_with(env: Env) -> None:
    """The Turn's active Agent selects its tools and layers its rules; a Turn
    continued by another process must not silently switch to the default."""
    source = plugin(
        "p.agents",
        tool("a"), tool("b"),
        agent("narrow", tools={"mode": "include", "names": ["a"]}),
        agent("wide"),
    )

    async def scenario() -> None:
        async with Host(env.config()) as host:
            session = await env.session(host, ("p.agents", source), rules=[ALLOW])
            turn = await session.begin_turn("go", model=MODEL, agent="wide")
            assert [t.id for _, t in turn.tools()] == ["a", "b"]
            again = session.turn(turn.id)
            assert [t.id for _, t in again.tools()] == ["a", "b"]
            assert await again.call_tools([ToolCall("b", {})]) == [ToolResult(value={})]

    run(scenario)


# ---- hooks ----------------------------------------------------------------------------


def test_hooks_run_host_first_then_session_in_plugin_then_registration_order(
    env: Env,
) -> None:
    names = ("turn.before", "model.request.before", "tool.execute.before", "tool.execute.after")

    def hooks_of(plugin_id: str) -> list[str]:
        return [logging_hook(name, f"{plugin_id} {name} {n}") for name in names for n in (1, 2)]

    host_plugins = tuple(env.host_plugin(pid, plugin(pid, *hooks_of(pid)))
                         for pid in ("h.one", "h.two"))
    config = env.config(host_plugins=host_plugins, permissions=ALLOW_RULE)

    async def scenario() -> None:
        async with Host(config) as host:
            session = await env.session(
                host, ("s.one", plugin("s.one", *hooks_of("s.one"))),
                ("s.two", plugin("s.two", *hooks_of("s.two"), tool("t"))))
            turn = await session.begin_turn("go", model=MODEL)
            await turn.model_request(0, [])
            assert await turn.call_tools([ToolCall("t", {"k": 1})]) == [
                ToolResult(value={"k": 1})]
            expected = [f"{pid} {name} {n}" for name in names
                        for pid in ("h.one", "h.two", "s.one", "s.two") for n in (1, 2)]
            assert read_log(session) == expected

    run(scenario)


def test_a_replaced_input_is_what_later_hooks_permissions_and_execute_see(env: Env) -> None:
    source = plugin(
        "p.replace",
        hook("tool.execute.before", "return { input: { n: input.input.n + 1 } };"),
        hook("tool.execute.before", "await appendLine(context, 'second sees ' + input.input.n);"),
        tool("t", "return { executed: input.n, authorized: ctx.permissions };",
             schema=NUMBER_SCHEMA,
             permissions="return [{ action: 'count', resources: [String(input.n)] }];"),
    )

    async def scenario() -> None:
        async with Host(env.config()) as host:
            session = await env.session(host, ("p.replace", source),
                                        rules=[("count", "2", "allow")])
            turn = await session.begin_turn("go", model=MODEL)
            assert await turn.call_tools([ToolCall("t", {"n": 1}, id="c1")]) == [
                ToolResult(value={"executed": 2,
                                  "authorized": [{"action": "count", "resources": ["2"]}]})]
            assert read_log(session) == ["second sees 2"]
            assert without(turn.events()[1:3], "requestId") == [
                requested(turn.id, "c1"), resolved(turn.id, "c1", "allow", "config")]

    run(scenario)


def test_an_invalid_replacement_fails_the_call_skips_later_hooks_and_never_runs_the_tool(
    env: Env,
) -> None:
    source = plugin(
        "p.replace",
        hook("tool.execute.before", "return { input: { n: 'not a number' } };"),
        logging_hook("tool.execute.before", "later hook ran"),
        logging_hook("tool.execute.after", "after hook ran"),
        tool("t", "await appendLine(context, 'tool ran'); return 1;", schema=NUMBER_SCHEMA),
    )

    async def scenario() -> None:
        async with Host(env.config()) as host:
            session = await env.session(host, ("p.replace", source), rules=[ALLOW])
            turn = await session.begin_turn("go", model=MODEL)
            assert await turn.call_tools([ToolCall("t", {"n": 1}, id="c1")]) == [INVALID_INPUT]
            assert read_log(session) == []
            assert "approval.resolved" not in [event["type"] for event in turn.events()]
            assert turn.outcome is None
            await turn.end()

    run(scenario)


def test_a_replacement_present_as_undefined_is_validated_like_any_other(env: Env) -> None:
    """"Core uses it whenever the property is present, even when its value is
    `undefined`, and validates it ... again": the call fails its input
    validation; the hook did not fail."""
    source = plugin(
        "p.replace",
        hook("tool.execute.before", "return { input: undefined };"),
        tool("t", "await appendLine(context, 'tool ran'); return 1;", schema=NUMBER_SCHEMA),
    )

    async def scenario() -> None:
        async with Host(env.config()) as host:
            session = await env.session(host, ("p.replace", source), rules=[ALLOW])
            turn = await session.begin_turn("go", model=MODEL)
            assert await turn.call_tools([ToolCall("t", {"n": 1})]) == [INVALID_INPUT]
            assert turn.outcome is None
            assert read_log(session) == []

    run(scenario)


@pytest.mark.parametrize(
    ("returned", "message"),
    [
        ("42", "A tool.execute.before hook returned something other than nothing or "
               "{input, approval}."),
        ("'allow'", "A tool.execute.before hook returned something other than nothing or "
                    "{input, approval}."),
        ("[{ approval: 'allow' }]", "A tool.execute.before hook returned something other than "
                                    "nothing or {input, approval}."),
        ("{ approval: 'maybe' }", "A tool.execute.before hook answered an approval other than "
                                  "allow or deny."),
        ("{ approval: 'ask' }", "A tool.execute.before hook answered an approval other than "
                                "allow or deny."),
    ],
)
def test_a_malformed_before_hook_result_fails_the_turn(
    env: Env, returned: str, message: str
) -> None:
    source = plugin(
        "p.bad",
        hook("tool.execute.before", f"return {returned};"),
        tool("t", "await appendLine(context, 'tool ran'); return 1;"),
    )

    async def scenario() -> None:
        async with Host(env.config()) as host:
            session = await env.session(host, ("p.bad", source), rules=[ALLOW])
            turn = await session.begin_turn("go", model=MODEL)
            with pytest.raises(TurnFailed) as caught:
                await turn.call_tools([ToolCall("t", {})])
            assert caught.value.outcome == failed(turn.id, "runtime_failed", message)
            assert turn.events()[-1] == terminal(turn.id, caught.value.outcome)
            assert read_log(session) == []

    run(scenario)


@pytest.mark.parametrize(
    ("thrown", "message"),
    [
        ("new PluginError({ message: 'secret', publicMessage: '\\n  Try again later.  ' })",
         "Try again later."),
        ("new PluginError({ message: 'secret', publicMessage: 'x'.repeat(5000) })", "x" * 4096),
        ("new PluginError({ message: 'secret', publicMessage: '   ' })",
         "The {hook} hook of p.throw failed."),
        ("new PluginError({ message: 'secret' })", "The {hook} hook of p.throw failed."),
        ("new Error('secret')", "The {hook} hook of p.throw failed."),
    ],
)
@pytest.mark.parametrize("hook_name", ["tool.execute.before", "tool.execute.after",
                                       "model.request.before"])
def test_a_throwing_hook_fails_the_turn_with_its_public_message(
    env: Env, hook_name: str, thrown: str, message: str
) -> None:
    source = plugin("p.throw", hook(hook_name, f"throw {thrown};"), tool("t"))
    message = message.replace("{hook}", hook_name)

    async def scenario() -> None:
        async with Host(env.config()) as host:
            session = await env.session(host, ("p.throw", source), rules=[ALLOW])
            turn = await session.begin_turn("go", model=MODEL)
            with pytest.raises(TurnFailed) as caught:
                if hook_name == "model.request.before":
                    await turn.model_request(0, [])
                else:
                    await turn.call_tools([ToolCall("t", {})])
            assert (caught.value.code, caught.value.message) == ("runtime_failed", message)
            assert turn.outcome == failed(turn.id, "runtime_failed", message)
            assert "secret" not in json.dumps(turn.events())

    run(scenario)


def test_a_deny_from_any_hook_wins_over_allow_and_over_configured_allow(env: Env) -> None:
    source = plugin(
        "p.hooks",
        hook("tool.execute.before", "return { approval: 'allow' };"),
        hook("tool.execute.before", "return input.toolId === 't' ? { approval: 'deny' } : {};"),
        hook("tool.execute.before", "return { approval: 'allow' };"),
        tool("t", "await appendLine(context, 'tool ran'); return 1;"),
    )

    async def scenario() -> None:
        async with Host(env.config()) as host:
            session = await env.session(host, ("p.hooks", source), rules=[ALLOW])
            turn = await session.begin_turn("go", model=MODEL)
            with pytest.raises(TurnFailed) as caught:
                await turn.call_tools([ToolCall("t", {}, id="c1")])
            assert caught.value.outcome == failed(turn.id, "tool_denied",
                                                  "Permission to run t was denied.")
            assert without(turn.events()[1:], "requestId") == [
                requested(turn.id, "c1"),
                resolved(turn.id, "c1", "deny", "hook"),
                terminal(turn.id, caught.value.outcome),
            ]
            assert read_log(session) == []

    run(scenario)


def test_a_hook_allow_never_overrides_a_configured_deny(env: Env) -> None:
    source = plugin(
        "p.hooks",
        hook("tool.execute.before", "return { approval: 'allow' };"),
        tool("t", "return 1;", permissions="return [{ action: 'deploy', resources: ['prod'] }];"),
    )

    async def scenario() -> None:
        async with Host(env.config(permissions=(PermissionRule("deploy", "prod", "deny"),))) \
                as host:
            session = await env.session(host, ("p.hooks", source))
            turn = await session.begin_turn("go", model=MODEL)
            with pytest.raises(TurnFailed) as caught:
                await turn.call_tools([ToolCall("t", {}, id="c1")])
            assert caught.value.code == "tool_denied"
            assert without(turn.events()[2:3], "requestId") == [
                resolved(turn.id, "c1", "deny", "config")]

    run(scenario)


# ---- approvals ---------------------------------------------------------------------------

DEPLOY = plugin("p.deploy", tool(
    "deploy", "return 'deployed ' + input.env;",
    schema="{ type: 'object', properties: { env: { type: 'string' } }, required: ['env'] }",
    permissions="return [{ action: 'deploy', resources: [input.env], save: [input.env], "
                "metadata: { target: input.env } }];",
))
NO_SAVE = plugin("p.nosave", tool(
    "t", "return 'ran';", permissions="return [{ action: 'poke', resources: ['thing'] }];"))


def test_configured_allow_and_deny_resolve_from_config(env: Env) -> None:
    async def scenario() -> None:
        async with Host(env.config()) as host:
            rules = [("deploy", "*", "allow"), ("deploy", "prod", "deny")]
            session = await env.session(host, ("p.deploy", DEPLOY), rules=rules)
            turn = await session.begin_turn("go", model=MODEL)
            assert await turn.call_tools([ToolCall("deploy", {"env": "dev"}, id="c1")]) == [
                ToolResult(value="deployed dev")]
            with pytest.raises(TurnFailed) as caught:
                await turn.call_tools([ToolCall("deploy", {"env": "prod"}, id="c2")])
            assert caught.value.code == "tool_denied"
            assert [(e["toolCallId"], e["decision"], e["source"]) for e in turn.events()
                    if e["type"] == "approval.resolved"] == [("c1", "allow", "config"),
                                                               ("c2", "deny", "config")]

    run(scenario)


def test_an_always_reply_saves_the_patterns_for_later_turns(env: Env) -> None:
    async def first() -> ScriptedClient:
        client = ScriptedClient(replies=[PermissionAnswer("always")])
        async with Host(env.config()) as host:
            session = await env.session(host, ("p.deploy", DEPLOY))
            turn = await session.begin_turn("go", model=MODEL, client=client)
            results = await turn.call_tools([ToolCall("deploy", {"env": "dev"}, id="c1"),
                                             ToolCall("deploy", {"env": "dev"}, id="c2")])
            assert results == [ToolResult(value="deployed dev")] * 2
            events = turn.events()
            (asked,) = [e for e in events if e["type"] == "approval.requested"]
            assert asked == {
                "type": "approval.requested", "turnId": turn.id, "toolId": "deploy",
                "toolCallId": "c1", "request": client.permission_requests[0]}
            assert client.permission_requests[0] == {
                "id": client.permission_requests[0]["id"], "sessionId": "s", "turnId": turn.id,
                "toolId": "deploy", "toolCallId": "c1", "action": "deploy",
                "resources": ["dev"], "save": ["dev"], "metadata": {"target": "dev"}}
            approvals = [e for e in events if e["type"] == "approval.resolved"]
            assert approvals[0]["requestId"] == client.permission_requests[0]["id"]
            assert without(approvals, "requestId") == [
                resolved(turn.id, "c1", "allow", "callback", "deploy", reply="always"),
                resolved(turn.id, "c2", "allow", "saved", "deploy"),
            ]
            return client

    run(first)

    async def later() -> None:
        client = ScriptedClient(replies=[PermissionAnswer("once")])
        async with Host(env.config()) as host:
            session = host.session("s")
            turn = await session.begin_turn("again", model=MODEL, client=client)
            await turn.call_tools([ToolCall("deploy", {"env": "dev"}, id="c3"),
                                   ToolCall("deploy", {"env": "prod"}, id="c4")])
            assert [(e["toolCallId"], e["source"], e.get("reply")) for e in turn.events()
                    if e["type"] == "approval.resolved"] == [("c3", "saved", None),
                                                               ("c4", "callback", "once")]
            assert [r["resources"] for r in client.permission_requests] == [["prod"]]

    run(later)


def test_an_always_reply_without_save_patterns_acts_like_once(env: Env) -> None:
    async def scenario() -> None:
        client = ScriptedClient(replies=[PermissionAnswer("always"), PermissionAnswer("once")])
        async with Host(env.config()) as host:
            session = await env.session(host, ("p.nosave", NO_SAVE))
            turn = await session.begin_turn("go", model=MODEL, client=client)
            await turn.call_tools([ToolCall("t", {}, id="c1"), ToolCall("t", {}, id="c2")])
            assert "save" not in client.permission_requests[0]
            assert [(e["source"], e.get("reply")) for e in turn.events()
                    if e["type"] == "approval.resolved"] == [("callback", "always"),
                                                               ("callback", "once")]

    run(scenario)


def test_a_hook_allow_resolves_a_request_that_would_ask(env: Env) -> None:
    source = plugin("p.hook", hook("tool.execute.before", "return { approval: 'allow' };"),
                    tool("t", "return 'ran';"))

    async def scenario() -> None:
        client = ScriptedClient()
        async with Host(env.config()) as host:
            session = await env.session(host, ("p.hook", source))
            turn = await session.begin_turn("go", model=MODEL, client=client)
            assert await turn.call_tools([ToolCall("t", {}, id="c1")]) == [
                ToolResult(value="ran")]
            assert client.permission_requests == []
            assert without(turn.events()[1:], "requestId") == [
                requested(turn.id, "c1"), resolved(turn.id, "c1", "allow", "hook"),
                completed(turn.id, "c1")]

    run(scenario)


def test_client_replies_once_and_reject_with_a_message(env: Env) -> None:
    async def scenario() -> None:
        client = ScriptedClient(replies=[PermissionAnswer("once"),
                                         PermissionAnswer("reject", "Not on a Friday.")])
        async with Host(env.config()) as host:
            session = await env.session(host, ("p.deploy", DEPLOY))
            turn = await session.begin_turn("go", model=MODEL, client=client)
            assert await turn.call_tools([ToolCall("deploy", {"env": "dev"}, id="c1")]) == [
                ToolResult(value="deployed dev")]
            with pytest.raises(TurnFailed) as caught:
                await turn.call_tools([ToolCall("deploy", {"env": "dev"}, id="c2")])
            assert caught.value.outcome == failed(turn.id, "tool_denied",
                                                  "Permission to run deploy was denied.")
            approvals = [e for e in turn.events() if e["type"] == "approval.resolved"]
            assert without(approvals, "requestId") == [
                resolved(turn.id, "c1", "allow", "callback", "deploy", reply="once"),
                resolved(turn.id, "c2", "deny", "callback", "deploy", reply="reject",
                         replyMessage="Not on a Friday."),
            ]
            assert [a["requestId"] for a in approvals] == [
                r["id"] for r in client.permission_requests]
            assert turn.events()[-1] == terminal(turn.id, caught.value.outcome)

    run(scenario)


@pytest.mark.parametrize("client", [None, ScriptedClient(replies=[None])],
                         ids=["no-client", "client-cannot-answer"])
def test_a_request_no_one_answers_is_denied_by_default(
    env: Env, client: ScriptedClient | None
) -> None:
    async def scenario() -> None:
        async with Host(env.config()) as host:
            session = await env.session(host, ("p.deploy", DEPLOY))
            turn = await session.begin_turn("go", model=MODEL, client=client)
            with pytest.raises(TurnFailed) as caught:
                await turn.call_tools([ToolCall("deploy", {"env": "dev"}, id="c1")])
            assert caught.value.outcome == failed(turn.id, "tool_denied",
                                                  "Permission to run deploy was denied.")
            assert [e["type"] for e in turn.events()] == [
                "turn.started", "tool.requested", "approval.requested", "approval.resolved",
                "turn.terminal"]
            assert without(turn.events()[3:4], "requestId") == [
                resolved(turn.id, "c1", "deny", "default", "deploy")]

    run(scenario)


def test_an_unanswered_request_reaches_the_approval_wait_limit(env: Env) -> None:
    async def scenario() -> None:
        client = SilentClient()
        async with Host(env.config(approval_wait_ms=50)) as host:
            session = await env.session(host, ("p.deploy", DEPLOY))
            turn = await session.begin_turn("go", model=MODEL, client=client)
            with pytest.raises(TurnFailed) as caught:
                await turn.call_tools([ToolCall("deploy", {"env": "dev"}, id="c1")])
            outcome = {
                "kind": "limit_reached", "turnId": turn.id,
                "limit": {"name": "approval_wait", "origin": "configured", "value": 50,
                          "unit": "milliseconds"},
                "diagnostic": {"code": "approval_wait_limit_reached",
                               "message": "No answer to the permission request for deploy "
                                          "within 50 ms."},
            }
            assert caught.value.outcome == outcome
            assert caught.value.code == "approval_wait_limit_reached"
            assert client.asked == 1
            assert without(turn.events()[3:], "requestId") == [
                resolved(turn.id, "c1", "deny", "timeout", "deploy"), terminal(turn.id, outcome)]

    run(scenario)


def test_the_contract_approval_hook_example(env: Env, tmp_path: Path) -> None:
    """Its hook auto-allows a call the rules would ask about; a configured
    deny still wins."""
    bundle = build_bundle(EXAMPLES / "approval-hook" / "plugin.mjs", tmp_path / "hook.mjs")
    deny = (PermissionRule("double", "*", "deny"), PermissionRule("double", "other", "allow"))

    async def scenario() -> None:
        client = ScriptedClient()
        async with Host(env.config()) as host:
            session = await env.session(host, ("example.approval-hook", bundle))
            turn = await session.begin_turn("double two", model=MODEL, client=client)
            assert await turn.call_tools([ToolCall("double", {"value": 2}, id="c1")]) == [
                ToolResult(value={"value": 4})]
            assert client.permission_requests == []
            assert without(turn.events()[2:3], "requestId") == [
                resolved(turn.id, "c1", "allow", "hook", "double")]
        async with Host(env.config(permissions=deny)) as host:
            session = host.session("s")
            assert [t.name for t in session.tools()] == ["double"]
            turn = await session.begin_turn("double two", model=MODEL, client=client)
            with pytest.raises(TurnFailed) as caught:
                await turn.call_tools([ToolCall("double", {"value": 2}, id="c2")])
            assert caught.value.outcome == failed(turn.id, "tool_denied",
                                                  "Permission to run double was denied.")
            assert without(turn.events()[2:3], "requestId") == [
                resolved(turn.id, "c2", "deny", "config", "double")]

    run(scenario)


# ---- a running tool's context --------------------------------------------------------------

ARTIFACT = {"id": "1b4e28ba-2fa1-4d3b-a3f5-ef1d6f2c6e41", "path": "out/log.txt",
            "observedBytes": 300, "state": "complete"}


def test_report_activity_emits_progress_and_keeps_the_latest_snapshot(env: Env) -> None:
    updates = [
        {"message": "Starting", "observedBytes": 0, "truncated": False},
        {"preview": "line 1\n", "observedBytes": 7, "truncated": False},
        {"message": "Done", "preview": "tail", "observedBytes": 300, "truncated": True,
         "artifact": ARTIFACT},
    ]
    source = plugin("p.activity", tool(
        "t", f"for (const update of {json.dumps(updates)}) await ctx.reportActivity(update);"
             " return 'ok';"))

    async def scenario() -> None:
        async with Host(env.config()) as host:
            session = await env.session(host, ("p.activity", source), rules=[ALLOW])
            turn = await session.begin_turn("go", model=MODEL)
            assert await turn.call_tools([ToolCall("t", {}, id="c1")]) == [
                ToolResult(value="ok")]
            progress = [e for e in turn.events() if e["type"] == "tool.progress"]
            base = {"type": "tool.progress", "turnId": turn.id, "toolId": "t",
                    "toolCallId": "c1"}
            assert progress == [
                {**base, "checkpoint": 1, "observedBytes": 0, "truncated": False},
                {**base, "checkpoint": 2, "observedBytes": 7, "truncated": False},
                {**base, "checkpoint": 3, "observedBytes": 300, "truncated": True,
                 "artifactState": "complete"},
            ]
            assert turn.activity == {"c1": updates[-1]}

    run(scenario)


@pytest.mark.parametrize(
    ("update", "message"),
    [
        ("{ observedBytes: 1 }", "reportActivity: truncated must be a boolean"),
        ("{ observedBytes: -1, truncated: false }",
         "reportActivity: observedBytes must be a non-negative safe integer"),
        ("{ observedBytes: 1.5, truncated: false }",
         "reportActivity: observedBytes must be a non-negative safe integer"),
        ("{ observedBytes: 1, truncated: false, message: 'm'.repeat(1025) }",
         "reportActivity: message must be a string of at most 1024 characters"),
        ("{ observedBytes: 1, truncated: false, preview: 'p'.repeat(50 * 1024 + 1) }",
         "reportActivity: preview must be a string of at most 50 KiB"),
        ("{ observedBytes: 1, truncated: false, colour: 'red' }",
         "reportActivity: unknown member 'colour'"),
        ("{ observedBytes: 1, truncated: false, message: undefined }",
         "reportActivity.message is undefined"),
        ("{ observedBytes: 1, truncated: false, artifact: { ...ARTIFACT, id: 'not-a-uuid' } }",
         "reportActivity: artifact must have a UUID id, a normalized relative path, "
         "observedBytes and state"),
        ("{ observedBytes: 1, truncated: false, artifact: { ...ARTIFACT, path: '../x' } }",
         "reportActivity: artifact must have a UUID id, a normalized relative path, "
         "observedBytes and state"),
        ("'busy'", "reportActivity: the update must be an object"),
    ],
)
def test_a_malformed_activity_update_rejects_with_a_plugin_error(
    env: Env, update: str, message: str
) -> None:
    source = plugin("p.activity", tool(
        "t", f"const ARTIFACT = {json.dumps(ARTIFACT)};"
             f" try {{ await ctx.reportActivity({update}); return 'accepted'; }}"
             " catch (e) { return describe(e); }"))

    async def scenario() -> None:
        async with Host(env.config()) as host:
            session = await env.session(host, ("p.activity", source), rules=[ALLOW])
            turn = await session.begin_turn("go", model=MODEL)
            assert await turn.call_tools([ToolCall("t", {}, id="c1")]) == [ToolResult(value={
                "tag": "PluginError", "code": None, "message": message, "publicMessage": None})]
            assert "tool.progress" not in [e["type"] for e in turn.events()]
            assert turn.activity == {}

    run(scenario)


QUESTION = {"question": "Ship it now?", "header": "Ship",
            "options": [{"label": "Yes", "description": "Ship now."},
                        {"label": "No", "description": ""}]}
ASKING = plugin("p.ask", tool("ask", f"return await ctx.askQuestion([{json.dumps(QUESTION)}]);"))
CATCHING = plugin("p.ask", tool(
    "ask", f"try {{ return await ctx.askQuestion([{json.dumps(QUESTION)}]); }}"
           " catch (e) { return describe(e); }"))


def test_ask_question_answered_by_the_client(env: Env) -> None:
    async def scenario() -> None:
        client = ScriptedClient(answers=[[["Yes"]]])
        async with Host(env.config()) as host:
            session = await env.session(host, ("p.ask", ASKING), rules=[ALLOW])
            turn = await session.begin_turn("go", model=MODEL, client=client)
            assert await turn.call_tools([ToolCall("ask", {}, id="c1")]) == [
                ToolResult(value=[["Yes"]])]
            (request,) = client.question_requests
            assert request == {"id": request["id"], "sessionId": "s", "turnId": turn.id,
                               "toolId": "ask", "toolCallId": "c1", "questions": [QUESTION]}
            assert is_uuid(request["id"])
            base = {"turnId": turn.id, "toolId": "ask", "toolCallId": "c1"}
            assert [e for e in turn.events() if e["type"].startswith("question.")] == [
                {"type": "question.asked", **base, "request": request},
                {"type": "question.replied", **base, "requestId": request["id"],
                 "answers": [["Yes"]]},
            ]

    run(scenario)


@pytest.mark.parametrize("answers", [None, [], [["Yes"], ["No"]], [[""]], [[]]],
                         ids=["dismissed", "no-answers", "too-many", "empty-text", "empty"])
def test_a_dismissed_or_malformed_reply_rejects_with_question_dismissed(
    env: Env, answers: list[list[str]] | None
) -> None:
    async def scenario() -> None:
        client = ScriptedClient(answers=[answers])
        async with Host(env.config()) as host:
            session = await env.session(host, ("p.ask", CATCHING), rules=[ALLOW])
            turn = await session.begin_turn("go", model=MODEL, client=client)
            assert await turn.call_tools([ToolCall("ask", {}, id="c1")]) == [ToolResult(value={
                "tag": "QuestionDismissedError", "code": "question_dismissed",
                "message": "The user dismissed this question.", "publicMessage": None})]
            (request,) = client.question_requests
            assert [e["type"] for e in turn.events() if e["type"].startswith("question.")] == [
                "question.asked", "question.rejected"]
            assert turn.events()[-2] == {"type": "question.rejected", "turnId": turn.id,
                                         "toolId": "ask", "toolCallId": "c1",
                                         "requestId": request["id"]}

    run(scenario)


@pytest.mark.parametrize("client", [None, ScriptedClient(answers=[None])],
                         ids=["no-client", "dismissed"])
def test_an_uncaught_dismissal_fails_the_call_with_question_dismissed(
    env: Env, client: ScriptedClient | None
) -> None:
    async def scenario() -> None:
        async with Host(env.config()) as host:
            session = await env.session(host, ("p.ask", ASKING), rules=[ALLOW])
            turn = await session.begin_turn("go", model=MODEL, client=client)
            assert await turn.call_tools([ToolCall("ask", {}, id="c1")]) == [ToolResult(
                code="question_dismissed", message="The user dismissed this question.")]
            assert [e["type"] for e in turn.events()][-3:] == [
                "question.asked", "question.rejected", "tool.completed"]
            assert turn.outcome is None

    run(scenario)


class SlowAnswer(ScriptedClient):
    """Answers questions only after the plugin call's whole wall-clock budget."""

    async def question(self, request: dict[str, Any]) -> list[list[str]] | None:
        await asyncio.sleep(1.0)
        return await super().question(request)


def test_a_question_waits_for_its_answer_with_no_time_limit(env: Env) -> None:
    """`askQuestion` "waits for the reply with no time limit": a user who
    answers after the isolate's wall-time budget still gets the answer to the
    tool."""
    limits = IsolateLimits(cpu_time_ms=400, wall_time_ms=400)

    async def scenario() -> None:
        client = SlowAnswer(answers=[[["Yes"]]])
        async with Host(env.config(isolate_limits=limits)) as host:
            session = await env.session(host, ("p.ask", ASKING), rules=[ALLOW])
            turn = await session.begin_turn("go", model=MODEL, client=client)
            assert await turn.call_tools([ToolCall("ask", {}, id="c1")]) == [
                ToolResult(value=[["Yes"]])]

    run(scenario)


@pytest.mark.parametrize(
    ("questions", "message"),
    [
        ("[]", "askQuestion: at least one question is required"),
        ("'Ship it?'", "askQuestion: at least one question is required"),
        ("[{ ...Q, header: 'h'.repeat(31) }]",
         "askQuestion: question must be 1 to 4,096 characters and header 1 to 30"),
        ("[{ ...Q, question: '' }]",
         "askQuestion: question must be 1 to 4,096 characters and header 1 to 30"),
        ("[{ ...Q, options: [] }]",
         "askQuestion: options must be at least one {label (1-256), description (<= 4,096)}"),
        ("[{ ...Q, options: [{ label: 'Yes' }] }]",
         "askQuestion: options must be at least one {label (1-256), description (<= 4,096)}"),
        ("[{ ...Q, multiple: 'yes' }]", "askQuestion: multiple must be a boolean"),
        ("[{ ...Q, custom: undefined }]", "askQuestion.questions[0].custom is undefined"),
        ("[{ ...Q, colour: 'red' }]",
         "askQuestion: each question must be {question, header, options, multiple?, custom?}"),
    ],
)
def test_invalid_prompts_reject_with_a_plugin_error(
    env: Env, questions: str, message: str
) -> None:
    source = plugin("p.ask", tool(
        "ask", f"const Q = {json.dumps(QUESTION)};"
               f" try {{ return await ctx.askQuestion({questions}); }}"
               " catch (e) { return describe(e); }"))

    async def scenario() -> None:
        client = ScriptedClient(answers=[[["Yes"]]])
        async with Host(env.config()) as host:
            session = await env.session(host, ("p.ask", source), rules=[ALLOW])
            turn = await session.begin_turn("go", model=MODEL, client=client)
            assert await turn.call_tools([ToolCall("ask", {})]) == [ToolResult(value={
                "tag": "PluginError", "code": None, "message": message, "publicMessage": None})]
            assert client.question_requests == []
            assert not [e for e in turn.events() if e["type"].startswith("question.")]

    run(scenario)


def test_report_journal_rejects_with_a_plugin_error(env: Env) -> None:
    source = plugin(
        "p.journal",
        tool("caught", "try { await ctx.reportJournal({ kind: 'fact', data: {} });"
                       " return 'stored'; } catch (e) { return describe(e); }"),
        tool("uncaught", "await ctx.reportJournal({ kind: 'fact', data: {} }); return 'stored';"),
    )

    async def scenario() -> None:
        async with Host(env.config()) as host:
            session = await env.session(host, ("p.journal", source), rules=[ALLOW])
            turn = await session.begin_turn("go", model=MODEL)
            assert await turn.call_tools([ToolCall("caught", {}), ToolCall("uncaught", {})]) == [
                ToolResult(value={"tag": "PluginError", "code": None,
                                  "message": "reportJournal is not supported on the Worker host.",
                                  "publicMessage": None}),
                ToolResult(code="runtime_failed", message="Tool execution failed."),
            ]
            assert turn.outcome is None

    run(scenario)


# ---- permission hiding and agents ------------------------------------------------------------

TWO_TOOLS = plugin("p.two", tool("a", "return 'a';"), tool("b", "return 'b';"))


def test_a_rule_denying_every_resource_hides_the_tool(env: Env) -> None:
    async def scenario() -> None:
        async with Host(env.config()) as host:
            session = await env.session(host, ("p.two", TWO_TOOLS),
                                        rules=[ALLOW, ("b", "*", "deny")])
            assert [t.name for t in session.tools()] == ["a"]
            turn = await session.begin_turn("go", model=MODEL)
            assert [t.id for _, t in turn.tools()] == ["a"]
            assert await turn.call_tools([ToolCall("b", {}), ToolCall("a", {}, id="c2")]) == [
                ToolResult(code="unknown_tool", message="There is no tool named b."),
                ToolResult(value="a"),
            ]
            assert [e.get("toolCallId") for e in turn.events()
                    if e["type"] == "tool.requested"] == ["c2"]
            with pytest.raises(WorkerHostError) as caught:
                await session.call_tool("b", {})
            assert (caught.value.code, caught.value.message) == (
                "unknown_tool", "Session s has no tool named 'b'.")

    run(scenario)


def test_an_agent_include_selection_limits_the_turns_tools(env: Env) -> None:
    source = plugin("p.agents", tool("a", "return 'a';"), tool("b", "return 'b';"),
                    tool("c", "return 'c';"),
                    agent("picky", tools={"mode": "include", "names": ["a"],
                                          "optionalNames": ["c", "missing"]}),
                    agent("mute", tools={"mode": "none"}))

    async def scenario() -> None:
        async with Host(env.config()) as host:
            session = await env.session(host, ("p.agents", source), rules=[ALLOW])
            assert [t.name for t in session.tools()] == ["a", "b", "c"]
            picky = await session.begin_turn("go", model=MODEL, agent="picky")
            assert [t.id for _, t in picky.tools()] == ["a", "c"]
            assert await picky.call_tools([ToolCall("b", {}), ToolCall("c", {})]) == [
                ToolResult(code="unknown_tool", message="There is no tool named b."),
                ToolResult(value="c")]
            mute = await session.begin_turn("go", model=MODEL, agent="mute")
            assert mute.tools() == []
            with pytest.raises(WorkerHostError) as caught:
                await session.begin_turn("go", model=MODEL, agent="ghost")
            assert (caught.value.code, caught.value.message) == (
                "unknown_agent", "Session s has no agent 'ghost'.")

    run(scenario)


def test_an_agents_rules_layer_after_the_session_rules(env: Env) -> None:
    rules = [{"action": "a", "resource": "*", "effect": "allow"},
             {"action": "b", "resource": "*", "effect": "deny"}]
    source = plugin("p.agents", tool("a", "return 'a';"), tool("b", "return 'b';"),
                    agent("strict", permissions=rules), agent("plain"))

    async def scenario() -> None:
        async with Host(env.config()) as host:
            session = await env.session(host, ("p.agents", source),
                                        rules=[("a", "*", "deny"), ("b", "*", "allow")])
            assert [t.name for t in session.tools()] == ["b"]
            plain = await session.begin_turn("go", model=MODEL, agent="plain")
            assert [t.id for _, t in plain.tools()] == ["b"]
            strict = await session.begin_turn("go", model=MODEL, agent="strict")
            assert [t.id for _, t in strict.tools()] == ["a"]
            assert await strict.call_tools([ToolCall("a", {}, id="c1")]) == [
                ToolResult(value="a")]
            assert without(strict.events()[2:3], "requestId") == [
                resolved(strict.id, "c1", "allow", "config", "a")]

    run(scenario)


def test_a_turn_fails_when_its_agent_requires_a_tool_missing_from_the_catalog(
    env: Env,
) -> None:
    """`include.names` are required: "A Turn fails when one is not in the
    effective catalog"."""
    source = plugin("p.agents", tool("a"),
                    agent("needy", tools={"mode": "include", "names": ["a", "missing"]}))

    async def scenario() -> None:
        async with Host(env.config()) as host:
            session = await env.session(host, ("p.agents", source), rules=[ALLOW])
            with pytest.raises(WorkerHostError):
                await session.begin_turn("go", model=MODEL, agent="needy")

    run(scenario)


def include(name: str) -> dict[str, Any]:
    return {"mode": "include", "names": [name]}


@pytest.mark.parametrize(
    ("declarations", "expected"),
    [
        ([agent("zed", tools=include("b")), agent("alpha", tools=include("a"))], "a"),
        ([agent("alpha", tools=include("a"), mode="subagent"),
          agent("beta", tools=include("b"), mode="primary")], "b"),
        ([agent("alpha", tools=include("a")),
          agent("zed", tools=include("b"), fallbackDefault=True)], "b"),
        ([agent("alpha", tools=include("a"), fallbackDefault=True, mode="subagent"),
          agent("zed", tools=include("b"))], "b"),
        ([agent("alpha", tools=include("a"), fallbackDefault=True),
          agent("zed", tools=include("b")), "context.agents.setDefault('zed');"], "b"),
        ([], "ab"),
    ],
    ids=["lexical", "skips-subagent", "fallback-default", "fallback-subagent-ignored",
         "set-default", "no-agents"],
)
def test_the_default_agent_selection(env: Env, declarations: list[str], expected: str) -> None:
    source = plugin("p.agents", tool("a"), tool("b"), *declarations)

    async def scenario() -> None:
        async with Host(env.config()) as host:
            session = await env.session(host, ("p.agents", source), rules=[ALLOW])
            turn = await session.begin_turn("go", model=MODEL)
            assert "".join(t.id for _, t in turn.tools()) == expected

    run(scenario)


def test_a_configured_default_agent_replaces_a_host_plugins_and_a_sessions_replaces_both(
    env: Env,
) -> None:
    host_source = plugin("h.agents", tool("a"), tool("b"), tool("c"),
                         agent("first", tools=include("a")), agent("second", tools=include("b")),
                         "context.agents.setDefault('first');")
    session_source = plugin("s.agents", agent("third", tools=include("c")),
                            "context.agents.setDefault('third');")
    host_plugins = (env.host_plugin("h.agents", host_source),)

    async def scenario() -> None:
        async with Host(env.config(host_plugins=host_plugins, permissions=ALLOW_RULE)) as host:
            session = await env.session(host)
            assert [t.id for _, t in (await session.begin_turn("go")).tools()] == ["a"]
        config = env.config(host_plugins=host_plugins, permissions=ALLOW_RULE,
                            default_agent="second")
        async with Host(config) as host:
            session = host.session("s")
            assert [t.id for _, t in (await session.begin_turn("go")).tools()] == ["b"]
            await session.add_plugin(env.url("s-agents", session_source), "s.agents")
            assert [t.id for _, t in (await session.begin_turn("go")).tools()] == ["c"]

    run(scenario)


def test_a_subagent_only_default_is_rejected_at_activation(env: Env) -> None:
    source = plugin("p.agents", tool("a"), agent("helper", mode="subagent"),
                    "context.agents.setDefault('helper');")

    async def scenario() -> None:
        async with Host(env.config()) as host:
            session = await env.session(host, ("p.echo", ECHO))
            with pytest.raises(WorkerHostError) as caught:
                await session.add_plugin(env.url("agents", source), "p.agents")
            assert (caught.value.code, caught.value.message) == (
                "invalid_contribution",
                "Default agent 'helper': a subagent-only agent cannot be the default.")
            assert session.revision().version == 1
            assert [p.plugin_id for p in session.plugins()] == ["p.echo"]

    run(scenario)


def test_a_subagent_only_agent_cannot_take_a_user_turn(env: Env) -> None:
    """"`subagent` agents run only as spawned children through the `task` tool"."""
    source = plugin("p.agents", tool("a"), agent("helper", mode="subagent"), agent("main"))

    async def scenario() -> None:
        async with Host(env.config()) as host:
            session = await env.session(host, ("p.agents", source), rules=[ALLOW])
            with pytest.raises(WorkerHostError):
                await session.begin_turn("go", model=MODEL, agent="helper")

    run(scenario)
