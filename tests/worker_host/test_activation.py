"""Activation through real isolates: setup failures, bundle shape, what the guest sees."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.worker_host.bundles import (
    ACTIVATION,
    CONTEXT,
    activate,
    activate_and_call,
    call,
    plugin_code,
    plugin_source,
    tool_source,
)
from worker_host import (
    Activation,
    PluginCode,
    PluginRunner,
    SetupFailed,
    ToolResult,
    WorkerHostError,
)

NOT_SELF_CONTAINED = ("bundle_invalid", "The bundle is not a self-contained ES module that loads.")
NOT_A_PLUGIN = (
    "bundle_invalid",
    "The bundle's default export is not a plugin with an id and a setup function.",
)
SETUP_FAILED = ("setup_failed", "Plugin example.x failed to set up.")


def activation_error(runner: PluginRunner, code: PluginCode) -> WorkerHostError:
    with pytest.raises(WorkerHostError) as caught:
        asyncio.run(runner.activate(code))
    return caught.value


def failure_of(runner: PluginRunner, source: bytes) -> tuple[str, str]:
    error = activation_error(runner, plugin_code(source))
    return error.code, error.message


# ---- unsupported contributions ----------------------------------------------

UNSUPPORTED = {
    "skills.registerSource": "context.skills.registerSource({ kind: 'directory', path: 's' });",
    "skills.registerTransform": "context.skills.registerTransform({ id: 'x', apply: (s) => s });",
    "mcp.register": "context.mcp.register({ id: 'm', transport: { type: 'stdio' } });",
    "models.register": "context.models.register({ id: 'm', stream: async function* () {} });",
    "journal.registerKind": "context.journal.registerKind({ kind: 'k', dataSchema: {} });",
    "events.subscribe": "context.events.subscribe(() => {});",
}


@pytest.mark.parametrize("name", list(UNSUPPORTED))
def test_unsupported_contribution_fails_setup(plugin_runner: PluginRunner, name: str) -> None:
    error = activation_error(plugin_runner, plugin_code(plugin_source(UNSUPPORTED[name])))
    assert isinstance(error, SetupFailed)
    assert (error.code, error.message) == (
        "setup_failed",
        f"Plugin example.x failed to set up: {name} is not supported on the Worker host.",
    )
    assert error.public_message == f"{name} is not supported on the Worker host."


@pytest.mark.parametrize("name", list(UNSUPPORTED))
def test_unsupported_contribution_throws_a_plugin_error_at_the_call_site(
    plugin_runner: PluginRunner, name: str
) -> None:
    # A plugin may catch it and carry on with what the Worker host supports.
    source = tool_source(
        "return caught;",
        prefix="let caught = null;",
        setup_body=f"try {{ {UNSUPPORTED[name]} }} catch (e) {{ caught = describe(e); }}",
    )
    text = f"{name} is not supported on the Worker host."
    assert call(plugin_runner, source) == ToolResult(
        value={"tag": "PluginError", "code": None, "message": text, "publicMessage": text}
    )


# ---- setup throwing ---------------------------------------------------------


def test_setup_plugin_error_public_message_trimmed_to_512(plugin_runner: PluginRunner) -> None:
    public = "  " + "p" * 600 + "  "
    source = plugin_source(
        f"throw new PluginError({{ message: 'secret diagnostic', publicMessage: '{public}' }});"
    )
    error = activation_error(plugin_runner, plugin_code(source))
    assert isinstance(error, SetupFailed)
    assert (error.code, error.message) == (
        "setup_failed",
        "Plugin example.x failed to set up: " + "p" * 512,
    )
    assert error.public_message == "p" * 512


def test_setup_plugin_error_short_public_message(plugin_runner: PluginRunner) -> None:
    source = plugin_source(
        "throw new PluginError({ message: 'secret', publicMessage: ' Missing API key. ' });"
    )
    assert failure_of(plugin_runner, source) == (
        "setup_failed",
        "Plugin example.x failed to set up: Missing API key.",
    )


def test_setup_plugin_error_without_public_message(plugin_runner: PluginRunner) -> None:
    source = plugin_source("throw new PluginError({ message: 'secret diagnostic' });")
    error = activation_error(plugin_runner, plugin_code(source))
    assert (error.code, error.message) == SETUP_FAILED
    assert isinstance(error, SetupFailed) and error.public_message is None
    assert "secret" not in str(error) and "secret" not in repr(error)


def test_setup_plugin_error_with_blank_public_message(plugin_runner: PluginRunner) -> None:
    source = plugin_source("throw new PluginError({ message: 'secret', publicMessage: ' \\n ' });")
    assert failure_of(plugin_runner, source) == SETUP_FAILED


def test_setup_non_plugin_error_throw(plugin_runner: PluginRunner) -> None:
    # publicMessage on an ordinary Error is not a PluginError's: it never shows.
    source = plugin_source(
        "const e = new TypeError('secret diagnostic'); e.publicMessage = 'not public';\nthrow e;"
    )
    error = activation_error(plugin_runner, plugin_code(source))
    assert (error.code, error.message) == SETUP_FAILED
    assert "not public" not in error.message


def test_setup_rejecting_after_an_await(plugin_runner: PluginRunner) -> None:
    source = plugin_source(
        "await new Promise((r) => setTimeout(r, 1));\n"
        "throw new PluginError({ message: 'm', publicMessage: 'Later.' });"
    )
    assert failure_of(plugin_runner, source) == (
        "setup_failed",
        "Plugin example.x failed to set up: Later.",
    )


@pytest.mark.parametrize(
    "returned", ["42", "'cleanup'", "null", "({})", "Promise.resolve(1)", "[() => {}]"]
)
def test_setup_returning_a_non_function(plugin_runner: PluginRunner, returned: str) -> None:
    source = ("export default { id: 'example.x', setup: () => " + returned + " };").encode()
    assert failure_of(plugin_runner, source) == SETUP_FAILED


def test_setup_returning_a_cleanup_function(plugin_runner: PluginRunner) -> None:
    source = b"export default { id: 'example.x', setup: () => () => {} };"
    manifest = activate(plugin_runner, plugin_code(source))
    assert manifest.has_cleanup is True
    assert manifest.shape == "empty"


def test_synchronous_setup_registering_a_tool(plugin_runner: PluginRunner) -> None:
    source = b"""export default {
  id: 'example.x',
  setup(context) {
    context.tools.register({
      id: 't', description: 'Sync.', inputSchema: { type: 'object' },
      execute: async () => 'sync ok',
    });
  },
};"""
    assert call(plugin_runner, source) == ToolResult(value="sync ok")


# ---- bundle shape -----------------------------------------------------------


@pytest.mark.parametrize(
    "source",
    [
        "export const plugin = { id: 'example.x', setup() {} };",
        "export default 42;",
        "export default null;",
        "export default { id: 'example.x' };",
        "export default { setup() {} };",
        "export default { id: 5, setup() {} };",
        "export default { id: 'example.x', setup: 'not a function' };",
        "export default function setup() {}",
        "",
    ],
    ids=[
        "no default",
        "number",
        "null",
        "no setup",
        "no id",
        "numeric id",
        "string setup",
        "function",
        "empty module",
    ],
)
def test_default_export_that_is_not_a_plugin(plugin_runner: PluginRunner, source: str) -> None:
    assert failure_of(plugin_runner, source.encode()) == NOT_A_PLUGIN


@pytest.mark.parametrize(
    "source",
    [
        b"export default { id: 'example.x', setup( };",
        b"export default {",
        b"\xff\xfe not utf-8",
        b"return 1;",
    ],
    ids=["syntax error", "unterminated", "not utf-8", "top-level return"],
)
def test_bundle_that_does_not_compile(plugin_runner: PluginRunner, source: bytes) -> None:
    assert failure_of(plugin_runner, source) == NOT_SELF_CONTAINED


@pytest.mark.parametrize(
    "source",
    [
        "import { definePlugin } from '@worker-host/sdk';\n"
        "export default definePlugin({ id: 'example.x', setup() {} });",
        "import './other.js';\nexport default { id: 'example.x', setup() {} };",
        "export { default } from 'https://example.com/plugin.js';",
    ],
    ids=["package import", "relative import", "re-export"],
)
def test_bundle_with_imports_is_not_self_contained(
    plugin_runner: PluginRunner, source: str
) -> None:
    assert failure_of(plugin_runner, source.encode()) == NOT_SELF_CONTAINED


def test_dynamic_import_fails_setup(plugin_runner: PluginRunner) -> None:
    source = plugin_source("await import('./other.js');")
    assert failure_of(plugin_runner, source) == SETUP_FAILED


def test_top_level_throw_is_not_a_loadable_module(plugin_runner: PluginRunner) -> None:
    source = plugin_source("", prefix="throw new Error('top level');")
    assert failure_of(plugin_runner, source) == NOT_SELF_CONTAINED


def test_top_level_await_works(plugin_runner: PluginRunner) -> None:
    source = tool_source(
        "return loaded;",
        prefix="const loaded = await Promise.resolve('loaded');",
    )
    assert call(plugin_runner, source) == ToolResult(value="loaded")


def test_top_level_await_on_a_timer_works(plugin_runner: PluginRunner) -> None:
    # The bundle is evaluated inside the host's call (setup awaits the module's
    # evaluation), so timers work at top level as they do in setup.
    source = tool_source(
        "return loaded;",
        prefix="const loaded = await new Promise((r) => setTimeout(() => r('loaded'), 1));",
    )
    assert call(plugin_runner, source) == ToolResult(value="loaded")


def test_plugin_id_mismatch(plugin_runner: PluginRunner) -> None:
    source = plugin_source("", plugin_id="example.y")
    assert failure_of(plugin_runner, source) == (
        "plugin_id_mismatch",
        "The bundle's plugin id is 'example.y', not 'example.x'.",
    )


def test_invalid_plugin_id_in_the_bundle(plugin_runner: PluginRunner) -> None:
    source = plugin_source("", plugin_id="Example.X")
    code = plugin_code(source, plugin_id="Example.X")
    error = activation_error(plugin_runner, code)
    assert (error.code, error.message) == (
        "invalid_contribution",
        "The plugin's setup is invalid: the plugin id must be at most 128 lowercase letters and "
        "digits joined by single '.', '_' or '-' characters, starting with a letter.",
    )


# ---- what the guest sees ----------------------------------------------------

ECHO_SETUP = tool_source(
    "return seen;",
    prefix="let seen = null;",
    setup_body=(
        "seen = { activation: context.activation, options: context.options,\n"
        "         frozen: Object.isFrozen(context.activation) };"
    ),
)


def test_session_activation_as_the_guest_sees_it(plugin_runner: PluginRunner) -> None:
    assert call(plugin_runner, ECHO_SETUP) == ToolResult(
        value={
            "activation": {
                "scope": "session",
                "revision": {"id": "rev-1", "version": 1},
                "sessionId": "sess-1",
            },
            "options": {},
            "frozen": True,
        }
    )


def test_host_activation_as_the_guest_sees_it(plugin_runner: PluginRunner) -> None:
    code = plugin_code(ECHO_SETUP, activation=Activation("host", "host-rev", 7))
    result = asyncio.run(activate_and_call(plugin_runner, code, {}))
    assert result == ToolResult(
        value={
            "activation": {"scope": "host", "revision": {"id": "host-rev", "version": 7}},
            "options": {},
            "frozen": True,
        }
    )


def test_options_as_the_guest_sees_them(plugin_runner: PluginRunner) -> None:
    options: dict[str, Any] = {
        "greeting": "héllo",
        "count": 3,
        "ratio": 0.5,
        "flags": [True, False, None],
        "nested": {"deep": {"list": [1, "two"]}},
    }
    result = call(plugin_runner, ECHO_SETUP, options=options)
    assert result.value["options"] == options


def test_options_are_an_owned_copy(plugin_runner: PluginRunner) -> None:
    options: dict[str, Any] = {"greeting": "hi", "nested": {"n": 1}, "list": [1]}
    source = tool_source(
        "return { seen, now: context_options };",
        prefix="let seen = null; let context_options = null;",
        setup_body=(
            "seen = JSON.parse(JSON.stringify(context.options));\n"
            "context.options.greeting = 'changed';\n"
            "context.options.nested.n = 2;\n"
            "context.options.list.push(2);\n"
            "context.options.added = true;\n"
            "context_options = context.options;"
        ),
    )
    code = plugin_code(source, options=options)

    async def twice() -> list[ToolResult]:
        first = await activate_and_call(plugin_runner, code, {})
        second = await activate_and_call(plugin_runner, code, {})
        return [first, second]

    mutated = {"greeting": "changed", "nested": {"n": 2}, "list": [1, 2], "added": True}
    expected = ToolResult(value={"seen": options, "now": mutated})
    assert asyncio.run(twice()) == [expected, expected]
    assert options == {"greeting": "hi", "nested": {"n": 1}, "list": [1]}
    assert code.options == {"greeting": "hi", "nested": {"n": 1}, "list": [1]}


def test_async_setup_with_await(plugin_runner: PluginRunner) -> None:
    source = plugin_source(
        "await null;\n"
        "await new Promise((r) => setTimeout(r, 5));\n"
        "context.tools.register({ id: 't', description: 'Late.', inputSchema: { type: 'object' },\n"
        "  execute: async () => 'registered after awaiting' });\n"
        "await Promise.resolve();\n"
        "context.hooks.register('turn.before', async () => {});"
    )
    manifest = activate(plugin_runner, plugin_code(source))
    assert [t.id for t in manifest.tools] == ["t"]
    assert manifest.hooks == ("turn.before",)
    assert call(plugin_runner, source) == ToolResult(value="registered after awaiting")


# ---- determinism ------------------------------------------------------------


def test_nondeterministic_setup_activates_but_calls_fail_closed(
    plugin_runner: PluginRunner,
) -> None:
    source = plugin_source(
        "context.tools.register({ id: 't', description: 'Roll ' + Math.random(),\n"
        "  inputSchema: { type: 'object' }, execute: async () => 'must not run' });"
    )
    code = plugin_code(source)
    message = (
        "Plugin example.x registered different contributions than when it was activated; "
        "the call was refused."
    )

    async def scenario() -> tuple[str, WorkerHostError | None, ToolResult]:
        manifest = await plugin_runner.activate(code)
        try:
            await plugin_runner.invoke(
                code,
                manifest.fingerprint,
                {
                    "target": {"kind": "tool.execute", "toolId": "t"},
                    "input": {},
                    "context": {**CONTEXT.to_json(), "permissions": []},
                },
            )
        except WorkerHostError as error:
            refused: WorkerHostError | None = error
        else:
            refused = None
        via_tool = await activate_and_call(plugin_runner, code, {})
        return manifest.tools[0].description, refused, via_tool

    description, refused, via_tool = asyncio.run(scenario())
    assert description.startswith("Roll 0.")
    assert refused is not None
    assert (refused.code, refused.message) == ("setup_nondeterministic", message)
    assert via_tool == ToolResult(code="setup_nondeterministic", message=message)


def test_options_dependent_setup_is_deterministic_per_options(
    plugin_runner: PluginRunner,
) -> None:
    source = plugin_source(
        "context.tools.register({ id: 't', description: 'Greets ' + context.options.name,\n"
        "  inputSchema: { type: 'object' }, execute: async () => context.options.name });"
    )
    assert call(plugin_runner, source, options={"name": "Ada"}) == ToolResult(value="Ada")
    manifest_a = activate(plugin_runner, plugin_code(source, options={"name": "Ada"}))
    manifest_b = activate(plugin_runner, plugin_code(source, options={"name": "Bob"}))
    assert manifest_a.fingerprint != manifest_b.fingerprint


# ---- after setup returns ----------------------------------------------------

LATE_REGISTRATIONS = """
const attempts = {};
const attempt = (name, fn) => { try { fn(); attempts[name] = 'accepted'; }
                                catch (e) { attempts[name] = describe(e); } };
