"""Tool calls: validate the input, project permissions, execute, check the result.

What the model sees of a call is a `ToolResult`: the plain JSON value, or a
failure with a stable code and a safe message. A plugin's `message` never
leaves the host log; only a `PluginError`'s trimmed `publicMessage` does.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any

from ._activation import PluginCode, PluginRunner, trimmed_public_message
from ._calls import HostOperations
from ._errors import IsolateFault, WorkerHostError
from ._isolate import STACK_OVERFLOW, GuestAnswer
from ._manifest import ToolDescriptor
from ._schema import json_identity, validate_input

log = logging.getLogger("worker_host.tools")

MAX_TOOL_PUBLIC_MESSAGE = 4096
INPUT_INVALID = "Tool input validation failed."
EXECUTION_FAILED = "Tool execution failed."
QUESTION_DISMISSED = "The user dismissed this question."
OUTPUT_INVALID = "Tool returned a value that is not plain JSON."
# Bounds on a projection: pattern matching costs the product of a pattern's
# and a value's lengths, and a plugin chooses both (resources and save).
MAX_ACTION_LENGTH = 256
MAX_RESOURCE_LENGTH = 4096
MAX_PROJECTION_ITEMS = 64


@dataclass(frozen=True)
class ToolResult:
    """The model-visible outcome of one tool call.

    On success `value` is the plain JSON the tool returned and `code` is None.
    On failure `code` is stable (`invalid_input`, `runtime_failed`,
    `invalid_output`, `question_dismissed`, `setup_nondeterministic`,
    `cpu_time_exceeded`, `memory_limit_exceeded`, `stack_overflow`, ...) and
    `message` is the safe text the model sees.
    """

    value: Any = None
    code: str | None = None
    message: str | None = None

    @property
    def ok(self) -> bool:
        return self.code is None

    @property
    def text(self) -> str:
        """The result as the model gets it: a string as is, other JSON as JSON."""
        if not self.ok:
            return str(self.message)
        if isinstance(self.value, str):
            return self.value
        return json.dumps(self.value, ensure_ascii=False)


@dataclass(frozen=True)
class CallContext:
    """Identity fields a tool's `permissions` and `execute` receive."""

    session_id: str
    turn_id: str
    tool_call_id: str
    workdir: str

    def to_json(self) -> dict[str, Any]:
        return {
            "sessionId": self.session_id,
            "turnId": self.turn_id,
            "toolCallId": self.tool_call_id,
            "workdir": self.workdir,
        }


def _failure(code: str, message: str) -> ToolResult:
    return ToolResult(code=code, message=message)


async def call_tool(
    runner: PluginRunner,
    plugin: PluginCode,
    fingerprint: str,
    tool: ToolDescriptor,
    tool_input: Any,
    context: CallContext,
    operations: HostOperations | None = None,
) -> ToolResult:
    """Runs one tool call through validation, permissions and execution, with
    no rules or hooks (the Turn pipeline adds those; see `_turns`).

    Model-visible failures come back as a failed `ToolResult`. Raises
    `WorkerHostError` `invalid_permissions` when `permissions` answers
    something other than a non-empty list of valid projections (that fails
    the Turn, not only the call).
    """
    if not await validate_input(tool.input_schema, tool_input):
        return _failure("invalid_input", INPUT_INVALID)
    projections = await project_permissions(
        runner, plugin, fingerprint, tool, tool_input, context, operations
    )
    if isinstance(projections, ToolResult):
        return projections
    return await execute_tool(
        runner, plugin, fingerprint, tool, tool_input, context, projections, operations
    )


async def project_permissions(
    runner: PluginRunner,
    plugin: PluginCode,
    fingerprint: str,
    tool: ToolDescriptor,
    tool_input: Any,
    context: CallContext,
    operations: HostOperations | None = None,
) -> list[dict[str, Any]] | ToolResult:
    """The call's validated projections: the tool's `permissions` run in an
    isolate, or the default `{action: id, resources: ['*'], save: ['*']}`.

    A throw fails only the call (a failed `ToolResult`). Raises
    `invalid_permissions` for an answer that is not valid projections.
    """
    if not tool.has_permissions:
        return [{"action": tool.id, "resources": ["*"], "save": ["*"]}]
    request = {
        "target": {"kind": "tool.permissions", "toolId": tool.id},
        "input": tool_input,
        "context": context.to_json(),
    }
    answer = await _invoke(runner, plugin, fingerprint, tool, request, operations)
    if isinstance(answer, ToolResult):
        return answer
    if answer.status == "failed":
        if (answer.error or {}).get("_tag") == "InvalidOutput":
            raise _invalid_projection("it is not plain JSON")
        return _plugin_failure(plugin.plugin_id, answer.error or {})
    return validate_projections(answer.value)


