"""Skill and agent declarations: validated, normalised, and in canonical JSON.

A bundle's setup registers skills (`context.skills.register`) and agents
(`context.agents.register`, `context.agents.setDefault`); the guest prelude
hands the host a plain-JSON copy of each declaration. This module checks those
copies against the contract's `SkillDeclaration` and `AgentDeclaration` rules
and turns them into frozen values. It is pure: no I/O, no clock.

Every rejection is a `WorkerHostError` with code `invalid_contribution` and a
one-line message naming the declaration's id (once the id is valid), the field
and the rule it breaks. Messages never echo other plugin-supplied text.

How this module reads the contract's words:

- "trimmed" removes what JavaScript's `String.prototype.trim` removes (Unicode
  white space, line terminators and U+FEFF), after NFC normalisation;
- a "control character" is one of Unicode category Cc (U+0000-U+001F,
  U+007F-U+009F);
- "single-line" text holds none of LF, VT, FF, CR, NEL, U+2028 or U+2029;
- lengths count Unicode code points of the normalised value;
- members the contract does not define are ignored and left out of the
  canonical JSON; a member set to JSON `null` is rejected (the contract's
  optional members are omitted, never null);
- a canonical `homepage` is one a WHATWG URL parser would serialise
  unchanged, with hosts limited to DNS-style labels and IP addresses (so a
  few exotic URLs a browser keeps, such as right-to-left IDN hosts, are
  refused).
"""

from __future__ import annotations

import ipaddress
import math
import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, NoReturn, TypeVar, cast

from ._errors import WorkerHostError

# ---- the contract's constants ------------------------------------------------

MAX_SKILL_ID_LENGTH = 128
"""Longest skill id, in characters."""
MAX_AGENT_ID_LENGTH = 128
"""Longest agent id, in characters."""
MAX_AGENT_DISPLAY_NAME_LENGTH = 256
"""Longest agent `displayName` after trimming and NFC normalisation."""
MAX_AGENT_DESCRIPTION_LENGTH = 1024
"""Longest agent `description` after trimming and NFC normalisation."""
MAX_PROVIDER_ID_LENGTH = 128
"""Longest provider id in an agent's `model` reference (`provider/model`)."""
MAX_MODEL_ID_LENGTH = 512
"""Longest model id in an agent's `model` reference (`provider/model`)."""
MAX_SAFE_INTEGER = 2**53 - 1
"""JavaScript's `Number.MAX_SAFE_INTEGER`; `settings.seed` must be within ±this."""
PLUGIN_SKILL_LOCATION_PREFIX = "ze-plugin:"
"""A plugin-registered skill's base location is this prefix and the plugin id."""

AgentMode = Literal["primary", "subagent", "all"]
ToolSelectionMode = Literal["all", "none", "include"]
ToolChoiceMode = Literal["auto", "none", "required", "tool"]
InstructionRole = Literal["system", "developer"]
PermissionEffect = Literal["allow", "ask", "deny"]
ReasoningEffort = Literal["none", "minimal", "low", "medium", "high", "xhigh", "max"]

AGENT_MODES: tuple[AgentMode, ...] = ("primary", "subagent", "all")
TOOL_SELECTION_MODES: tuple[ToolSelectionMode, ...] = ("all", "none", "include")
TOOL_CHOICE_MODES: tuple[ToolChoiceMode, ...] = ("auto", "none", "required", "tool")
INSTRUCTION_ROLES: tuple[InstructionRole, ...] = ("system", "developer")
PERMISSION_EFFECTS: tuple[PermissionEffect, ...] = ("allow", "ask", "deny")
REASONING_EFFORTS: tuple[ReasoningEffort, ...] = (
    "none",
    "minimal",
    "low",
    "medium",
    "high",
    "xhigh",
    "max",
)

# ---- grammars -------------------------------------------------------------------

# "A lowercase letter followed by lowercase letters and digits joined by single
# `.`, `_`, or `-` characters": skill ids, tags, tool names (the contract's
# "lowercase identifier"). Separators and segment characters are disjoint, so
# the pattern matches in linear time.
_LOWER_ID = r"[a-z][a-z0-9]*(?:[._-][a-z0-9]+)*"
_IDENTIFIER = re.compile(_LOWER_ID)
_AGENT_ID = re.compile(rf"{_LOWER_ID}(?:/{_LOWER_ID})*")
_MODEL_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]*(?:/[A-Za-z0-9][A-Za-z0-9._:-]*)*")
_VERSION = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+:-]*")
_LICENSE = re.compile(r"[A-Za-z0-9 .()+-]+")
_FILE_PATH = re.compile(r"[a-z0-9._/-]+")

