"""The manifest: everything one setup run registered, validated and fingerprinted."""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from ._declarations import Agent, Skill, validate_agents, validate_skills
from ._errors import WorkerHostError
from ._schema import schema_problem

PLUGIN_ID = re.compile(r"[a-z][a-z0-9]*(?:[._-][a-z0-9]+)*")
MAX_PLUGIN_ID_LENGTH = 128
RESERVED_TOOL_IDS = frozenset({"skill", "task"})
HOOK_NAMES = frozenset(
    {"turn.before", "model.request.before", "tool.execute.before", "tool.execute.after"}
)


@dataclass(frozen=True)
class ToolDescriptor:
    """A registered tool as the host keeps it."""

    id: str
    description: str
    input_schema: dict[str, Any]
    has_permissions: bool
    direct_only: bool
    discovers_workspace_instructions: bool


@dataclass(frozen=True)
class Manifest:
    """A validated setup result. `canonical` is the JSON the fingerprint covers."""

    plugin_id: str
    tools: tuple[ToolDescriptor, ...]
    hooks: tuple[str, ...]
    skills: tuple[Skill, ...]
    agents: tuple[Agent, ...]
    default_agent: str | None
    has_cleanup: bool
    canonical: str
    fingerprint: str

    def tool(self, tool_id: str) -> ToolDescriptor | None:
        return next((tool for tool in self.tools if tool.id == tool_id), None)

    @property
    def shape(self) -> str:
        """`hook-only`, `tools-only`, `mixed`, or `empty`."""
        if self.tools and not (self.hooks or self.skills or self.agents):
            return "tools-only"
        if self.hooks and not (self.tools or self.skills or self.agents):
            return "hook-only"
        return "mixed" if (self.tools or self.hooks or self.skills or self.agents) else "empty"


def valid_plugin_id(plugin_id: str) -> bool:
    """The contract's plugin id rule: at most 128 characters like `example.shout`."""
    return len(plugin_id) <= MAX_PLUGIN_ID_LENGTH and PLUGIN_ID.fullmatch(plugin_id) is not None


def build_manifest(raw: Any) -> Manifest:
    """Validates what one setup run registered and fingerprints it.

    Raises `WorkerHostError` `invalid_contribution` naming the first problem:
    a bad plugin id, a tool id that is empty, reserved (`skill`, `task`) or
    repeated, an empty description, an unacceptable `inputSchema` (see
    `schema_problem`), a flag other than `true`, an unknown hook name, more
    than one default agent, or a Skill or Agent declaration the contract
    rejects (see `_declarations`).
    """
    if not isinstance(raw, dict):
        raise _invalid("setup produced no registrations")
    try:
        return _build(raw)
    except RecursionError as exc:
        raise _invalid("its registrations are nested too deeply") from exc


def _build(raw: dict[str, Any]) -> Manifest:
    plugin_id = raw.get("pluginId")
    if not isinstance(plugin_id, str) or not valid_plugin_id(plugin_id):
        raise _invalid(
            "the plugin id must be at most 128 lowercase letters and digits joined by single "
            "'.', '_' or '-' characters, starting with a letter"
        )
    tools = tuple(_tool(entry) for entry in _list(raw, "tools"))
    seen: set[str] = set()
    for tool in tools:
        if tool.id in seen:
            raise _rejected_tool(f"the tool id {quoted(tool.id)} is registered twice")
        seen.add(tool.id)
    hooks = tuple(_list(raw, "hooks"))
    for name in hooks:
        if name not in HOOK_NAMES:
            raise _invalid(f"{quoted(name)} is not a hook name")
    defaults = _list(raw, "defaultAgents")
    if len(defaults) > 1:
        raise _invalid("agents.setDefault was called more than once")
    canonical = _canonical(raw)
    return Manifest(
        plugin_id=plugin_id,
        tools=tools,
        hooks=hooks,
        skills=validate_skills(_list(raw, "skills")),
        agents=validate_agents(_list(raw, "agents")),
        default_agent=defaults[0] if defaults else None,
        has_cleanup=raw.get("cleanup") is True,
        canonical=canonical,
        fingerprint=hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest(),
    )