async def execute_tool(
    runner: PluginRunner,
    plugin: PluginCode,
    fingerprint: str,
    tool: ToolDescriptor,
    tool_input: Any,
    context: CallContext,
    projections: list[dict[str, Any]],
    operations: HostOperations | None = None,
) -> ToolResult:
    """Runs `execute` in an isolate with the authorized projections."""
    request = {
        "target": {"kind": "tool.execute", "toolId": tool.id},
        "input": tool_input,
        "context": {**context.to_json(), "permissions": projections},
    }
    answer = await _invoke(runner, plugin, fingerprint, tool, request, operations)
    if isinstance(answer, ToolResult):
        return answer
    if answer.status == "failed":
        return _plugin_failure(plugin.plugin_id, answer.error or {})
    return ToolResult(value=answer.value)


async def _invoke(
    runner: PluginRunner,
    plugin: PluginCode,
    fingerprint: str,
    tool: ToolDescriptor,
    request: dict[str, Any],
    operations: HostOperations | None,
) -> GuestAnswer | ToolResult:
    """One isolate for the call; faults the model may see become a failed result."""
    try:
        return await runner.invoke(plugin, fingerprint, request, operations)
    except IsolateFault as fault:
        log.warning("tool %s of %s: %s", tool.id, plugin.plugin_id, fault.code)
        return _failure(fault.code, fault.message)
    except WorkerHostError as error:
        if error.code in ("setup_nondeterministic", "setup_failed", "timed_out"):
            return _failure(error.code, error.message)
        raise


def _plugin_failure(plugin_id: str, failure: dict[str, Any]) -> ToolResult:
    tag = failure.get("_tag")
    log.info("plugin %s failed a call: %s", plugin_id, failure)
    if tag == "QuestionDismissedError":
        return _failure("question_dismissed", QUESTION_DISMISSED)
    if tag == "InvalidOutput":
        return _failure("invalid_output", OUTPUT_INVALID)
    if failure.get("stackOverflow") is True:
        return _failure(*STACK_OVERFLOW)
    public = trimmed_public_message(failure, MAX_TOOL_PUBLIC_MESSAGE)
    return _failure("runtime_failed", public or EXECUTION_FAILED)


def validate_projections(value: Any) -> list[dict[str, Any]]:
    """Checks a `permissions` answer and removes exact duplicates.

    Each projection needs a non-empty string `action` (at most 256
    characters), a non-empty list of string `resources`, an optional list of
    string `save` (at most 64 of at most 4,096 characters each) and an
    optional object `metadata`, and nothing else. Raises
    `invalid_permissions`.
    """
    if not isinstance(value, list) or not value:
        raise _invalid_projection("a non-empty list of projections is required")
    unique: list[dict[str, Any]] = []
    seen: set[str] = set()
    for projection in value:
        if not isinstance(projection, dict):
            raise _invalid_projection("each projection must be an object")
        if set(projection) - {"action", "resources", "save", "metadata"}:
            raise _invalid_projection("a projection has an unknown member")
        action = projection.get("action")
        if not isinstance(action, str) or not 0 < len(action) <= MAX_ACTION_LENGTH:
            raise _invalid_projection(
                f"action must be a string of 1 to {MAX_ACTION_LENGTH} characters")
        resources = projection.get("resources")
        if not _string_list(resources, MAX_RESOURCE_LENGTH) or not resources:
            raise _invalid_projection(
                f"resources must be 1 to {MAX_PROJECTION_ITEMS} strings of at most "
                f"{MAX_RESOURCE_LENGTH} characters")
        if "save" in projection and not _string_list(projection["save"], MAX_RESOURCE_LENGTH):
            raise _invalid_projection(
                f"save must be at most {MAX_PROJECTION_ITEMS} strings of at most "
                f"{MAX_RESOURCE_LENGTH} characters")
        if "metadata" in projection and not isinstance(projection["metadata"], dict):
            raise _invalid_projection("metadata must be an object")
        # Exact duplicates by JSON identity: Python's == would merge true and 1.
        identity = json.dumps(json_identity(projection), sort_keys=True)
        if identity not in seen:
            seen.add(identity)
            unique.append(projection)
    return unique


def _string_list(value: Any, max_length: int) -> bool:
    return isinstance(value, list) and len(value) <= MAX_PROJECTION_ITEMS and all(
        isinstance(item, str) and len(item) <= max_length for item in value)


def _invalid_projection(reason: str) -> WorkerHostError:
    return WorkerHostError(
        "invalid_permissions", f"The tool's permission projection is invalid: {reason}."
    )
