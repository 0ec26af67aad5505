"""Turns: the pipeline a harness drives for one user prompt.

A Turn records its `TurnEvent`s in order (readable while it runs and after),
runs hooks in the contract's order (host scope, then session scope; plugin
order, then registration order; one at a time, each in its own isolate), and
runs a model response's tool calls: each is validated, passed through the
`tool.execute.before` hooks, projected and authorized one at a time in the
model's order, then every approved `execute` runs concurrently, followed by
`tool.execute.after` for the calls that ran.

A throwing hook, a denied call, an invalid permissions answer or an expired
approval wait ends the Turn (`TurnFailed`); model-visible call failures do not.
"""

from __future__ import annotations

import asyncio
import logging
import re
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from ._activation import PluginCode, PluginRunner, trimmed_public_message
from ._calls import QUESTION_DISMISSED, Deliver, GuestFailure, HostOperations
from ._declarations import Agent, Skill
from ._errors import IsolateFault, WorkerHostError
from ._isolate import HostRequest
from ._manifest import Manifest, ToolDescriptor
from ._permissions import Resolution, Ruleset, SavedPermission, resolve_projection
from ._schema import validate_input
from ._storage import Pin, SqliteStore
from ._tools import (
    EXECUTION_FAILED,
    INPUT_INVALID,
    MAX_TOOL_PUBLIC_MESSAGE,
    CallContext,
    ToolResult,
    execute_tool,
    project_permissions,
)

log = logging.getLogger("worker_host.turns")

Reply = Literal["once", "always", "reject"]
MAX_ACTIVITY_MESSAGE = 1024
MAX_ACTIVITY_PREVIEW_BYTES = 50 * 1024
MAX_SAFE_INTEGER = 2**53 - 1
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


class ActivePlugin:
    """A pinned plugin of the effective catalog, ready to run in its scope.

    Its bundle is read from the store (and re-verified) only when the plugin
    first runs, so listing a catalog or calling one tool touches no other
    plugin's bytes.
    """

    def __init__(self, scope: Literal["host", "session"], pin: Pin, manifest: Manifest,
                 load_code: Callable[[], PluginCode]) -> None:
        self.scope = scope
        self.pin = pin
        self.manifest = manifest
        self._load_code = load_code
        self._code: PluginCode | None = None

    @property
    def code(self) -> PluginCode:
        if self._code is None:
            self._code = self._load_code()
        return self._code


@dataclass(frozen=True)
class Catalog:
    """A session's effective catalog: host plugins, then session plugins."""

    plugins: tuple[ActivePlugin, ...]
    default_agent: str | None = None

    def tool(self, name: str) -> tuple[ActivePlugin, ToolDescriptor] | None:
        for plugin in self.plugins:
            tool = plugin.manifest.tool(name)
            if tool is not None:
                return plugin, tool
        return None

    def hooks(self, name: str) -> list[tuple[ActivePlugin, int]]:
        """Handlers for `name` in the order they run."""
        return [
            (plugin, index)
            for plugin in self.plugins
            for index, hook in enumerate(plugin.manifest.hooks)
            if hook == name
        ]

    @property
    def skills(self) -> list[tuple[ActivePlugin, Skill]]:
        return [(plugin, skill) for plugin in self.plugins for skill in plugin.manifest.skills]

    @property
    def agents(self) -> list[tuple[ActivePlugin, Agent]]:
        return [(plugin, agent) for plugin in self.plugins for agent in plugin.manifest.agents]

    def agent(self, agent_id: str) -> Agent | None:
        return next((agent for _, agent in self.agents if agent.id == agent_id), None)


@dataclass(frozen=True)
class ToolCall:
    """One tool call of a model response."""

    name: str
    input: Any
    id: str = field(default_factory=lambda: str(uuid.uuid4()))


@dataclass(frozen=True)
class PermissionAnswer:
    """A client's reply to a permission request.

    `source` is how the approval event records it: `callback` for the
    embedding host's client, `remote` for a reply submitted to the session.
    """

    reply: Reply
    message: str | None = None
    source: Literal["callback", "remote"] = "callback"


