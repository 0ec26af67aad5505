"""Sessions: one session's revisions, catalog, rules and Turns.

A `Session` comes from `Host.session`. Its plugins are pinned in immutable
revisions; its effective catalog is the host revision's plugins, then its own;
every tool call runs in a Turn.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bundle_loader import BundleLoaderError, normalize_sha256

from ._activation import Activation
from ._call_scope import CallScope
from ._declarations import Agent, Skill, fallback_default, load_skill_body
from ._errors import WorkerHostError
from ._manifest import Manifest, load_manifest, valid_plugin_id
from ._permissions import PermissionRule, Ruleset
from ._revisions import (
    ToolsDelta,
    activate_pins,
    catalog,
    check_catalog,
    retire,
    roll_back,
    tools_delta,
)
from ._storage import Pin, Revision
from ._tools import ToolResult
from ._turns import Catalog, Client, RemoteReplies, ToolCall, Turn, TurnSettings

if TYPE_CHECKING:
    from ._host import Host

# The model identity of Turns begun without one (a plain `tools call`).
DEFAULT_MODEL = {"providerId": "worker-host", "modelId": "direct"}


@dataclass(frozen=True)
class PluginInfo:
    """A pin as clients see it."""

    plugin_id: str
    url: str
    sha256: str
    options: dict[str, Any]
    fingerprint: str
    shape: str
    signer: str | None = None
    delta: ToolsDelta | None = None
    """When returned by a change: the tools it added and removed."""


@dataclass(frozen=True)
class ToolInfo:
    """A model-facing tool descriptor, with the plugin that declares it."""

    name: str
    description: str
    input_schema: dict[str, Any]
    plugin_id: str
    direct_only: bool = False

    def to_json(self) -> dict[str, Any]:
        value: dict[str, Any] = {
            "name": self.name,
            "description": self.description,
            "inputSchema": self.input_schema,
            "pluginId": self.plugin_id,
        }
        if self.direct_only:
            value["directOnly"] = True
        return value


@dataclass(frozen=True)
class RefreshResult:
    """What `refresh_plugin` did: `changed` is False when the digest was the same."""

    changed: bool
    previous_sha256: str
    plugin: PluginInfo
    delta: ToolsDelta = ToolsDelta()


class Session:
    """One session's plugins and tools. Obtain it from `Host.session`."""

    def __init__(self, host: Host, session_id: str, workdir: str, workspace: Path) -> None:
        self._host = host
        self.id = session_id
        self.workdir = workdir
        self.workspace = workspace
        """The session's workspace directory on the host (`/workspace` to plugins)."""

    def _scope(self) -> CallScope:
        return CallScope.for_workspace(self.workspace, self._host.config.capabilities)

    def revision(self) -> Revision:
        """The active revision (version 0 has no pins)."""
        self._host._check_open()
        return self._host._store.current_revision(self.id)

    def plugins(self) -> list[PluginInfo]:
        """The active revision's pins, in plugin order."""
        return [_plugin_info(pin) for pin in self.revision().pins]

    def tools(self) -> list[ToolInfo]:
        """The model-facing tool descriptors: host plugins' then this session's,
        minus tools the permission rules hide."""
        ruleset = self.ruleset()
        return [
            ToolInfo(tool.id, tool.description, tool.input_schema, plugin.pin.plugin_id,
                     tool.direct_only)
            for plugin in self.catalog().plugins
            for tool in plugin.manifest.tools
            if not ruleset.hides_tool(tool.id)
        ]

    async def add_plugin(
        self,
        url: str,
        plugin_id: str,
        *,
        sha256: str | None = None,
        options: dict[str, Any] | None = None,
        signature: bytes | None = None,
    ) -> PluginInfo:
        """Fetches, pins and activates a bundle in a new revision.

        With a trust policy, the bundle must carry a valid signature by a
        trusted key (`signature`, else fetched from `URL.sig`) before anything
        is activated. Raises `WorkerHostError`: `invalid_plugin_id`,
        `plugin_exists`, `invalid_sha256`, `invalid_options`, the fetch codes
        (`invalid_url`, `request_failed`, `timed_out`, `http_status`,
        `too_large`, `integrity_mismatch`), the signature codes
        (`signature_missing`, `signature_invalid`, `untrusted_key`,
        `no_trust_policy`), and every activation code (`bundle_invalid`,
        `setup_failed`, `invalid_contribution`, `plugin_id_mismatch`, isolate
        faults). On any failure the active revision is unchanged.
        """
        if not valid_plugin_id(plugin_id):
            raise WorkerHostError(
                "invalid_plugin_id",
                f"{plugin_id!r} is not a plugin id: use at most 128 lowercase letters and digits "
                "joined by single '.', '_' or '-', starting with a letter.",
            )
        expected = _normalized_digest(sha256)
        options = _checked_options(options)
        current = self.revision()
        if current.pin(plugin_id) is not None:
            raise WorkerHostError(
                "plugin_exists",
                f"Plugin {plugin_id} is already added to session {self.id}; refresh it instead.",
            )
        _, digest = await self._host._fetch(url, expected)
        signature_text, signer = await self._host._signature(url, digest, signature)
        placeholder = Pin(plugin_id, url, digest, options, "", "", signature_text, signer)
        revision, delta = await self._commit(current, [*current.pins, placeholder])
        return replace(_plugin_info(_require_pin(revision, plugin_id)), delta=delta)

    async def refresh_plugin(self, plugin_id: str) -> RefreshResult:
        """Refetches a pin's URL; only a new digest makes a new revision.

        Raises `plugin_not_found`, the fetch codes and the activation codes;
        on failure the active revision is unchanged.
        """
        current = self.revision()
        pin = current.pin(plugin_id)
        if pin is None:
            raise _plugin_not_found(plugin_id, self.id)
        _, digest = await self._host._fetch(pin.url, None)
        if digest == pin.sha256 and (self._host.config.trust is None or pin.signature):
            return RefreshResult(False, pin.sha256, _plugin_info(pin))
        signature_text, signer = await self._host._signature(pin.url, digest, None)
        replaced = Pin(plugin_id, pin.url, digest, pin.options, "", "", signature_text, signer)
        pins = [replaced if each.plugin_id == plugin_id else each for each in current.pins]
        revision, delta = await self._commit(current, pins)
        return RefreshResult(True, pin.sha256, _plugin_info(_require_pin(revision, plugin_id)),
                             delta)

    async def remove_plugin(self, plugin_id: str) -> ToolsDelta:
        """Removes a pin in a new revision; returns the tools delta.

        Raises `plugin_not_found`."""
        current = self.revision()
        if current.pin(plugin_id) is None:
            raise _plugin_not_found(plugin_id, self.id)
        _, delta = await self._commit(
            current, [pin for pin in current.pins if pin.plugin_id != plugin_id])
        return delta

    async def _commit(self, current: Revision, pins: Sequence[Pin]) -> tuple[Revision, ToolsDelta]:
        """Activates every pin under a new revision identity, then commits it.

        Any activation failure, or a conflict with the host's catalog,
        rejects the whole revision: nothing is written. The retired
        revision's cleanups run after the commit.
        """
        host = self._host
        revision_id = str(uuid.uuid4())
        activation = Activation("session", revision_id, current.version + 1, self.id)
        activated, _ = await activate_pins(host._runner, "session", activation, pins,
                                           host._pinned_bundle, self._scope())
        try:
            check_catalog(host._host_revision().pins, activated, host.config.default_agent)
            revision = host._store.commit_revision(self.id, current.version, revision_id,
                                                   activated)
        except WorkerHostError:
            await roll_back(host._runner, activated, activation, host._pinned_bundle,
                            self._scope())
            raise
        await retire(host._runner, current, self._activation(current), host._pinned_bundle,
                     self._scope())
        return revision, tools_delta(current.pins, revision.pins)

    def _activation(self, revision: Revision) -> Activation:
        return Activation("session", revision.revision_id, revision.version, self.id)

    def catalog(self) -> Catalog:
        """The effective catalog: host plugins, then this session's.

        Raises `catalog_conflict` when the host's plugins changed since this
        session's revision was made and now clash with it (a tool, Skill or
        Agent id declared in both scopes): nothing is shadowed silently.
        """
        host = self._host
        host_revision = host._host_revision()
        revision = self.revision()
        try:
            check_catalog(host_revision.pins, revision.pins, host.config.default_agent)
        except WorkerHostError as error:
            raise WorkerHostError(
                "catalog_conflict",
                f"Session {self.id}'s plugins conflict with the host's: "
                f"{error.message.removeprefix('The revision is invalid: ')} "
                "Remove or replace the session's plugin.",
            ) from error
        return catalog(host_revision.pins, host_activation(host_revision), revision.pins,
                       self._activation(revision), host._pinned_bundle, host.config.default_agent)

    def ruleset(self, agent: Agent | None = None) -> Ruleset:
        """Host rules, then this session's, then the Agent's; the last match wins."""
        config = self._host.config
        session_rules = self.rules()
        agent_rules = [PermissionRule(rule.action, rule.resource, rule.effect)
                       for rule in (agent.permissions if agent else ())]
        return Ruleset([config.permissions, session_rules, agent_rules],
                       case_sensitive=config.case_sensitive_permissions)

    def add_rule(self, action: str, resource: str, effect: str) -> None:
        """Appends a session permission rule. Raises `invalid_rule`."""
        rule = PermissionRule.from_json({"action": action, "resource": resource,
                                         "effect": effect})
        self._host._store.add_rule(self.id, rule.action, rule.resource, rule.effect)

    def rules(self) -> list[PermissionRule]:
        """The session's own rules, in order."""
        return [PermissionRule(action, resource, effect)  # type: ignore[arg-type]
                for action, resource, effect in self._host._store.rules(self.id)]

    async def begin_turn(
        self,
        prompt: str = "",
        *,
        model: dict[str, str] | None = None,
        client: Client | None = None,
        agent: str | None = None,
    ) -> Turn:
        """Starts a Turn: records `turn.started` and runs the `turn.before` hooks.

        `client` answers permission requests and questions; without one a
        request that asks is denied and questions are dismissed. `agent`
        selects an Agent (else the catalog's default, else the fallback).
        Raises `TurnFailed` when a hook throws or the Agent requires a tool
        the catalog lacks (`agent_tool_missing`), `unknown_agent`, and
        `agent_not_primary` for a `subagent`-only Agent.
        """
        turn = self._turn(str(uuid.uuid4()), model or DEFAULT_MODEL, client, agent, create=True)
        await turn.start([{"type": "text", "text": prompt}])
        turn.check_agent_tools()
        return turn

    def turn(self, turn_id: str, *, client: Client | None = None,
             agent: str | None = None) -> Turn:
        """A Turn begun earlier (possibly by another process). Raises `turn_not_found`."""
        record = self._host._store.load_turn(self.id, turn_id)
        return self._turn(record.id, record.model, client, agent or record.agent, create=False)

    def _turn(self, turn_id: str, model: dict[str, str], client: Client | None,
              agent_id: str | None, *, create: bool) -> Turn:
        catalog = self.catalog()
        chosen = agent_id or catalog.default_agent or fallback_default(
            [agent for _, agent in catalog.agents])
        agent = catalog.agent(chosen) if chosen else None
        if agent_id and agent is None:
            raise WorkerHostError("unknown_agent", f"Session {self.id} has no agent {agent_id!r}.")
        if create and agent is not None and not agent.primary_capable:
            raise WorkerHostError("agent_not_primary",
                                  f"Agent {agent.id} runs only as a subagent; it cannot take a "
                                  "user Turn.")
        if create:
            self._host._store.create_turn(turn_id, self.id, model, agent.id if agent else None)
        settings = TurnSettings(
            runner=self._host._runner, store=self._host._store, session_id=self.id,
            workdir=self.workdir, catalog=catalog, ruleset=self.ruleset(agent),
            scope=self._scope, client=client, approval_wait_ms=self._host.config.approval_wait_ms,
            agent=agent,
        )
        return Turn(turn_id, model, settings)

    async def call_tool(
        self, name: str, tool_input: Any, *, turn_id: str | None = None,
        client: Client | None = None,
    ) -> ToolResult:
        """Calls one tool and returns what the model sees.

        Inside the Turn `turn_id`, or in a Turn of its own that begins and
        ends around the call. Raises `unknown_tool` when the model would see
        no such tool, and `TurnFailed` when the Turn fails (`tool_denied`,
        `runtime_failed`, `invalid_permissions`, `approval_wait_limit_reached`).
        """
        turn = (self.turn(turn_id, client=client) if turn_id
                else await self.begin_turn(client=client))
        (result,) = await turn.call_tools([ToolCall(name, tool_input)])
        if result.code == "unknown_tool" and turn_id is None:
            await turn.cancel("unknown tool")
            raise WorkerHostError("unknown_tool", f"Session {self.id} has no tool named {name!r}.")
        if turn_id is None:
            await turn.end(result.text)
        return result

    def remote_replies(self) -> RemoteReplies:
        """A client for `begin_turn`/`call_tool` whose permission requests wait
        for `reply_permission`, from this process or any other (source `remote`)."""
        return RemoteReplies(self._host._store, self.id)

    def pending_requests(self) -> list[dict[str, Any]]:
        """Permission requests of this session waiting for a remote reply."""
        return self._host._store.pending_permission_requests(self.id)

    def reply_permission(self, request_id: str, reply: str, message: str | None = None) -> None:
        """Answers a waiting permission request with `once`, `always` or `reject`.

        Raises `invalid_reply`, or `request_not_pending` when no such request
        of this session is waiting.
        """
        if reply not in ("once", "always", "reject"):
            raise WorkerHostError("invalid_reply", "A reply is once, always or reject.")
        if not self._host._store.reply_permission(self.id, request_id, reply, message):
            raise WorkerHostError("request_not_pending",
                                  f"Session {self.id} has no pending request {request_id!r}.")

    def skills(self) -> list[tuple[str, Skill]]:
        """The catalog's Skills with the plugin that declares each."""
        return [(plugin.pin.plugin_id, skill) for plugin, skill in self.catalog().skills]

    def agents(self) -> list[tuple[str, Agent]]:
        """The catalog's Agents with the plugin that declares each."""
        return [(plugin.pin.plugin_id, agent) for plugin, agent in self.catalog().agents]

    def load_skill(self, skill_id: str) -> str:
        """A Skill's body as Core's `skill` tool would return it. Raises `unknown_skill`."""
        for plugin_id, skill in self.skills():
            if skill.id == skill_id:
                return load_skill_body(skill, plugin_id=plugin_id)
        raise WorkerHostError("unknown_skill", f"Session {self.id} has no skill {skill_id!r}.")

    def inspect(self, plugin_id: str) -> dict[str, Any]:
        """Everything about one plugin of the catalog, as JSON.

        The pin (url, digest, options, signer), its scope, the activation
        state (`active`, or `failed` with the reason for a skipped host
        plugin), the fingerprint, each contribution and the shape. Raises
        `plugin_not_found`.
        """
        for failure in self._host.host_failures():
            if failure.plugin_id == plugin_id:
                return {"pluginId": plugin_id, "scope": "host", "state": "failed",
                        "failure": failure.message}
        for plugin in self.catalog().plugins:
            if plugin.pin.plugin_id != plugin_id:
                continue
            pin, manifest = plugin.pin, plugin.manifest
            return {
                "pluginId": plugin_id, "scope": plugin.scope, "state": "active",
                "pin": {"url": pin.url, "sha256": pin.sha256, "options": pin.options,
                        "signer": pin.signer},
                "fingerprint": pin.fingerprint, "shape": manifest.shape,
                "tools": [{"id": tool.id, "description": tool.description,
                           "inputSchema": tool.input_schema,
                           "permissions": tool.has_permissions,
                           "directOnly": tool.direct_only} for tool in manifest.tools],
                "hooks": list(manifest.hooks),
                "skills": [skill.to_json() for skill in manifest.skills],
                "agents": [agent.to_json() for agent in manifest.agents],
                "defaultAgent": manifest.default_agent,
                "cleanup": pin.cleanup,
            }
        raise _plugin_not_found(plugin_id, self.id)


