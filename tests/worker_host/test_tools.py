"""Tool calls end to end through real isolates, and `validate_projections`."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.worker_host.bundles import (
    CONTEXT,
    INVALID_INPUT,
    INVALID_OUTPUT,
    QUESTION_DISMISSED,
    RUNTIME_FAILED,
    activate_and_call,
    call,
    failed,
    plugin_code,
    tool_source,
)
from worker_host import PluginRunner, ToolResult, WorkerHostError
from worker_host._tools import CallContext, validate_projections

SHOUT_SCHEMA = (
    "{ type: 'object', properties: { text: { type: 'string', minLength: 1 } },\n"
    "  required: ['text'], additionalProperties: false }"
)
DEFAULT_PROJECTION = [{"action": "t", "resources": ["*"], "save": ["*"]}]

BAD_RESOURCES = "resources must be 1 to 64 strings of at most 4096 characters"
BAD_ACTION = "action must be a string of 1 to 256 characters"
BAD_SAVE = "save must be at most 64 strings of at most 4096 characters"
UNKNOWN_MEMBER = "a projection has an unknown member"


def permissions_error(runner: PluginRunner, source: bytes) -> tuple[str, str]:
    with pytest.raises(WorkerHostError) as caught:
        call(runner, source)
    return caught.value.code, caught.value.message


def projection_problem(reason: str) -> tuple[str, str]:
    return ("invalid_permissions", f"The tool's permission projection is invalid: {reason}.")


# ---- results ----------------------------------------------------------------


def test_string_result(plugin_runner: PluginRunner) -> None:
    source = tool_source("return input.text.toUpperCase();", schema=SHOUT_SCHEMA)
    result = call(plugin_runner, source, {"text": "hi"})
    assert result == ToolResult(value="HI")
    assert (result.ok, result.text) == (True, "HI")


def test_json_result(plugin_runner: PluginRunner) -> None:
    source = tool_source(
        "return { echo: input, n: 1.5, list: [true, null, 'ü'], empty: {}, neg: -0 };"
    )
    result = call(plugin_runner, source, {"a": [1, {"b": "c"}]})
    assert result == ToolResult(
        value={
            "echo": {"a": [1, {"b": "c"}]},
            "n": 1.5,
            "list": [True, None, "ü"],
            "empty": {},
            "neg": 0,
        }
    )
    assert result.text == (
        '{"echo": {"a": [1, {"b": "c"}]}, "n": 1.5, "list": [true, null, "ü"], '
        '"empty": {}, "neg": 0}'
    )


def test_null_result(plugin_runner: PluginRunner) -> None:
    result = call(plugin_runner, tool_source("return null;"))
    assert result == ToolResult(value=None)
    assert (result.ok, result.text) == (True, "null")


@pytest.mark.parametrize(
    ("expression", "value"),
    [("0", 0), ("false", False), ("''", ""), ("[]", []), ("Object.create(null)", {})],
)
def test_falsy_and_prototype_less_results(
    plugin_runner: PluginRunner, expression: str, value: Any
) -> None:
    assert call(plugin_runner, tool_source(f"return {expression};")) == ToolResult(value=value)


def test_result_with_an_own_to_json_is_copied_as_data(plugin_runner: PluginRunner) -> None:
    # The prelude reads members, it does not serialise the plugin's object: a
    # function-valued member is not JSON.
    source = tool_source("return { a: 1, toJSON() { return 'replaced'; } };")
    assert call(plugin_runner, source) == failed(INVALID_OUTPUT)


# ---- input validation -------------------------------------------------------


@pytest.mark.parametrize(
    "tool_input",
    [{}, {"text": ""}, {"text": 5}, {"text": "ok", "extra": 1}, [], "text", None],
    ids=["missing", "too short", "wrong type", "extra member", "array", "string", "null"],
)
def test_invalid_input_never_reaches_the_plugin(
    plugin_runner: PluginRunner, tool_input: Any
) -> None:
    # Both functions would loop forever: a cpu_time_exceeded result would mean one ran.
    source = tool_source("for (;;) {}", schema=SHOUT_SCHEMA, permissions_body="for (;;) {}")
    code = plugin_code(source)
    result = asyncio.run(activate_and_call(plugin_runner, code, tool_input))
    assert result == failed(INVALID_INPUT)


def test_input_too_deep_to_validate(plugin_runner: PluginRunner) -> None:
    # The model controls the input. Whatever the host decides about an input too
    # deep for jsonschema, it answers with a ToolResult, never a RecursionError.
    source = tool_source(
        "return 'ran';",
        schema="{ type: 'object', additionalProperties: { type: 'object', "
        "additionalProperties: { type: 'object' } } }",
    )
    deep: dict[str, Any] = {}
    for _ in range(5000):
        deep = {"a": deep}
    result = call(plugin_runner, source, deep)
    assert result in (failed(INVALID_INPUT), ToolResult(value="ran"))


def test_input_over_one_mib_is_invalid(plugin_runner: PluginRunner) -> None:
    source = tool_source("return 'ran';")
    assert call(plugin_runner, source, {"text": "x" * (1024 * 1024)}) == failed(INVALID_INPUT)


# ---- failures ---------------------------------------------------------------


def test_plugin_error_public_message_reaches_the_result_trimmed(
    plugin_runner: PluginRunner,
) -> None:
    source = tool_source(
        "throw new PluginError({ message: 'secret diagnostic', publicMessage: '  Try again.\\n' });"
    )
    result = call(plugin_runner, source)
    assert result == ToolResult(code="runtime_failed", message="Try again.")
    assert "secret" not in repr(result)


def test_plugin_error_public_message_cut_to_4096(plugin_runner: PluginRunner) -> None:
    source = tool_source(
        "throw new PluginError({ message: 'secret', publicMessage: 'm'.repeat(5000) });"
    )
    assert call(plugin_runner, source) == ToolResult(code="runtime_failed", message="m" * 4096)


@pytest.mark.parametrize(
    "public",
    ["undefined", "''", "'   '", "42", "{ text: 'x' }"],
    ids=["absent", "empty", "blank", "number", "object"],
)
def test_plugin_error_without_a_usable_public_message(
    plugin_runner: PluginRunner, public: str
) -> None:
    source = tool_source(
        "const e = new PluginError({ message: 'secret diagnostic' });\n"
        f"Object.defineProperty(e, 'publicMessage', {{ value: {public}, enumerable: true }});\n"
        "throw e;"
    )
    result = call(plugin_runner, source)
    assert result == failed(RUNTIME_FAILED)
    assert "secret" not in repr(result)


def test_plugin_error_with_an_accessor_public_message(plugin_runner: PluginRunner) -> None:
    source = tool_source(
        "throw { _tag: 'PluginError', message: 'secret',\n"
        "        get publicMessage() { return 'from a getter'; } };"
    )
    assert call(plugin_runner, source) == failed(RUNTIME_FAILED)


def test_structural_plugin_error_from_another_copy(plugin_runner: PluginRunner) -> None:
    # No class identity: an object with the own data properties is a PluginError.
    source = tool_source(
        "throw { _tag: 'PluginError', message: 'secret', publicMessage: 'Plain object.' };"
    )
    assert call(plugin_runner, source) == ToolResult(code="runtime_failed", message="Plain object.")


@pytest.mark.parametrize(
    "statement",
    [
        "throw new Error('secret diagnostic');",
        "throw new TypeError('secret');",
        "null.property;",
        "throw 'secret';",
        "await Promise.reject(new Error('secret'));",
        "throw Object.assign(new Error('secret'), { publicMessage: 'not a PluginError' });",
    ],
    ids=["Error", "TypeError", "engine error", "string", "rejection", "Error with publicMessage"],
)
def test_plain_throw(plugin_runner: PluginRunner, statement: str) -> None:
    result = call(plugin_runner, tool_source(statement))
    assert result == failed(RUNTIME_FAILED)
    assert "secret" not in repr(result) and "not a PluginError" not in repr(result)


INVALID_OUTPUTS = {
    "undefined member": "return { a: undefined };",
    "undefined": "return undefined;",
    "no return": "",
    "NaN": "return NaN;",
    "Infinity": "return { n: -Infinity };",
    "function": "return () => 1;",
    "Date": "return new Date(0);",
    "Map": "return new Map([[1, 2]]);",
    "Set": "return { s: new Set() };",
    "hole": "return [1, , 3];",
    "class instance": "class Point { constructor() { this.x = 1; } } return new Point();",
    "bigint": "return 1n;",
    "symbol": "return Symbol('s');",
    "typed array": "return new Uint8Array(2);",
    "boxed string": "return new String('x');",
    "nested undefined": "return { a: [{ b: undefined }] };",
    "promise member": "return { p: Promise.resolve(1) };",
    "error": "return new Error('secret');",
    "array with extra property": "const a = [1]; a.extra = () => 1; return [a, new RegExp('x')];",
}


@pytest.mark.parametrize("body", INVALID_OUTPUTS.values(), ids=list(INVALID_OUTPUTS))
def test_invalid_output(plugin_runner: PluginRunner, body: str) -> None:
    assert call(plugin_runner, tool_source(body)) == failed(INVALID_OUTPUT)


def test_output_getters_run_once_inside_the_isolate(plugin_runner: PluginRunner) -> None:
    source = tool_source("let reads = 0;\nreturn { get value() { reads += 1; return reads; } };")
    assert call(plugin_runner, source) == ToolResult(value={"value": 1})


# ---- permissions ------------------------------------------------------------


ECHO_PERMISSIONS = "return { permissions: ctx.permissions };"


def test_default_projection_reaches_execute(plugin_runner: PluginRunner) -> None:
    result = call(plugin_runner, tool_source(ECHO_PERMISSIONS))
    assert result == ToolResult(value={"permissions": DEFAULT_PROJECTION})


def test_projections_reach_execute_without_duplicates(plugin_runner: PluginRunner) -> None:
    source = tool_source(
        ECHO_PERMISSIONS,
        schema=SHOUT_SCHEMA,
        permissions_body=(
            "const p = { action: 'deploy', resources: [input.text], save: [input.text],\n"
            "            metadata: { canonicalPath: '/workspace/' + input.text } };\n"
            "const read = (resources) => ({ action: 'read', resources });\n"
            "return [p, read(['a', 'b']), { ...p }, read(['a', 'b']), read(['b', 'a'])];"
        ),
    )
    result = call(plugin_runner, source, {"text": "prod"})
    assert result == ToolResult(
        value={
            "permissions": [
                {
                    "action": "deploy",
                    "resources": ["prod"],
                    "save": ["prod"],
                    "metadata": {"canonicalPath": "/workspace/prod"},
                },
                {"action": "read", "resources": ["a", "b"]},
                {"action": "read", "resources": ["b", "a"]},
            ]
        }
    )


def test_permissions_context_has_identity_but_no_callbacks(plugin_runner: PluginRunner) -> None:
    # permissions and execute run in separate isolates: what permissions saw
    # travels to execute in the projection's metadata.
    source = tool_source(
        "return ctx.permissions[0].metadata;",
        permissions_body=(
            "const seen = { keys: Object.keys(ctx).sort(), sessionId: ctx.sessionId,\n"
            "  turnId: ctx.turnId, toolCallId: ctx.toolCallId, workdir: ctx.workdir,\n"
            "  aborted: ctx.signal.aborted, frozen: Object.isFrozen(ctx) };\n"
            "return [{ action: 't', resources: ['*'], metadata: seen }];"
        ),
    )
    assert call(plugin_runner, source) == ToolResult(
        value={
            "keys": ["sessionId", "signal", "toolCallId", "turnId", "workdir"],
            "sessionId": "sess-1",
            "turnId": "turn-1",
            "toolCallId": "call-1",
            "workdir": "/workspace",
            "aborted": False,
            "frozen": True,
        }
    )


INVALID_PROJECTIONS = {
    "empty list": ("return [];", "a non-empty list of projections is required"),
    "not a list": (
        "return { action: 't', resources: ['*'] };",
        "a non-empty list of projections is required",
    ),
    "null": ("return null;", "a non-empty list of projections is required"),
    "not an object": ("return ['t'];", "each projection must be an object"),
    "missing resources": (
        "return [{ action: 't' }];",
        BAD_RESOURCES,
    ),
    "empty resources": (
        "return [{ action: 't', resources: [] }];",
        BAD_RESOURCES,
    ),
    "non-string resource": (
        "return [{ action: 't', resources: ['*', 1] }];",
        BAD_RESOURCES,
    ),
    "non-string action": (
        "return [{ action: 5, resources: ['*'] }];",
        BAD_ACTION,
    ),
    "empty action": (
        "return [{ action: '', resources: ['*'] }];",
        BAD_ACTION,
    ),
    "missing action": ("return [{ resources: ['*'] }];", BAD_ACTION),
    "unknown member": (
        "return [{ action: 't', resources: ['*'], reason: 'x' }];",
        UNKNOWN_MEMBER,
    ),
    "save not a list": (
        "return [{ action: 't', resources: ['*'], save: '*' }];",
        BAD_SAVE,
    ),
    "metadata not an object": (
        "return [{ action: 't', resources: ['*'], metadata: [] }];",
        "metadata must be an object",
    ),
    "second projection invalid": (
        "return [{ action: 't', resources: ['*'] }, { action: 't' }];",
        BAD_RESOURCES,
    ),
}


@pytest.mark.parametrize(
    ("body", "reason"), INVALID_PROJECTIONS.values(), ids=list(INVALID_PROJECTIONS)
)
def test_invalid_projections_fail_the_turn(
    plugin_runner: PluginRunner, body: str, reason: str
) -> None:
    source = tool_source("for (;;) {}", permissions_body=body)
    assert permissions_error(plugin_runner, source) == projection_problem(reason)


def test_projection_with_an_explicit_undefined_member_fails_the_turn(
    plugin_runner: PluginRunner,
) -> None:
    # The contract: Core rejects explicit `undefined` in projections, and a
    # result that is not an array of valid projections fails the Turn.
    source = tool_source(
        "for (;;) {}",
        permissions_body="return [{ action: 't', resources: ['*'], save: undefined }];",
    )
    code, message = permissions_error(plugin_runner, source)
    assert code == "invalid_permissions"
    assert message.startswith("The tool's permission projection is invalid: ")


def test_permissions_returning_undefined_fails_the_turn(plugin_runner: PluginRunner) -> None:
    source = tool_source("for (;;) {}", permissions_body="return undefined;")
    code, message = permissions_error(plugin_runner, source)
    assert code == "invalid_permissions"
    assert message.startswith("The tool's permission projection is invalid: ")


def test_permissions_throwing_a_plugin_error(plugin_runner: PluginRunner) -> None:
    source = tool_source(
        "for (;;) {}",
        permissions_body=(
            "throw new PluginError({ message: 'secret', publicMessage: ' No such environment. ' });"
        ),
    )
    result = call(plugin_runner, source)
    assert result == ToolResult(code="runtime_failed", message="No such environment.")


def test_permissions_throwing_anything_else(plugin_runner: PluginRunner) -> None:
    source = tool_source("for (;;) {}", permissions_body="throw new Error('secret');")
    assert call(plugin_runner, source) == failed(RUNTIME_FAILED)


# ---- questions, journal, context --------------------------------------------


def test_question_dismissed_thrown_from_execute(plugin_runner: PluginRunner) -> None:
    source = tool_source("throw new QuestionDismissedError();")
    assert call(plugin_runner, source) == failed(QUESTION_DISMISSED)


def test_structural_question_dismissed(plugin_runner: PluginRunner) -> None:
    source = tool_source("throw { _tag: 'QuestionDismissedError', code: 'question_dismissed' };")
    assert call(plugin_runner, source) == failed(QUESTION_DISMISSED)


ASK = (
    "[{ question: 'Deploy?', header: 'Deploy',\n"
    "   options: [{ label: 'Yes', description: '' }, { label: 'No', description: '' }] }]"
)


def test_ask_question_without_a_client_rejects_with_question_dismissed(
    plugin_runner: PluginRunner,
) -> None:
    source = tool_source(
        f"try {{ return {{ answers: await ctx.askQuestion({ASK}) }}; }}\n"
        "catch (e) { return describe(e); }"
    )
    assert call(plugin_runner, source) == ToolResult(
        value={
            "tag": "QuestionDismissedError",
            "code": "question_dismissed",
            "message": "The user dismissed this question.",
            "publicMessage": None,
        }
    )


def test_ask_question_dismissal_escaping_execute(plugin_runner: PluginRunner) -> None:
    source = tool_source(f"return await ctx.askQuestion({ASK});")
    assert call(plugin_runner, source) == failed(QUESTION_DISMISSED)


def test_report_journal_rejects_with_a_plugin_error(plugin_runner: PluginRunner) -> None:
    source = tool_source(
        "try { await ctx.reportJournal({ kind: 'k', summary: 's', data: {} }); return 'stored'; }\n"
        "catch (e) { return describe(e); }"
    )
    assert call(plugin_runner, source) == ToolResult(
        value={
            "tag": "PluginError",
            "code": None,
            "message": "reportJournal is not supported on the Worker host.",
            "publicMessage": None,
        }
    )


def test_report_journal_escaping_execute_is_generic(plugin_runner: PluginRunner) -> None:
    source = tool_source("await ctx.reportJournal({ kind: 'k', summary: 's', data: {} });")
    assert call(plugin_runner, source) == failed(RUNTIME_FAILED)


ACTIVITY = "{ message: 'Working', preview: 'out', observedBytes: 3, truncated: false }"


def test_report_activity_without_clients_resolves(plugin_runner: PluginRunner) -> None:
    # reportActivity is a context callback, not a host capability: a valid update
    # rejects only when malformed or past its limits. With no client to show it
    # to, the host accepts and drops it; a tool that reports progress still works.
    source = tool_source(
        f"const returned = await ctx.reportActivity({ACTIVITY});\n"
        "return { returned: returned === undefined ? 'undefined' : returned };"
    )
    assert call(plugin_runner, source) == ToolResult(value={"returned": "undefined"})


def test_report_activity_with_an_explicit_undefined_member_rejects(
    plugin_runner: PluginRunner,
) -> None:
    source = tool_source(
        "try {\n"
        "  await ctx.reportActivity({ message: undefined, observedBytes: 0, truncated: false });\n"
        "  return 'accepted';\n"
        "} catch (e) { return e._tag; }"
    )
    assert call(plugin_runner, source) == ToolResult(value="PluginError")


def test_execution_context_fields_reach_execute(plugin_runner: PluginRunner) -> None:
    source = tool_source(
        "return { keys: Object.keys(ctx).sort(), sessionId: ctx.sessionId, turnId: ctx.turnId,\n"
        "         toolCallId: ctx.toolCallId, workdir: ctx.workdir,\n"
        "         aborted: ctx.signal.aborted, frozen: Object.isFrozen(ctx),\n"
        "         callbacks: [typeof ctx.askQuestion, typeof ctx.reportActivity,\n"
        "                     typeof ctx.reportJournal] };"
    )
    context = CallContext("session-42", "turn-7", "call-ü", "/workspace/sub dir")
    result = call(plugin_runner, source, context=context)
    assert result == ToolResult(
        value={
            "keys": [
                "askQuestion",
                "permissions",
                "reportActivity",
                "reportJournal",
                "sessionId",
                "signal",
                "toolCallId",
                "turnId",
                "workdir",
            ],
            "sessionId": "session-42",
            "turnId": "turn-7",
            "toolCallId": "call-ü",
            "workdir": "/workspace/sub dir",
            "aborted": False,
            "frozen": True,
            "callbacks": ["function", "function", "function"],
        }
    )


def test_input_reaches_execute_as_validated(plugin_runner: PluginRunner) -> None:
    source = tool_source("return input;", schema=SHOUT_SCHEMA)
    assert call(plugin_runner, source, {"text": "a\u0000b \U0001f600"}) == ToolResult(
        value={"text": "a\u0000b \U0001f600"}
    )


def test_result_with_a_lone_surrogate_is_safe_to_send(plugin_runner: PluginRunner) -> None:
    # A JS string may hold a lone surrogate; UTF-8 cannot. Whatever the host
    # does with it, the model-visible result must encode as UTF-8.
    result = call(plugin_runner, tool_source("return { s: '\\uD800x' };"))
    assert result in (failed(INVALID_OUTPUT), ToolResult(value={"s": "\ufffdx"}))
    result.text.encode("utf-8")


def test_input_with_a_lone_surrogate_never_escapes_as_a_foreign_error(
    plugin_runner: PluginRunner,
) -> None:
    # Model input parsed from JSON may hold "\\ud800". The call answers with a
    # ToolResult (rejected input, or the string reaching execute), never a
    # UnicodeEncodeError out of call_tool.
    source = tool_source("return input.s.length;")
    result = call(plugin_runner, source, {"s": "\ud800"})
    assert result in (failed(INVALID_INPUT), ToolResult(value=1))


def test_unknown_tool_in_the_same_plugin(plugin_runner: PluginRunner) -> None:
    source = tool_source("return 'ok';")
    code = plugin_code(source)

    async def scenario() -> Any:
        manifest = await plugin_runner.activate(code)
        return await plugin_runner.invoke(
            code,
            manifest.fingerprint,
            {
                "target": {"kind": "tool.execute", "toolId": "missing"},
                "input": {},
                "context": {**CONTEXT.to_json(), "permissions": DEFAULT_PROJECTION},
            },
        )

    answer = asyncio.run(scenario())
    assert (answer.status, answer.error) == (
        "failed",
        {"_tag": "PluginError", "message": "No tool missing was registered."},
    )


# ---- validate_projections ---------------------------------------------------


def test_validate_projections_accepts_and_removes_exact_duplicates() -> None:
    first = {"action": "read", "resources": ["a"], "save": ["a"], "metadata": {"k": 1}}
    value = [
        first,
        {"action": "read", "resources": ["a"]},
        dict(first),
        {"metadata": {"k": 1}, "save": ["a"], "resources": ["a"], "action": "read"},
        {"action": "read", "resources": ["a"]},
        {"action": "read", "resources": ["a"], "save": []},
    ]
    assert validate_projections(value) == [
        first,
        {"action": "read", "resources": ["a"]},
        {"action": "read", "resources": ["a"], "save": []},
    ]


def test_validate_projections_true_and_one_are_not_duplicates() -> None:
    # Exact duplicates are equal JSON; Python's 1 == True must not merge these.
    value = [
        {"action": "a", "resources": ["*"], "metadata": {"flag": 1}},
        {"action": "a", "resources": ["*"], "metadata": {"flag": True}},
        {"action": "a", "resources": ["*"], "metadata": {"flag": 1.0}},
    ]
    assert validate_projections(value) == value[:2]
    kept = validate_projections(value)
    assert [p["metadata"]["flag"] is True for p in kept] == [False, True]


def test_validate_projections_keeps_order_and_nested_metadata() -> None:
    value = [
        {"action": "b", "resources": ["*"], "metadata": {"nested": {"list": [1, None]}}},
        {"action": "a", "resources": ["x", "y"]},
    ]
    assert validate_projections(value) == value


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ([], "a non-empty list of projections is required"),
        (None, "a non-empty list of projections is required"),
        ({"action": "a", "resources": ["*"]}, "a non-empty list of projections is required"),
        ((({"action": "a", "resources": ["*"]}),), "a non-empty list of projections is required"),
        ([None], "each projection must be an object"),
        ([["a"]], "each projection must be an object"),
        ([{"action": "a"}], BAD_RESOURCES),
        ([{"action": "a", "resources": []}], BAD_RESOURCES),
        ([{"action": "a", "resources": "*"}], BAD_RESOURCES),
        ([{"action": "a", "resources": [None]}], BAD_RESOURCES),
        ([{"action": 1, "resources": ["*"]}], BAD_ACTION),
        ([{"action": "", "resources": ["*"]}], BAD_ACTION),
        ([{"resources": ["*"]}], BAD_ACTION),
        ([{"action": "a", "resources": ["*"], "save": "*"}], BAD_SAVE),
        ([{"action": "a", "resources": ["*"], "save": [1]}], BAD_SAVE),
        ([{"action": "a", "resources": ["*"], "save": None}], BAD_SAVE),
        ([{"action": "a", "resources": ["*"], "metadata": []}], "metadata must be an object"),
        ([{"action": "a", "resources": ["*"], "metadata": None}], "metadata must be an object"),
        ([{"action": "a", "resources": ["*"], "extra": 1}], UNKNOWN_MEMBER),
        ([{"action": "a", "resources": ["*"], "b": 1, "a": 2}], UNKNOWN_MEMBER),
    ],
)
def test_validate_projections_rejects(value: Any, reason: str) -> None:
    with pytest.raises(WorkerHostError) as caught:
        validate_projections(value)
    assert (caught.value.code, caught.value.message) == projection_problem(reason)


@pytest.mark.parametrize(
    ("projection", "message"),
    [
        ({"action": "a" * 257, "resources": ["*"]},
         BAD_ACTION),
        ({"action": "a", "resources": ["*"] * 65},
         BAD_RESOURCES),
        ({"action": "a", "resources": ["x" * 4097]},
         BAD_RESOURCES),
        ({"action": "a", "resources": ["*"], "save": ["*" * 4097]},
         BAD_SAVE),
    ],
)
def test_projections_are_bounded_because_matching_costs_their_product(
    projection: dict[str, Any], message: str
) -> None:
    with pytest.raises(WorkerHostError) as caught:
        validate_projections([projection])
    assert caught.value.message == f"The tool's permission projection is invalid: {message}."
    assert validate_projections([{"action": "a" * 256, "resources": ["x" * 4096] * 64}])