class Client(Protocol):
    """Someone who can answer a Turn's permission requests and questions.

    Returning None means this client cannot answer: a permission request is
    then denied and questions are dismissed.
    """

    async def permission(self, request: dict[str, Any]) -> PermissionAnswer | None: ...

    async def question(self, request: dict[str, Any]) -> list[list[str]] | None: ...


class RemoteReplies:
    """A client that waits for replies submitted to the session from any process.

    Each permission request is recorded for `Session.pending_requests` and
    answered by `Session.reply_permission` (in this process or another); the
    approval is recorded with source `remote`. Questions cannot be answered
    this way and are dismissed.
    """

    POLL_SECONDS = 0.1

    def __init__(self, store: SqliteStore, session_id: str) -> None:
        self._store = store
        self._session_id = session_id

    async def permission(self, request: dict[str, Any]) -> PermissionAnswer | None:
        self._store.add_permission_request(self._session_id, request)
        try:
            while True:
                answer = self._store.permission_reply(request["id"])
                if answer is not None and answer[0] in ("once", "always", "reject"):
                    return PermissionAnswer(answer[0], answer[1], "remote")  # type: ignore[arg-type]
                await asyncio.sleep(self.POLL_SECONDS)
        finally:
            self._store.close_permission_request(request["id"])

    async def question(self, request: dict[str, Any]) -> list[list[str]] | None:
        return None


class TurnFailed(WorkerHostError):
    """The Turn ended as failed (or at a limit); `outcome` is its `TurnOutcome`."""

    def __init__(self, outcome: dict[str, Any]) -> None:
        fault = outcome.get("fault") or outcome["diagnostic"]
        super().__init__(fault["code"], fault["message"])
        self.outcome = outcome


@dataclass
class TurnSettings:
    """What a Turn needs from its session and host."""

    runner: PluginRunner
    store: SqliteStore
    session_id: str
    workdir: str
    catalog: Catalog
    ruleset: Ruleset
    scope: Callable[[], HostOperations]
    client: Client | None = None
    approval_wait_ms: int | None = None
    agent: Agent | None = None


@dataclass
class _BeforeHooks:
    """What the `tool.execute.before` hooks decided so far for one call."""

    input: Any
    invalid: bool = False
    decisions: list[str] = field(default_factory=list)


@dataclass
class _Prepared:
    call: ToolCall
    plugin: ActivePlugin
    tool: ToolDescriptor
    tool_input: Any
    projections: list[dict[str, Any]]


@dataclass
class _Waiting:
    """A permission request waiting for a client, in this process."""

    request: dict[str, Any]
    ruleset: Ruleset
    settled: asyncio.Future[Resolution]


# Requests waiting for an answer, per store and session: an `always` reply
# elsewhere in the session resolves the ones its saved patterns now allow.
_waiting: dict[tuple[int, str], dict[str, _Waiting]] = {}


def _release_saved(key: tuple[int, str], saved: Sequence[SavedPermission]) -> None:
    loop = asyncio.get_running_loop()
    for waiting in list(_waiting.get(key, {}).values()):
        if waiting.settled.done() or waiting.settled.get_loop() is not loop:
            continue
        request = waiting.request
        resolution = resolve_projection(waiting.ruleset, saved, request["action"],
                                        request["resources"], None)
        if resolution.effect == "allow":
            waiting.settled.set_result(resolution)