def manifest_fingerprint(raw: Any) -> str | None:
    """The fingerprint of a setup run's registrations, without validating them.

    Cheap, for the check on every call: only registrations whose fingerprint
    equals a validated activation's are used. None when `raw` is malformed.
    """
    try:
        return hashlib.sha256(_canonical(raw).encode("utf-8", "surrogatepass")).hexdigest()
    except (AttributeError, KeyError, TypeError, ValueError, IndexError, RecursionError):
        return None


_TOOL_KEYS = ("id", "description", "inputSchema", "directOnly", "discoversWorkspaceInstructions")


def _canonical(raw: Any) -> str:
    """Canonical JSON of everything setup registered: sorted keys, no spaces."""
    defaults = raw.get("defaultAgents", [])
    value = {
        "pluginId": raw["pluginId"],
        "tools": [
            {
                **{key: tool[key] for key in _TOOL_KEYS if key in tool},
                "permissions": tool.get("permissions") is True,
            }
            for tool in raw.get("tools", [])
        ],
        "hooks": list(raw.get("hooks", [])),
        "skills": list(raw.get("skills", [])),
        "agents": list(raw.get("agents", [])),
        "defaultAgent": defaults[0] if defaults else None,
    }
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def quoted(text: Any, limit: int = 64) -> str:
    """Plugin-chosen text for a message, in quotes: escaped and cut to `limit`."""
    value = str(text)
    return repr(value if len(value) <= limit else value[:limit] + "…")


def shown(text: Any, limit: int = 64) -> str:
    """Plugin-chosen text for a message: as is when short and printable, else `quoted`."""
    value = str(text)
    return value if len(value) <= limit and value.isprintable() else quoted(value, limit)


class RejectedTool(WorkerHostError):
    """A tool declaration the host rejects: in a host revision it skips the
    plugin instead of failing activation."""


def _invalid(reason: str) -> WorkerHostError:
    return WorkerHostError("invalid_contribution", f"The plugin's setup is invalid: {reason}.")


def _rejected_tool(reason: str) -> RejectedTool:
    return RejectedTool("invalid_contribution", f"The plugin's setup is invalid: {reason}.")


def _list(raw: dict[str, Any], key: str) -> list[Any]:
    value = raw.get(key, [])
    if not isinstance(value, list):
        raise _invalid(f"{key} is malformed")
    return value


def _tool(entry: Any) -> ToolDescriptor:
    if not isinstance(entry, dict):
        raise _rejected_tool("a tool declaration is malformed")
    tool_id = entry.get("id")
    if not isinstance(tool_id, str) or not tool_id:
        raise _rejected_tool("a tool id must be a non-empty string")
    if tool_id in RESERVED_TOOL_IDS:
        raise _rejected_tool(f"the tool id {quoted(tool_id)} is reserved")
    description = entry.get("description")
    if not isinstance(description, str) or not description.strip():
        raise _rejected_tool(f"tool {shown(tool_id)}: the description must be a non-empty string")
    problem = schema_problem(entry.get("inputSchema"))
    if problem is not None:
        raise _rejected_tool(f"tool {shown(tool_id)}: {problem}")
    for flag in ("directOnly", "discoversWorkspaceInstructions"):
        if flag in entry and entry[flag] is not True:
            raise _rejected_tool(f"tool {shown(tool_id)}: {flag} must be true when present")
    return ToolDescriptor(
        id=tool_id,
        description=description,
        input_schema=entry["inputSchema"],
        has_permissions=entry.get("permissions") is True,
        direct_only="directOnly" in entry,
        discovers_workspace_instructions="discoversWorkspaceInstructions" in entry,
    )


@lru_cache(maxsize=256)
def load_manifest(canonical: str) -> Manifest:
    """Rebuilds (and revalidates) a stored manifest from its canonical JSON."""
    value = json.loads(canonical)
    default = value.pop("defaultAgent", None)
    value["defaultAgents"] = [] if default is None else [default]
    return build_manifest(value)