# JavaScript's WhiteSpace and LineTerminator: what `String.prototype.trim` removes.
_JS_WHITESPACE = (
    "\t\n\v\f\r \u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007"
    "\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
)
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_BODY_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_LINE_BREAK = re.compile(r"[\n\v\f\r\x85\u2028\u2029]")

# ---- skills ---------------------------------------------------------------------


@dataclass(frozen=True)
class SkillAdvertisement:
    """`modelAdvertisement`: listed for the model or not, and selectable by users or not."""

    advertised: bool
    user_invocable: bool

    def to_json(self) -> dict[str, Any]:
        return {"advertised": self.advertised, "userInvocable": self.user_invocable}


@dataclass(frozen=True)
class SkillMetadata:
    """`publicMetadata`: kept in the catalog, never sent to the model."""

    tags: tuple[str, ...] = ()
    author: str | None = None
    license: str | None = None
    homepage: str | None = None

    def to_json(self) -> dict[str, Any]:
        value: dict[str, Any] = {}
        if self.author is not None:
            value["author"] = self.author
        if self.license is not None:
            value["license"] = self.license
        if self.homepage is not None:
            value["homepage"] = self.homepage
        value["tags"] = list(self.tags)
        return value


@dataclass(frozen=True)
class Skill:
    """A validated `SkillDeclaration`, normalised.

    `display_name` and `description` are NFC-normalised and trimmed; `body` is
    kept exactly; `files` is in lexical order (empty when the declaration had
    none). `to_json()` is the canonical camelCase form, and validating it
    again gives an equal `Skill`.
    """

    id: str
    display_name: str
    description: str
    body: str
    version: str
    model_advertisement: SkillAdvertisement
    public_metadata: SkillMetadata
    files: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "displayName": self.display_name,
            "description": self.description,
            "body": self.body,
            "version": self.version,
            "modelAdvertisement": self.model_advertisement.to_json(),
            "publicMetadata": self.public_metadata.to_json(),
            "files": list(self.files),
        }


def validate_skill(value: Any) -> Skill:
    """Validates one `SkillDeclaration` copy and returns it normalised.

    Rules: `id` (at most 128 characters, a lowercase identifier), `displayName`
    (non-empty, no control characters), `description` (non-empty, single-line,
    no control characters), `body` (non-whitespace, already NFC, no CR and no
    control characters but tab and newline), `version` (a letter or digit,
    then letters, digits and `._+:-`), `modelAdvertisement` (two booleans),
    `publicMetadata` (`author`, `license`, canonical https `homepage`, unique
    identifier `tags`) and `files` (unique safe lowercase relative paths).
    Raises `WorkerHostError` `invalid_contribution` naming the first problem.
    """
    where = _Where("Skill")
    obj = where.object("", value)
    raw_id = where.required(obj, "id")
    where.id = _checked_id(where, raw_id, MAX_SKILL_ID_LENGTH, _IDENTIFIER, _IDENTIFIER_RULE)

    display_name = _text(where, "displayName", where.required(obj, "displayName"))
    if not display_name:
        where.fail("displayName", "must not be empty")
    if _CONTROL.search(display_name):
        where.fail("displayName", "must not contain control characters")

    description = _text(where, "description", where.required(obj, "description"))
    if not description:
        where.fail("description", "must not be empty")
    if _LINE_BREAK.search(description):
        where.fail("description", "must be a single line")
    if _CONTROL.search(description):
        where.fail("description", "must not contain control characters")

    body = where.required(obj, "body")
    if not isinstance(body, str):
        where.fail("body", "must be a string")
    if not body.strip(_JS_WHITESPACE):
        where.fail("body", "must contain non-whitespace text")
    if not unicodedata.is_normalized("NFC", body):
        where.fail("body", "must be NFC-normalized")
    if "\r" in body:
        where.fail("body", "must not contain carriage returns")
    if _BODY_CONTROL.search(body):
        where.fail("body", "must not contain control characters other than tab and newline")

    version = where.required(obj, "version")
    if not isinstance(version, str):
        where.fail("version", "must be a string")
    if not _VERSION.fullmatch(version):
        where.fail(
            "version",
            "must start with a letter or digit and use only letters, digits and '._+:-'",
        )

    advertisement = where.object("modelAdvertisement", where.required(obj, "modelAdvertisement"))
    advertised = where.boolean(
        "modelAdvertisement.advertised",
        where.required(advertisement, "advertised", "modelAdvertisement"),
    )
    user_invocable = where.boolean(
        "modelAdvertisement.userInvocable",
        where.required(advertisement, "userInvocable", "modelAdvertisement"),
    )

    metadata = _skill_metadata(where, where.required(obj, "publicMetadata"))
    files = _skill_files(where, obj["files"]) if "files" in obj else ()

    return Skill(
        id=where.id,
        display_name=display_name,
        description=description,
        body=body,
        version=version,
        model_advertisement=SkillAdvertisement(advertised, user_invocable),
        public_metadata=metadata,
        files=files,
    )