class Turn:
    """One Turn of a session. Obtain it from `Session.begin_turn` or `Session.turn`."""

    def __init__(self, turn_id: str, model: dict[str, Any], settings: TurnSettings) -> None:
        self.id = turn_id
        self.model = model
        self._settings = settings
        self.activity: dict[str, dict[str, Any]] = {}
        self._checkpoints: dict[str, int] = {}

    # ---- events and outcome ------------------------------------------------

    def events(self) -> list[dict[str, Any]]:
        """Every event recorded so far, in order."""
        return self._settings.store.turn_events(self.id)

    @property
    def outcome(self) -> dict[str, Any] | None:
        """The `TurnOutcome` once the Turn has settled, else None."""
        return self._settings.store.load_turn(self._settings.session_id, self.id).outcome

    def _emit(self, event: dict[str, Any], outcome: dict[str, Any] | None = None) -> None:
        self._settings.store.append_event(self.id, {**event, "turnId": self.id}, outcome)

    def _check_open(self) -> None:
        if self.outcome is not None:
            raise WorkerHostError("turn_ended", f"Turn {self.id} has already ended.")

    def _fail(self, code: str, message: str) -> TurnFailed:
        outcome = {"kind": "failed", "turnId": self.id, "fault": {"code": code, "message": message}}
        self._emit({"type": "turn.terminal", "outcome": outcome}, outcome)
        return TurnFailed(outcome)

    def _limit(self, limit: dict[str, Any], code: str, message: str) -> TurnFailed:
        outcome = {"kind": "limit_reached", "turnId": self.id, "limit": limit,
                   "diagnostic": {"code": code, "message": message}}
        self._emit({"type": "turn.terminal", "outcome": outcome}, outcome)
        return TurnFailed(outcome)

    async def end(self, text: str = "") -> dict[str, Any]:
        """Completes the Turn with the model's visible `text`. Raises `turn_ended`."""
        self._check_open()
        outcome = {"kind": "completed", "turnId": self.id, "text": text}
        self._emit({"type": "turn.terminal", "outcome": outcome}, outcome)
        return outcome

    async def cancel(self, reason: str | None = None) -> dict[str, Any]:
        """Cancels the Turn. Raises `turn_ended`."""
        self._check_open()
        outcome: dict[str, Any] = {"kind": "cancelled", "turnId": self.id}
        if reason:
            outcome["reason"] = reason
        self._emit({"type": "turn.terminal", "outcome": outcome}, outcome)
        return outcome

    # ---- hooks ----------------------------------------------------------------

    async def start(self, prompt: list[dict[str, Any]]) -> None:
        """Records `turn.started` and runs the `turn.before` hooks."""
        self._emit({"type": "turn.started", "model": self.model})
        await self._run_hooks("turn.before", {"turnId": self.id, "prompt": prompt,
                                              "model": self.model})

    async def model_request(
        self,
        iteration: int,
        messages: list[Any],
        system_prompt: str | None = None,
    ) -> None:
        """Runs the `model.request.before` hooks for one model request."""
        self._check_open()
        hook_input: dict[str, Any] = {
            "turnId": self.id,
            "providerId": self.model["providerId"],
            "modelId": self.model["modelId"],
            "iteration": iteration,
            "messages": messages,
        }
        if system_prompt is not None:
            hook_input["systemPrompt"] = system_prompt
        await self._run_hooks("model.request.before", hook_input)

    async def _run_hooks(
        self, name: str, hook_input: dict[str, Any],
        each: Callable[[Any], Awaitable[bool]] | None = None,
        make_input: Callable[[], dict[str, Any]] | None = None,
    ) -> None:
        """Runs `name`'s handlers one at a time; `each` sees every result and
        returns False to skip the rest. A throw fails the Turn (`runtime_failed`)."""
        settings = self._settings
        for plugin, index in settings.catalog.hooks(name):
            request = {"target": {"kind": "hook", "index": index},
                       "input": make_input() if make_input else hook_input, "context": {}}
            try:
                answer = await settings.runner.invoke(plugin.code, plugin.pin.fingerprint,
                                                      request, settings.scope())
            except (IsolateFault, WorkerHostError) as error:
                log.warning("hook %s of %s: %s", name, plugin.pin.plugin_id, error.code)
                raise self._fail("runtime_failed", _hook_failed(name, plugin)) from error
            if answer.status == "failed":
                public = trimmed_public_message(answer.error or {}, MAX_TOOL_PUBLIC_MESSAGE)
                log.info("hook %s of %s threw: %s", name, plugin.pin.plugin_id, answer.error)
                raise self._fail("runtime_failed", public or _hook_failed(name, plugin))
            if each is not None and not await each(answer.value):
                return

    def check_agent_tools(self) -> None:
        """Fails the Turn when its Agent requires a tool the catalog lacks."""
        agent = self._settings.agent
        if agent is None or agent.tools.mode != "include":
            return
        for name in agent.tools.names:
            if self._settings.catalog.tool(name) is None:
                raise self._fail("agent_tool_missing",
                                 f"Agent {agent.id} requires the tool {name}, which this "
                                 "session does not have.")

    # ---- tools ----------------------------------------------------------------

    def tools(self) -> list[tuple[ActivePlugin, ToolDescriptor]]:
        """The model-facing tools: the Agent's selection, minus tools the rules hide."""
        selection = self._settings.agent.tools if self._settings.agent else None
        listed = []
        for plugin in self._settings.catalog.plugins:
            for tool in plugin.manifest.tools:
                if selection is not None and (
                    selection.mode == "none"
                    or (selection.mode == "include"
                        and tool.id not in selection.names + selection.optional_names)
                ):
                    continue
                if not self._settings.ruleset.hides_tool(tool.id):
                    listed.append((plugin, tool))
        return listed

    async def call_tools(self, calls: Sequence[ToolCall]) -> list[ToolResult]:
        """Runs one model response's tool calls; returns what the model sees of each.

        Raises `TurnFailed` (`runtime_failed` for a throwing hook,
        `tool_denied`, `invalid_permissions`, `approval_wait_limit_reached`)
        and `turn_ended`.
        """
        self._check_open()
        results: list[ToolResult | None] = [None] * len(calls)
        approved: list[tuple[int, _Prepared]] = []
        for position, call in enumerate(calls):
            prepared = await self._prepare(call)
            if isinstance(prepared, ToolResult):
                results[position] = prepared
                if prepared.code != "unknown_tool":  # a requested call settles, failed
                    self._emit({"type": "tool.completed", "toolId": call.name,
                                "toolCallId": call.id, "ok": False})
            else:
                approved.append((position, prepared))
        executed = await asyncio.gather(*(self._execute(prepared) for _, prepared in approved))
        # Ended or cancelled while the calls ran: their results are discarded.
        self._check_open()
        for (position, prepared), result in zip(approved, executed, strict=True):
            results[position] = result
            self._emit({"type": "tool.completed", "toolId": prepared.tool.id,
                        "toolCallId": prepared.call.id, "ok": result.ok})
        for (_, prepared), result in zip(approved, executed, strict=True):
            after = {"turnId": self.id, "toolId": prepared.tool.id,
                     "toolCallId": prepared.call.id, "input": prepared.tool_input,
                     "ok": result.ok,
                     "result": result.value if result.ok else {"error": result.message}}
            await self._run_hooks("tool.execute.after", after)
        return [result for result in results if result is not None]

    async def _prepare(self, call: ToolCall) -> _Prepared | ToolResult:
        found = self._settings.catalog.tool(call.name)
        if found is None or found[1] not in [tool for _, tool in self.tools()]:
            return ToolResult(code="unknown_tool", message=f"There is no tool named {call.name}.")
        plugin, tool = found
        self._emit({"type": "tool.requested", "toolId": tool.id, "toolCallId": call.id})
        if not await validate_input(tool.input_schema, call.input):
            return ToolResult(code="invalid_input", message=INPUT_INVALID)
        state = _BeforeHooks(call.input)

        async def each(result: Any) -> bool:
            if result is None:
                return True
            if not isinstance(result, dict) or set(result) - {"input", "approval"}:
                raise self._fail("runtime_failed",
                                 "A tool.execute.before hook returned something other than "
                                 "nothing or {input, approval}.")
            if "approval" in result:
                if result["approval"] not in ("allow", "deny"):
                    raise self._fail("runtime_failed",
                                     "A tool.execute.before hook answered an approval other "
                                     "than allow or deny.")
                state.decisions.append(result["approval"])
            if "input" in result:
                state.input = result["input"]
                if not await validate_input(tool.input_schema, state.input):
                    state.invalid = True
                    return False
            return True

        await self._run_hooks("tool.execute.before", {}, each, lambda: {
            "turnId": self.id, "toolId": tool.id, "toolCallId": call.id,
            "input": state.input})
        if state.invalid:
            return ToolResult(code="invalid_input", message=INPUT_INVALID)
        decisions = state.decisions
        hook_decision: Literal["allow", "deny"] | None = (
            "deny" if "deny" in decisions else "allow" if "allow" in decisions else None
        )
        context = self._context(call)
        settings = self._settings
        try:
            projections = await project_permissions(settings.runner, plugin.code,
                                                    plugin.pin.fingerprint, tool, state.input,
                                                    context, settings.scope())
        except WorkerHostError as error:
            raise self._fail(error.code, error.message) from error
        if isinstance(projections, ToolResult):
            return projections
        for projection in projections:
            if not await self._authorize(call, tool, projection, hook_decision):
                raise self._fail("tool_denied", f"Permission to run {tool.id} was denied.")
        return _Prepared(call, plugin, tool, state.input, projections)

    def _context(self, call: ToolCall) -> CallContext:
        return CallContext(self._settings.session_id, self.id, call.id, self._settings.workdir)

    async def _authorize(self, call: ToolCall, tool: ToolDescriptor,
                         projection: dict[str, Any],
                         hook_decision: Literal["allow", "deny"] | None) -> bool:
        settings = self._settings
        saved = [SavedPermission(action, pattern)
                 for action, pattern in settings.store.saved_permissions(settings.session_id)]
        request: dict[str, Any] = {
            "id": str(uuid.uuid4()), "sessionId": settings.session_id, "turnId": self.id,
            "toolId": tool.id, "toolCallId": call.id, "action": projection["action"],
            "resources": projection["resources"],
        }
        for optional in ("save", "metadata"):
            if optional in projection:
                request[optional] = projection[optional]
        resolution = resolve_projection(settings.ruleset, saved, projection["action"],
                                        projection["resources"], hook_decision)
        resolved: dict[str, Any] = {"type": "approval.resolved", "toolId": tool.id,
                                    "toolCallId": call.id, "requestId": request["id"]}
        if resolution.effect != "ask":
            self._emit({**resolved, "decision": resolution.effect, "source": resolution.source})
            return resolution.effect == "allow"
        self._emit({"type": "approval.requested", "toolId": tool.id, "toolCallId": call.id,
                    "request": request})
        answer = await self._ask(request)
        if isinstance(answer, Resolution):
            self._emit({**resolved, "decision": answer.effect, "source": answer.source})
            if answer.effect == "allow":
                return True
            if answer.source == "timeout":
                wait = settings.approval_wait_ms or 0
                raise self._limit(
                    {"name": "approval_wait", "origin": "configured", "value": wait,
                     "unit": "milliseconds"},
                    "approval_wait_limit_reached",
                    f"No answer to the permission request for {tool.id} within {wait} ms.")
            return False
        event = {**resolved, "decision": "deny" if answer.reply == "reject" else "allow",
                 "source": answer.source, "reply": answer.reply}
        if answer.reply == "reject" and answer.message:
            event["replyMessage"] = answer.message
        self._emit(event)
        if answer.reply == "always":
            patterns = request.get("save") or []
            settings.store.save_permissions(settings.session_id,
                                            [(request["action"], p) for p in patterns])
            _release_saved((id(settings.store), settings.session_id), [
                SavedPermission(action, pattern)
                for action, pattern in settings.store.saved_permissions(settings.session_id)])
        return answer.reply != "reject"

    async def _ask(self, request: dict[str, Any]) -> PermissionAnswer | Resolution:
        """The client's answer, unless saved permissions settle it first."""
        settings = self._settings
        if settings.client is None:
            return Resolution("deny", "default")
        settled: asyncio.Future[Resolution] = asyncio.get_running_loop().create_future()
        waiting = _waiting.setdefault((id(settings.store), settings.session_id), {})
        waiting[request["id"]] = _Waiting(request, settings.ruleset, settled)
        asking = asyncio.ensure_future(settings.client.permission(request))
        racing: set[asyncio.Future[Any]] = {asking, settled}
        wait = settings.approval_wait_ms
        try:
            done, _ = await asyncio.wait(racing, timeout=None if wait is None else wait / 1000,
                                         return_when=asyncio.FIRST_COMPLETED)
        finally:
            waiting.pop(request["id"], None)
            asking.cancel()
        if settled in done:
            return settled.result()
        if not done:
            return Resolution("deny", "timeout")
        answer = asking.result()
        if answer is None or answer.reply not in ("once", "always", "reject"):
            return Resolution("deny", "default")
        return answer

    async def _execute(self, prepared: _Prepared) -> ToolResult:
        """One approved call; whatever goes wrong fails only that call."""
        settings = self._settings
        scope = _ToolCallScope(settings.scope(), self, prepared.tool.id, prepared.call.id)
        try:
            return await execute_tool(settings.runner, prepared.plugin.code,
                                      prepared.plugin.pin.fingerprint, prepared.tool,
                                      prepared.tool_input, self._context(prepared.call),
                                      prepared.projections, scope)
        except WorkerHostError as error:
            return ToolResult(code=error.code, message=error.message)
        except Exception:
            log.exception("tool %s failed in the host", prepared.tool.id)
            return ToolResult(code="runtime_failed", message=EXECUTION_FAILED)

    # ---- a running tool's activity and questions ----------------------------------

    def report_activity(self, tool_id: str, call_id: str, update: Any) -> None:
        """Validates and stores one activity report, and emits `tool.progress`."""
        problem = activity_problem(update)
        if problem:
            raise GuestFailure({"_tag": "PluginError", "message": f"reportActivity: {problem}"})
        self.activity[call_id] = update
        checkpoint = self._checkpoints.get(call_id, 0) + 1
        self._checkpoints[call_id] = checkpoint
        event: dict[str, Any] = {"type": "tool.progress", "toolId": tool_id, "toolCallId": call_id,
                                 "checkpoint": checkpoint, "observedBytes": update["observedBytes"],
                                 "truncated": update["truncated"]}
        if "artifact" in update:
            event["artifactState"] = update["artifact"]["state"]
        self._emit(event)

    async def ask_question(self, tool_id: str, call_id: str, payload: Any) -> list[list[str]]:
        """Asks the client; returns the answers or raises the dismissal into the guest."""
        questions = payload.get("questions") if isinstance(payload, dict) else None
        problem = questions_problem(questions)
        if problem or not isinstance(questions, list):
            raise GuestFailure({"_tag": "PluginError", "message": f"askQuestion: {problem}"})
        request = {"id": str(uuid.uuid4()), "sessionId": self._settings.session_id,
                   "turnId": self.id, "toolId": tool_id, "toolCallId": call_id,
                   "questions": questions}
        base = {"toolId": tool_id, "toolCallId": call_id}
        self._emit({"type": "question.asked", **base, "request": request})
        client = self._settings.client
        answers = None if client is None else await client.question(request)
        if answers is None or not answers_valid(answers, len(questions)):
            self._emit({"type": "question.rejected", **base, "requestId": request["id"]})
            raise GuestFailure(QUESTION_DISMISSED)
        self._emit({"type": "question.replied", **base, "requestId": request["id"],
                    "answers": answers})
        return answers


