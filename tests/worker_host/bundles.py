"""Inline bundles and call helpers shared by the worker_host tests.

A bundle here is plain ES module source with no imports: the default export is
`{id, setup}`, exactly what the packaging command produces. `PluginError` and
`QuestionDismissedError` are minimal copies of the sdk's classes: the host
matches failures by their own `_tag` data property, never by identity.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from worker_host import Activation, Manifest, PluginCode, PluginRunner
from worker_host._tools import CallContext, ToolResult, call_tool

MiB = 1024 * 1024
PLUGIN_ID = "example.x"
ACTIVATION = Activation("session", "rev-1", 1, "sess-1")
CONTEXT = CallContext("sess-1", "turn-1", "call-1", "/workspace")

CPU_TIME_EXCEEDED = ("cpu_time_exceeded", "The plugin ran past its CPU time limit.")
MEMORY_LIMIT_EXCEEDED = ("memory_limit_exceeded", "The plugin ran past its memory limit.")
STACK_OVERFLOW = ("stack_overflow", "The plugin overflowed its stack.")
OUTPUT_TOO_LARGE = ("output_too_large", "The plugin's answer was too large.")
STALLED = (
    "stalled",
    "The plugin's call never settled: it awaited something that never happens.",
)
TIMED_OUT = ("timed_out", "The plugin's call ran past its time limit.")
RUNTIME_FAILED = ("runtime_failed", "Tool execution failed.")
INVALID_OUTPUT = ("invalid_output", "Tool returned a value that is not plain JSON.")
INVALID_INPUT = ("invalid_input", "Tool input validation failed.")
QUESTION_DISMISSED = ("question_dismissed", "The user dismissed this question.")

FAILURE_CLASSES = """
class PluginError extends Error {
  constructor(input) {
    super(input.message);
    Object.defineProperty(this, '_tag', { value: 'PluginError', enumerable: true });
    if (input.publicMessage !== undefined) {
      const value = input.publicMessage;
      Object.defineProperty(this, 'publicMessage', { value, enumerable: true });
    }
  }
}
class QuestionDismissedError extends Error {
  constructor() {
    super('The user dismissed this question.');
    Object.defineProperty(this, '_tag', { value: 'QuestionDismissedError', enumerable: true });
    Object.defineProperty(this, 'code', { value: 'question_dismissed', enumerable: true });
  }
}
// What a tool reports about a caught failure, as plain JSON.
const describe = (e) => ({
  tag: e._tag ?? null,
  code: e.code ?? null,
  message: e.message,
  publicMessage: e.publicMessage ?? null,
});
"""


def plugin_source(setup_body: str, *, plugin_id: str = PLUGIN_ID, prefix: str = "") -> bytes:
    """A bundle whose async `setup(context)` runs `setup_body`; `prefix` is top-level code."""
    return (
        FAILURE_CLASSES
        + prefix
        + "\nexport default { id: "
        + json.dumps(plugin_id)
        + ", setup: async (context) => {\n"
        + setup_body
        + "\n} };\n"
    ).encode()


def tool_source(
    execute_body: str,
    *,
    schema: str = "{ type: 'object' }",
    permissions_body: str | None = None,
    setup_body: str = "",
    prefix: str = "",
    plugin_id: str = PLUGIN_ID,
) -> bytes:
    """A bundle registering tool `t`: `execute_body` is the body of `async (input, ctx) => {}`."""
    permissions = (
        ""
        if permissions_body is None
        else f"  permissions: async (input, ctx) => {{\n{permissions_body}\n}},\n"
    )
    register = (
        "context.tools.register({\n"
        "  id: 't',\n"
        "  description: 'A test tool.',\n"
        f"  inputSchema: {schema},\n"
        f"{permissions}"
        f"  execute: async (input, ctx) => {{\n{execute_body}\n}},\n"
        "});"
    )
    return plugin_source(setup_body + "\n" + register, plugin_id=plugin_id, prefix=prefix)


def plugin_code(
    source: bytes,
    *,
    plugin_id: str = PLUGIN_ID,
    options: dict[str, Any] | None = None,
    activation: Activation = ACTIVATION,
) -> PluginCode:
    return PluginCode(plugin_id, source, activation, options={} if options is None else options)


def activate(runner: PluginRunner, code: PluginCode) -> Manifest:
    return asyncio.run(runner.activate(code))


async def activate_and_call(
    runner: PluginRunner,
    code: PluginCode,
    tool_input: Any,
    context: CallContext = CONTEXT,
    tool_id: str = "t",
) -> ToolResult:
    manifest = await runner.activate(code)
    tool = manifest.tool(tool_id)
    assert tool is not None
    return await call_tool(runner, code, manifest.fingerprint, tool, tool_input, context)


def call(
    runner: PluginRunner,
    source: bytes,
    tool_input: Any = None,
    *,
    options: dict[str, Any] | None = None,
    context: CallContext = CONTEXT,
) -> ToolResult:
    """Activates `source` and calls its tool `t` once, as the model would."""
    code = plugin_code(source, options=options)
    return asyncio.run(
        activate_and_call(runner, code, {} if tool_input is None else tool_input, context)
    )


def failed(code_and_message: tuple[str, str]) -> ToolResult:
    code, message = code_and_message
    return ToolResult(code=code, message=message)


HEALTHY = tool_source("return 'still ok';")


def assert_healthy(runner: PluginRunner) -> None:
    """The runner (and the process) still runs an ordinary plugin after a hostile one."""
    assert call(runner, HEALTHY) == ToolResult(value="still ok")