def host_activation(revision: Revision) -> Activation:
    """The activation identity of a host revision."""
    return Activation("host", revision.revision_id, revision.version)


def _manifest(pin: Pin) -> Manifest:
    return load_manifest(pin.manifest)


def _plugin_info(pin: Pin) -> PluginInfo:
    return PluginInfo(pin.plugin_id, pin.url, pin.sha256, pin.options, pin.fingerprint,
                      _manifest(pin).shape, pin.signer)


def _require_pin(revision: Revision, plugin_id: str) -> Pin:
    pin = revision.pin(plugin_id)
    assert pin is not None, "a committed revision holds the pin it was built with"
    return pin


def _plugin_not_found(plugin_id: str, session_id: str) -> WorkerHostError:
    return WorkerHostError(
        "plugin_not_found", f"Session {session_id} has no plugin {plugin_id!r}."
    )


def _normalized_digest(sha256: str | None) -> str | None:
    if sha256 is None:
        return None
    try:
        return normalize_sha256(sha256)
    except BundleLoaderError as exc:
        raise WorkerHostError(exc.code, exc.message) from exc


def _checked_options(options: dict[str, Any] | None) -> dict[str, Any]:
    if options is None:
        return {}
    if not isinstance(options, dict):
        raise WorkerHostError("invalid_options", "Plugin options must be a JSON object.")
    try:
        copied: dict[str, Any] = json.loads(json.dumps(options, allow_nan=False))
    except (TypeError, ValueError) as exc:
        raise WorkerHostError("invalid_options", "Plugin options must be plain JSON.") from exc
    return copied