def validate_skills(values: Iterable[Any]) -> tuple[Skill, ...]:
    """Validates every skill one setup run registered, in order.

    Besides `validate_skill`'s rules, a skill id registered twice fails with
    `invalid_contribution`.
    """
    skills = tuple(validate_skill(value) for value in values)
    _reject_duplicates("Skill", (skill.id for skill in skills))
    return skills


def load_skill_body(skill: Skill, *, plugin_id: str | None = None) -> str:
    """What Core's `skill` tool returns to the model for a plugin-registered skill.

    The contract says the result carries the skill's base location, body and
    supporting-file manifest, and that a plugin-registered skill reports only
    how many supporting files it omits, but it gives no layout. This one is
    ours: `Base location: ze-plugin:<plugin_id>` (when `plugin_id` is given),
    then the body unchanged, then a line counting omitted supporting files
    (when there are any), separated by blank lines. With neither, the result
    is exactly the body. The version is never included (it is not sent to the
    model).
    """
    parts: list[str] = []
    if plugin_id is not None:
        parts.append(f"Base location: {PLUGIN_SKILL_LOCATION_PREFIX}{plugin_id}")
    parts.append(skill.body)
    if skill.files:
        count = len(skill.files)
        noun = "supporting file" if count == 1 else "supporting files"
        parts.append(
            f"{count} {noun} omitted: a plugin-registered Skill has no location "
            "an ordinary Tool can read."
        )
    return "\n\n".join(parts)


def _skill_metadata(where: _Where, value: Any) -> SkillMetadata:
    obj = where.object("publicMetadata", value)
    author: str | None = None
    if "author" in obj:
        author = _text(where, "publicMetadata.author", obj["author"])
        if _CONTROL.search(author):
            where.fail("publicMetadata.author", "must not contain control characters")
    license_name: str | None = None
    if "license" in obj:
        license_name = obj["license"]
        if not isinstance(license_name, str):
            where.fail("publicMetadata.license", "must be a string")
        if not _LICENSE.fullmatch(license_name):
            where.fail(
                "publicMetadata.license",
                "must be non-empty and use only letters, digits, spaces and '.()+-'",
            )
    homepage: str | None = None
    if "homepage" in obj:
        homepage = obj["homepage"]
        if not isinstance(homepage, str):
            where.fail("publicMetadata.homepage", "must be a string")
        problem = _https_url_problem(homepage)
        if problem is not None:
            where.fail("publicMetadata.homepage", problem)
    tags = _identifiers(where, "publicMetadata.tags", where.required(obj, "tags", "publicMetadata"))
    return SkillMetadata(tags=tags, author=author, license=license_name, homepage=homepage)


def _skill_files(where: _Where, value: Any) -> tuple[str, ...]:
    entries = where.array("files", value)
    seen: set[str] = set()
    for index, path in enumerate(entries):
        field = f"files[{index}]"
        if not isinstance(path, str):
            where.fail(field, "must be a string")
        if not _FILE_PATH.fullmatch(path):
            where.fail(
                field,
                "must be a lowercase relative path of letters, digits, '.', '_', '-' and '/'",
            )
        segments = path.split("/")
        if "" in segments:
            where.fail(field, "must be a relative path without empty segments")
        if "." in segments or ".." in segments:
            where.fail(field, "must not contain '.' or '..' segments")
        if path in seen:
            where.fail(field, "repeats an earlier file")
        seen.add(path)
    return tuple(sorted(seen))


# ---- agents ---------------------------------------------------------------------


@dataclass(frozen=True)
class ModelInstruction:
    """One `instructions` entry: a `system` or `developer` instruction with non-empty text."""

    role: InstructionRole
    text: str

    def to_json(self) -> dict[str, Any]:
        return {"role": self.role, "text": self.text}


@dataclass(frozen=True)
class AgentToolSelection:
    """`tools`: `all` (the default), `none`, or `include` with required and optional names."""

    mode: ToolSelectionMode = "all"
    names: tuple[str, ...] = ()
    optional_names: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        if self.mode != "include":
            return {"mode": self.mode}
        return {
            "mode": "include",
            "names": list(self.names),
            "optionalNames": list(self.optional_names),
        }