attempt('tools.register', () => saved.tools.register({ id: 'late', description: 'Late.',
  inputSchema: { type: 'object' }, execute: async () => null }));
attempt('hooks.register', () => saved.hooks.register('turn.before', async () => {}));
attempt('skills.register', () => saved.skills.register({ name: 's' }));
attempt('agents.register', () => saved.agents.register({ id: 'a' }));
attempt('agents.setDefault', () => saved.agents.setDefault('a'));
return attempts;
"""


def _refused(name: str) -> dict[str, Any]:
    return {
        "tag": "PluginError",
        "code": None,
        "message": f"{name} was called after setup returned.",
        "publicMessage": None,
    }


REFUSED_LATE = {
    name: _refused(name)
    for name in [
        "tools.register",
        "hooks.register",
        "skills.register",
        "agents.register",
        "agents.setDefault",
    ]
}


def test_registration_after_setup_returned_is_refused(plugin_runner: PluginRunner) -> None:
    source = tool_source(
        LATE_REGISTRATIONS, prefix="let saved = null;", setup_body="saved = context;"
    )
    assert call(plugin_runner, source) == ToolResult(value=REFUSED_LATE)


def test_registration_from_a_timer_after_setup_returned_is_refused(
    plugin_runner: PluginRunner,
) -> None:
    source = tool_source(
        "return await new Promise((resolve) => setTimeout(() => resolve(late()), 1));",
        prefix="let saved = null;\nconst late = () => {" + LATE_REGISTRATIONS + "};",
        setup_body="saved = context;",
    )
    assert call(plugin_runner, source) == ToolResult(value=REFUSED_LATE)


def test_timer_scheduled_by_setup_never_registers_anything(plugin_runner: PluginRunner) -> None:
    source = tool_source(
        "return 'ok';",
        setup_body=(
            "setTimeout(() => context.tools.register({ id: 'late', description: 'Late.',\n"
            "  inputSchema: { type: 'object' }, execute: async () => null }), 0);"
        ),
    )
    manifest = activate(plugin_runner, plugin_code(source))
    assert [t.id for t in manifest.tools] == ["t"]
    assert call(plugin_runner, source) == ToolResult(value="ok")


# ---- capabilities -----------------------------------------------------------


def _no_capability(kind: str) -> dict[str, Any]:
    return {
        "tag": "PluginError",
        "code": None,
        "message": f"This host provides no {kind} capability.",
        "publicMessage": None,
    }


def test_capabilities_reject_with_a_plugin_error_on_this_host(
    plugin_runner: PluginRunner,
) -> None:
    source = tool_source(
        "const results = {};\n"
        "const calls = {\n"
        "  readText: () => ctx_files.readText({ path: 'a.txt' }),\n"
        "  resolvePath: () => ctx_files.resolvePath({ path: 'a.txt' }),\n"
        "  shell: () => ctx_shell.execute({ command: 'ls' }),\n"
        "  web: () => ctx_web.fetchText({ url: 'https://example.com' }),\n"
        "};\n"
        "for (const [name, fn] of Object.entries(calls)) {\n"
        "  try { await fn(); results[name] = 'resolved'; }\n"
        "  catch (e) { results[name] = describe(e); }\n"
        "}\n"
        "return results;",
        prefix="let ctx_files, ctx_shell, ctx_web;",
        setup_body=(
            "ctx_files = context.workspaceFiles; ctx_shell = context.workspaceShell;\n"
            "ctx_web = context.webFetch;"
        ),
    )
    assert call(plugin_runner, source) == ToolResult(
        value={
            "readText": _no_capability("workspaceFiles"),
            "resolvePath": _no_capability("workspaceFiles"),
            "shell": _no_capability("workspaceShell"),
            "web": _no_capability("webFetch"),
        }
    )


def test_capability_in_setup_rejects_and_uncaught_fails_setup(
    plugin_runner: PluginRunner,
) -> None:
    source = plugin_source("await context.workspaceFiles.readText({ path: 'a.txt' });")
    assert failure_of(plugin_runner, source) == SETUP_FAILED


def test_capability_caught_in_setup(plugin_runner: PluginRunner) -> None:
    source = tool_source(
        "return seen;",
        prefix="let seen = null;",
        setup_body=(
            "try { await context.workspaceFiles.readText({ path: 'a.txt' }); }\n"
            "catch (e) { seen = describe(e); }"
        ),
    )
    assert call(plugin_runner, source) == ToolResult(value=_no_capability("workspaceFiles"))


def test_capability_kept_from_setup_answers_in_execute(plugin_runner: PluginRunner) -> None:
    # A context kept from setup and used by execute in the same isolate reaches
    # the host (a call is open), which answers as a host without the capability.
    source = tool_source(
        "try { await saved.workspaceFiles.readText({ path: 'a.txt' }); return 'resolved'; }\n"
        "catch (e) { return describe(e); }",
        prefix="let saved = null;",
        setup_body="saved = context;",
    )
    assert call(plugin_runner, source) == ToolResult(value=_no_capability("workspaceFiles"))


def test_activation_leaves_nothing_behind(plugin_runner: PluginRunner) -> None:
    # Module state never survives between isolates: each call sees a fresh module.
    source = tool_source(
        "counter += 1; return counter;",
        prefix="let counter = 0;",
        setup_body="counter += 10;",
    )
    code = plugin_code(source)

    async def three() -> list[ToolResult]:
        return [await activate_and_call(plugin_runner, code, {}) for _ in range(3)]

    assert asyncio.run(three()) == [ToolResult(value=11)] * 3


def test_activation_defaults() -> None:
    assert ACTIVATION.to_json() == {
        "scope": "session",
        "revision": {"id": "rev-1", "version": 1},
        "sessionId": "sess-1",
    }