class _ToolCallScope:
    """A tool call's host operations: its Turn's activity and questions, then
    the session's capabilities."""

    def __init__(self, base: HostOperations, turn: Turn, tool_id: str, call_id: str) -> None:
        self._base = base
        self._turn = turn
        self._tool_id = tool_id
        self._call_id = call_id

    async def perform(self, request: HostRequest, deliver: Deliver) -> Any:
        if request.kind == "reportActivity":
            self._turn.report_activity(self._tool_id, self._call_id, request.input)
            return None
        if request.kind == "askQuestion":
            return await self._turn.ask_question(self._tool_id, self._call_id, request.input)
        return await self._base.perform(request, deliver)


def _hook_failed(name: str, plugin: ActivePlugin) -> str:
    return f"The {name} hook of {plugin.pin.plugin_id} failed."


def activity_problem(update: Any) -> str | None:
    """Why a `ToolActivityUpdate` is malformed, or None."""
    if not isinstance(update, dict):
        return "the update must be an object"
    unknown = set(update) - {"message", "preview", "observedBytes", "truncated", "artifact"}
    if unknown:
        return f"unknown member {sorted(unknown)[0]!r}"
    if "message" in update and (not isinstance(update["message"], str)
                                or len(update["message"]) > MAX_ACTIVITY_MESSAGE):
        return f"message must be a string of at most {MAX_ACTIVITY_MESSAGE} characters"
    if "preview" in update and (
        not isinstance(update["preview"], str)
        or len(update["preview"].encode("utf-8", "surrogatepass")) > MAX_ACTIVITY_PREVIEW_BYTES
    ):
        return "preview must be a string of at most 50 KiB"
    if not _safe_count(update.get("observedBytes")):
        return "observedBytes must be a non-negative safe integer"
    if not isinstance(update.get("truncated"), bool):
        return "truncated must be a boolean"
    artifact = update.get("artifact")
    if "artifact" in update and (
        not isinstance(artifact, dict)
        or set(artifact) != {"id", "path", "observedBytes", "state"}
        or not (isinstance(artifact["id"], str) and _UUID.fullmatch(artifact["id"]))
        or not _relative_path(artifact["path"])
        or not _safe_count(artifact["observedBytes"])
        or artifact["state"] not in ("writing", "complete", "incomplete")
    ):
        return "artifact must have a UUID id, a normalized relative path, observedBytes and state"
    return None