@dataclass(frozen=True)
class ModelToolChoice:
    """`toolChoice`: `auto` (the default), `none`, `required`, or `tool` with its `name`."""

    mode: ToolChoiceMode = "auto"
    name: str | None = None

    def to_json(self) -> dict[str, Any]:
        if self.mode == "tool":
            return {"mode": "tool", "name": self.name}
        return {"mode": self.mode}


@dataclass(frozen=True)
class GenerationSettings:
    """`settings`: each field None when unset. Integral numbers are kept as `int`."""

    temperature: float | None = None
    top_p: float | None = None
    max_output_units: int | None = None
    stop_sequences: tuple[str, ...] | None = None
    seed: int | None = None
    reasoning_effort: ReasoningEffort | None = None

    def to_json(self) -> dict[str, Any]:
        value: dict[str, Any] = {}
        if self.temperature is not None:
            value["temperature"] = self.temperature
        if self.top_p is not None:
            value["topP"] = self.top_p
        if self.max_output_units is not None:
            value["maxOutputUnits"] = self.max_output_units
        if self.stop_sequences is not None:
            value["stopSequences"] = list(self.stop_sequences)
        if self.seed is not None:
            value["seed"] = self.seed
        if self.reasoning_effort is not None:
            value["reasoningEffort"] = self.reasoning_effort
        return value


@dataclass(frozen=True)
class AgentPermissionRule:
    """One `permissions` rule: `action` and `resource` patterns and an `effect`."""

    action: str
    resource: str
    effect: PermissionEffect

    def to_json(self) -> dict[str, Any]:
        return {"action": self.action, "resource": self.resource, "effect": self.effect}


@dataclass(frozen=True)
class Agent:
    """A validated `AgentDeclaration`, normalised, with the contract's defaults filled in.

    `display_name` and `description` are NFC-normalised and trimmed. Absent
    members take their documented defaults (no instructions, `tools` `all`,
    `toolChoice` `auto`, no settings, no rules, `mode` `all`,
    `fallbackDefault` false); `model` stays None when absent. `to_json()` is
    the canonical camelCase form, and validating it again gives an equal
    `Agent`.
    """

    id: str
    display_name: str
    description: str
    instructions: tuple[ModelInstruction, ...] = ()
    model: str | None = None
    tools: AgentToolSelection = AgentToolSelection()
    tool_choice: ModelToolChoice = ModelToolChoice()
    settings: GenerationSettings = GenerationSettings()
    permissions: tuple[AgentPermissionRule, ...] = ()
    mode: AgentMode = "all"
    fallback_default: bool = False

    @property
    def primary_capable(self) -> bool:
        """Whether the agent may take user turns (mode `primary` or `all`)."""
        return self.mode != "subagent"

    @property
    def spawnable(self) -> bool:
        """Whether the `task` tool may spawn it (mode `subagent` or `all`)."""
        return self.mode != "primary"

    def to_json(self) -> dict[str, Any]:
        value: dict[str, Any] = {
            "id": self.id,
            "displayName": self.display_name,
            "description": self.description,
            "instructions": [instruction.to_json() for instruction in self.instructions],
        }
        if self.model is not None:
            value["model"] = self.model
        value.update(
            {
                "tools": self.tools.to_json(),
                "toolChoice": self.tool_choice.to_json(),
                "settings": self.settings.to_json(),
                "permissions": [rule.to_json() for rule in self.permissions],
                "mode": self.mode,
                "fallbackDefault": self.fallback_default,
            }
        )
        return value


def validate_agent(value: Any) -> Agent:
    """Validates one `AgentDeclaration` copy and returns it normalised.

    Rules: `id` (at most 128 characters, `/`-separated lowercase identifier
    segments), `displayName` and `description` (single-line, at most 256 and
    1,024 characters after trimming), `instructions`, `model`
    (`provider/model`), `tools`, `toolChoice`, `settings`, `permissions`,
    `mode` and `fallbackDefault`, each as the contract types them. Raises
    `WorkerHostError` `invalid_contribution` naming the first problem.
    """
    where = _Where("Agent")
    obj = where.object("", value)
    raw_id = where.required(obj, "id")
    where.id = _checked_id(where, raw_id, MAX_AGENT_ID_LENGTH, _AGENT_ID, _AGENT_ID_RULE)

    display_name = _single_line(
        where, "displayName", where.required(obj, "displayName"), MAX_AGENT_DISPLAY_NAME_LENGTH
    )
    description = _single_line(
        where, "description", where.required(obj, "description"), MAX_AGENT_DESCRIPTION_LENGTH
    )
    instructions = _instructions(where, obj["instructions"]) if "instructions" in obj else ()
    model = _model_reference(where, obj["model"]) if "model" in obj else None
    tools = _tool_selection(where, obj["tools"]) if "tools" in obj else AgentToolSelection()
    tool_choice = _tool_choice(where, obj["toolChoice"]) if "toolChoice" in obj else None
    settings = _settings(where, obj["settings"]) if "settings" in obj else GenerationSettings()
    permissions = _rules(where, obj["permissions"]) if "permissions" in obj else ()
    mode: AgentMode = "all"
    if "mode" in obj:
        mode = where.choice("mode", obj["mode"], AGENT_MODES)
    fallback = False
    if "fallbackDefault" in obj:
        fallback = where.boolean("fallbackDefault", obj["fallbackDefault"])

    return Agent(
        id=where.id,
        display_name=display_name,
        description=description,
        instructions=instructions,
        model=model,
        tools=tools,
        tool_choice=tool_choice or ModelToolChoice(),
        settings=settings,
        permissions=permissions,
        mode=mode,
        fallback_default=fallback,
    )


def validate_agents(values: Iterable[Any]) -> tuple[Agent, ...]:
    """Validates every agent one setup run registered, in order.

    Besides `validate_agent`'s rules, an agent id registered twice fails with
    `invalid_contribution`.
    """
    agents = tuple(validate_agent(value) for value in values)
    _reject_duplicates("Agent", (agent.id for agent in agents))
    return agents


def check_default_agent(agents: Sequence[Agent], default_id: str | None) -> None:
    """Checks an `agents.setDefault` choice against the effective agent catalog.

    `agents` is every agent the default may name (for a session revision, the
    host's agents too). None passes. Otherwise the agent must exist and must
    not be `subagent`-only; `primary` and `all` are fine. Raises
    `WorkerHostError` `invalid_contribution`.
    """
    if default_id is None:
        return
    if not isinstance(default_id, str):
        raise _invalid("Default agent: agents.setDefault takes an agent id string.")
    agent = next((agent for agent in agents if agent.id == default_id), None)
    if agent is None:
        if _valid_id(default_id, MAX_AGENT_ID_LENGTH, _AGENT_ID):
            raise _invalid(f"Default agent '{default_id}': no agent with this id is registered.")
        raise _invalid("Default agent: agents.setDefault names no registered agent id.")
    if not agent.primary_capable:
        raise _invalid(
            f"Default agent '{default_id}': a subagent-only agent cannot be the default."
        )


def fallback_default(agents: Sequence[Agent]) -> str | None:
    """The default agent when neither `setDefault` nor configuration selects one.

    Among primary-capable agents (mode `primary` or `all`), the lexically
    first id of those declaring `fallbackDefault: true`; without any such
    preference, the lexically first primary-capable id. None when no agent is
    primary-capable. `subagent` agents never count, even with the flag set.
    """
    candidates = [agent for agent in agents if agent.primary_capable]
    preferred = [agent.id for agent in candidates if agent.fallback_default]
    if preferred:
        return min(preferred)
    return min((agent.id for agent in candidates), default=None)


def _single_line(where: _Where, field: str, value: Any, max_length: int) -> str:
    text = _text(where, field, value)
    if _LINE_BREAK.search(text):
        where.fail(field, "must be a single line")
    if len(text) > max_length:
        where.fail(field, f"must be at most {max_length:,} characters")
    return text


def _instructions(where: _Where, value: Any) -> tuple[ModelInstruction, ...]:
    entries = where.array("instructions", value)
    instructions: list[ModelInstruction] = []
    for index, entry in enumerate(entries):
        field = f"instructions[{index}]"
        obj = where.object(field, entry)
        role = where.choice(f"{field}.role", where.required(obj, "role", field), INSTRUCTION_ROLES)
        text = where.required(obj, "text", field)
        if not isinstance(text, str):
            where.fail(f"{field}.text", "must be a string")
        if not text:
            where.fail(f"{field}.text", "must not be empty")
        instructions.append(ModelInstruction(role, text))
    return tuple(instructions)


def _model_reference(where: _Where, value: Any) -> str:
    if not isinstance(value, str):
        where.fail("model", "must be a string")
    provider, slash, model = value.partition("/")
    if not slash or not _IDENTIFIER.fullmatch(provider) or not _MODEL_ID.fullmatch(model):
        where.fail(
            "model",
            "must be a 'provider/model' catalog reference: a lowercase provider id, '/', "
            "then '/'-separated model id segments of letters, digits and '._:-', each "
            "starting with a letter or digit",
        )
    if len(provider) > MAX_PROVIDER_ID_LENGTH:
        where.fail(
            "model", f"must have a provider id of at most {MAX_PROVIDER_ID_LENGTH} characters"
        )
    if len(model) > MAX_MODEL_ID_LENGTH:
        where.fail("model", f"must have a model id of at most {MAX_MODEL_ID_LENGTH} characters")
    return value