def _safe_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_SAFE_INTEGER


def _relative_path(value: Any) -> bool:
    return (isinstance(value, str) and value != "" and not value.startswith("/")
            and "\\" not in value and all(part not in ("", ".", "..")
                                          for part in value.split("/")))


def questions_problem(questions: Any) -> str | None:
    """Why `askQuestion`'s prompts are invalid, or None."""
    if not isinstance(questions, list) or not questions:
        return "at least one question is required"
    for prompt in questions:
        if not isinstance(prompt, dict) or set(prompt) - {"question", "header", "options",
                                                           "multiple", "custom"}:
            return "each question must be {question, header, options, multiple?, custom?}"
        if not _text(prompt.get("question"), 4096) or not _text(prompt.get("header"), 30):
            return "question must be 1 to 4,096 characters and header 1 to 30"
        options = prompt.get("options")
        if not isinstance(options, list) or not options or not all(
            isinstance(option, dict) and set(option) == {"label", "description"}
            and _text(option["label"], 256) and isinstance(option["description"], str)
            and len(option["description"]) <= 4096
            for option in options
        ):
            return "options must be at least one {label (1-256), description (<= 4,096)}"
        for flag in ("multiple", "custom"):
            if flag in prompt and not isinstance(prompt[flag], bool):
                return f"{flag} must be a boolean"
    return None


def answers_valid(answers: Any, count: int) -> bool:
    """One answer per question, each one or more non-empty strings of <= 4,096."""
    return isinstance(answers, list) and len(answers) == count and all(
        isinstance(answer, list) and answer and all(_text(item, 4096) for item in answer)
        for answer in answers
    )


def _text(value: Any, limit: int) -> bool:
    return isinstance(value, str) and 1 <= len(value) <= limit