def _tool_selection(where: _Where, value: Any) -> AgentToolSelection:
    obj = where.object("tools", value)
    mode = where.choice("tools.mode", where.required(obj, "mode", "tools"), TOOL_SELECTION_MODES)
    if mode != "include":
        return AgentToolSelection(mode)
    names = _identifiers(where, "tools.names", where.required(obj, "names", "tools"))
    if not names:
        where.fail("tools.names", "must name at least one tool")
    optional: tuple[str, ...] = ()
    if "optionalNames" in obj:
        optional = _identifiers(where, "tools.optionalNames", obj["optionalNames"])
        for index, name in enumerate(optional):
            if name in names:
                where.fail(f"tools.optionalNames[{index}]", "repeats a required name")
    return AgentToolSelection("include", names, optional)


def _tool_choice(where: _Where, value: Any) -> ModelToolChoice:
    obj = where.object("toolChoice", value)
    mode = where.choice(
        "toolChoice.mode", where.required(obj, "mode", "toolChoice"), TOOL_CHOICE_MODES
    )
    if mode != "tool":
        return ModelToolChoice(mode)
    name = where.required(obj, "name", "toolChoice")
    if not isinstance(name, str):
        where.fail("toolChoice.name", "must be a string")
    if not name:
        where.fail("toolChoice.name", "must not be empty")
    return ModelToolChoice("tool", name)


def _settings(where: _Where, value: Any) -> GenerationSettings:
    obj = where.object("settings", value)
    temperature: float | None = None
    if "temperature" in obj:
        temperature = _number(where, "settings.temperature", obj["temperature"])
        if temperature < 0:
            where.fail("settings.temperature", "must be at least 0")
    top_p: float | None = None
    if "topP" in obj:
        top_p = _number(where, "settings.topP", obj["topP"])
        if not 0 <= top_p <= 1:
            where.fail("settings.topP", "must be from 0 to 1")
    max_output_units: int | None = None
    if "maxOutputUnits" in obj:
        max_output_units = _integer(where, "settings.maxOutputUnits", obj["maxOutputUnits"])
        if max_output_units <= 0:
            where.fail("settings.maxOutputUnits", "must be a positive integer")
    stop_sequences: tuple[str, ...] | None = None
    if "stopSequences" in obj:
        entries = where.array("settings.stopSequences", obj["stopSequences"])
        if not entries:
            where.fail("settings.stopSequences", "must hold at least one string")
        for index, entry in enumerate(entries):
            if not isinstance(entry, str):
                where.fail(f"settings.stopSequences[{index}]", "must be a string")
            if not entry:
                where.fail(f"settings.stopSequences[{index}]", "must not be empty")
        stop_sequences = tuple(entries)
    seed: int | None = None
    if "seed" in obj:
        seed = _integer(where, "settings.seed", obj["seed"])
        if abs(seed) > MAX_SAFE_INTEGER:
            where.fail("settings.seed", "must be a safe integer")
    effort: ReasoningEffort | None = None
    if "reasoningEffort" in obj:
        effort = where.choice("settings.reasoningEffort", obj["reasoningEffort"], REASONING_EFFORTS)
    return GenerationSettings(temperature, top_p, max_output_units, stop_sequences, seed, effort)


def _rules(where: _Where, value: Any) -> tuple[AgentPermissionRule, ...]:
    entries = where.array("permissions", value)
    rules: list[AgentPermissionRule] = []
    for index, entry in enumerate(entries):
        field = f"permissions[{index}]"
        obj = where.object(field, entry)
        action = where.required(obj, "action", field)
        if not isinstance(action, str):
            where.fail(f"{field}.action", "must be a string")
        resource = where.required(obj, "resource", field)
        if not isinstance(resource, str):
            where.fail(f"{field}.resource", "must be a string")
        effect = where.choice(
            f"{field}.effect", where.required(obj, "effect", field), PERMISSION_EFFECTS
        )
        rules.append(AgentPermissionRule(action, resource, effect))
    return tuple(rules)


# ---- shared checks --------------------------------------------------------------

_IDENTIFIER_RULE = (
    "must be a lowercase letter followed by lowercase letters and digits joined by single "
    "'.', '_' or '-' characters"
)
_AGENT_ID_RULE = (
    "must be '/'-separated segments, each a lowercase letter followed by lowercase letters "
    "and digits joined by single '.', '_' or '-' characters"
)


_Choice = TypeVar("_Choice", bound=str)


class _Where:
    """Which declaration is being checked, for one-line failure messages."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.id: str | None = None

    def fail(self, field: str, rule: str) -> NoReturn:
        subject = f"{self.kind} '{self.id}'" if self.id is not None else f"{self.kind} declaration"
        if not field:
            raise _invalid(f"{subject} {rule}.")
        raise _invalid(f"{subject}: {field} {rule}.")

    def required(self, obj: dict[str, Any], key: str, parent: str = "") -> Any:
        if key not in obj:
            self.fail(f"{parent}.{key}" if parent else key, "is required")
        return obj[key]

    def object(self, field: str, value: Any) -> dict[str, Any]:
        if not isinstance(value, dict):
            self.fail(field, "must be a JSON object")
        return cast(dict[str, Any], value)

    def array(self, field: str, value: Any) -> list[Any]:
        if not isinstance(value, list | tuple):
            self.fail(field, "must be an array")
        return list(value)

    def boolean(self, field: str, value: Any) -> bool:
        if not isinstance(value, bool):
            self.fail(field, "must be true or false")
        return value

    def choice(self, field: str, value: Any, choices: tuple[_Choice, ...]) -> _Choice:
        if not isinstance(value, str) or value not in choices:
            self.fail(field, "must be one of " + ", ".join(f"'{choice}'" for choice in choices))
        return choices[choices.index(value)]


def _invalid(message: str) -> WorkerHostError:
    return WorkerHostError("invalid_contribution", message)


def _valid_id(value: str, max_length: int, grammar: re.Pattern[str]) -> bool:
    return len(value) <= max_length and grammar.fullmatch(value) is not None


def _checked_id(
    where: _Where, value: Any, max_length: int, grammar: re.Pattern[str], rule: str
) -> str:
    if not isinstance(value, str):
        where.fail("id", "must be a string")
    if len(value) > max_length:
        where.fail("id", f"must be at most {max_length} characters")
    if not grammar.fullmatch(value):
        where.fail("id", rule)
    return value


def _text(where: _Where, field: str, value: Any) -> str:
    """The contract's "trimmed, NFC-normalized text": normalised, then trimmed like JavaScript."""
    if not isinstance(value, str):
        where.fail(field, "must be a string")
    return unicodedata.normalize("NFC", value).strip(_JS_WHITESPACE)


def _identifiers(where: _Where, field: str, value: Any) -> tuple[str, ...]:
    entries = where.array(field, value)
    seen: set[str] = set()
    for index, entry in enumerate(entries):
        if not isinstance(entry, str):
            where.fail(f"{field}[{index}]", "must be a string")
        if not _IDENTIFIER.fullmatch(entry):
            where.fail(f"{field}[{index}]", _IDENTIFIER_RULE)
        if entry in seen:
            where.fail(f"{field}[{index}]", "repeats an earlier entry")
        seen.add(entry)
    return tuple(entries)


def _number(where: _Where, field: str, value: Any) -> float:
    # bool is an int in Python but never a JSON number.
    if isinstance(value, bool) or not isinstance(value, int | float):
        where.fail(field, "must be a number")
    if isinstance(value, float) and not math.isfinite(value):
        where.fail(field, "must be a finite number")
    # JavaScript has one number type: 1.0 and 1 are the same value and serialise as `1`.
    if isinstance(value, float) and value.is_integer() and abs(value) <= MAX_SAFE_INTEGER:
        return int(value)
    return value


def _integer(where: _Where, field: str, value: Any) -> int:
    number = _number(where, field, value)
    if not isinstance(number, int):
        if isinstance(number, float) and number.is_integer():
            return int(number)
        where.fail(field, "must be an integer")
    return number


def _reject_duplicates(kind: str, ids: Iterable[str]) -> None:
    seen: set[str] = set()
    for entry_id in ids:
        if entry_id in seen:
            raise _invalid(f"{kind} '{entry_id}': id is registered more than once.")
        seen.add(entry_id)


# ---- canonical https URLs -------------------------------------------------------

# Printable ASCII that a WHATWG URL serialiser leaves unchanged in an https path.
# `^` is excluded: the URL Standard now percent-encodes it in paths, older
# parsers did not, so no form of it is canonical everywhere.
_PATH_CHARS = re.compile(r"/[!$%&'()*+,\-./0-9:;=@A-Z\[\]_a-z|~]*")
_HOST_LABEL = re.compile(r"[a-z0-9_-]+")
_NUMERIC_LABEL = re.compile(r"[0-9]+|0[xX][0-9a-fA-F]*")
_DECIMAL_OCTET = re.compile(r"0|[1-9][0-9]{0,2}")
_PORT = re.compile(r"0|[1-9][0-9]{0,4}")
_DOT_SEGMENTS = frozenset({".", "..", "%2e", ".%2e", "%2e.", "%2e%2e"})
_HTTPS_RULE = "must be a canonical https:// URL"


def _https_url_problem(url: str) -> str | None:
    """Why `url` is not a canonical `https://` URL without credentials, query or fragment.

    Canonical means a WHATWG URL parser would serialise it unchanged: lowercase
    scheme and host, no default port, a path of at least `/` with no dot
    segments and nothing left to percent-encode. Hosts are limited to DNS-style
    labels (letters, digits, `-`, `_`, valid `xn--` labels), dotted-decimal
    IPv4, or compressed IPv6 in brackets.
    """
    if not url.startswith("https://"):
        return f"{_HTTPS_RULE} (it must start with 'https://')"
    if "#" in url:
        return f"{_HTTPS_RULE} without a fragment"
    if "?" in url:
        return f"{_HTTPS_RULE} without a query"
    rest = url[len("https://") :]
    slash = rest.find("/")
    authority, path = (rest, "") if slash < 0 else (rest[:slash], rest[slash:])
    if "@" in authority:
        return f"{_HTTPS_RULE} without credentials"
    if not _PATH_CHARS.fullmatch(path) or any(
        segment.lower() in _DOT_SEGMENTS for segment in path[1:].split("/")
    ):
        return f"{_HTTPS_RULE} with a path of at least '/' that nothing would rewrite"
    if authority.startswith("["):
        end = authority.find("]")
        host, port = authority[: end + 1], authority[end + 1 :]
        host_ok = end > 0 and _canonical_ipv6(host[1:-1])
    else:
        host, colon, port = authority.partition(":")
        port = colon + port
        host_ok = _canonical_host(host)
    if not host_ok:
        return f"{_HTTPS_RULE} with a lowercase host name or IP address"
    if port and (not port.startswith(":") or not _canonical_port(port[1:])):
        return f"{_HTTPS_RULE} with no port, or a port other than 443 without leading zeros"
    return None


def _canonical_port(port: str) -> bool:
    return _PORT.fullmatch(port) is not None and int(port) <= 65535 and port != "443"


def _canonical_ipv6(text: str) -> bool:
    if not text or any(char not in "0123456789abcdef:" for char in text):
        return False
    try:
        value = int(ipaddress.IPv6Address(text))
    except ValueError:
        return False
    # The URL Standard's serialisation (RFC 5952): lowercase hex without leading
    # zeros, the first longest run of two or more zero pieces as `::`.
    pieces = [f"{(value >> (16 * (7 - index))) & 0xFFFF:x}" for index in range(8)]
    best_start, best_length, start = -1, 1, 0
    while start < 8:
        end = start
        while end < 8 and pieces[end] == "0":
            end += 1
        if end - start > best_length:
            best_start, best_length = start, end - start
        start = end + 1 if end == start else end
    if best_start < 0:
        return ":".join(pieces) == text
    head = ":".join(pieces[:best_start])
    tail = ":".join(pieces[best_start + best_length :])
    return f"{head}::{tail}" == text


def _canonical_host(host: str) -> bool:
    labels = host.split(".")
    if labels[-1] == "" and len(labels) > 1:
        trailing = True
        labels = labels[:-1]
    else:
        trailing = False
    # A host whose last label is a number is an IPv4 address to a URL parser,
    # which serialises it as four decimal octets.
    if _NUMERIC_LABEL.fullmatch(labels[-1]):
        return (
            not trailing
            and len(labels) == 4
            and all(
                _DECIMAL_OCTET.fullmatch(label) is not None and int(label) <= 255
                for label in labels
            )
        )
    return all(_canonical_label(label) for label in labels)


def _canonical_label(label: str) -> bool:
    if not _HOST_LABEL.fullmatch(label):
        return False
    if not label.startswith("xn--"):
        return True
    try:
        decoded = label[4:].encode("ascii").decode("punycode")
    except UnicodeError:
        return False
    return (
        bool(decoded)
        and not decoded.isascii()
        and all(char == "-" or unicodedata.category(char)[0] in "LMN" for char in decoded)
        and not unicodedata.category(decoded[0]).startswith("M")
        # Right-to-left labels fall under the IDNA bidi rule; rather than
        # implement it, such hosts are refused (stricter than a URL parser).
        and not any(unicodedata.bidirectional(char) in ("R", "AL", "AN") for char in decoded)
        # Roughly UTS #46 mapping (NFKC case folding, keeping the deviations
        # `ß` and `ς`): a label it would change is not canonical.
        and unicodedata.normalize(
            "NFKC", "".join(char if char in "ßς" else char.casefold() for char in decoded)
        )
        == decoded
        and decoded.encode("punycode") == label[4:].encode("ascii")
    )
