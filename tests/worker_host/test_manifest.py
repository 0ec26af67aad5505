"""Manifest rules: `build_manifest` and `schema_problem`, one accepted and one rejected case each.

The raw value is what the prelude's setup answers: `pluginId`, `tools` (with
`permissions` as a boolean), `hooks` (names in registration order), `skills`,
`agents`, `defaultAgents` and `cleanup`.
"""

from __future__ import annotations

import asyncio
import copy
import json
from typing import Any

import pytest

from tests.worker_host.bundles import plugin_code, plugin_source, tool_source
from worker_host import Manifest, PluginRunner, WorkerHostError
from worker_host._manifest import build_manifest, load_manifest
from worker_host._schema import schema_problem

INVALID = "The plugin's setup is invalid: "
PLUGIN_ID_RULE = (
    INVALID + "the plugin id must be at most 128 lowercase letters and digits joined by single "
    "'.', '_' or '-' characters, starting with a letter."
)


_OBJECT = object()


def tool(
    tool_id: str = "t",
    description: str = "A tool.",
    schema: Any = _OBJECT,
    **extra: Any,
) -> dict[str, Any]:
    entry = {
        "id": tool_id,
        "description": description,
        "inputSchema": {"type": "object"} if schema is _OBJECT else schema,
        "permissions": False,
    }
    entry.update(extra)
    return entry


SKILL = {
    "id": "s", "displayName": "S", "description": "A skill.", "body": "Do it.",
    "version": "1.0.0", "modelAdvertisement": {"advertised": True, "userInvocable": True},
    "publicMetadata": {"tags": []},
}
AGENT = {"id": "helper", "displayName": "Helper", "description": "Helps.", "mode": "primary"}


def raw(
    *tools: dict[str, Any],
    plugin_id: str = "example.x",
    hooks: tuple[str, ...] = (),
    skills: tuple[dict[str, Any], ...] = (),
    agents: tuple[dict[str, Any], ...] = (),
    default_agents: tuple[str, ...] = (),
    cleanup: bool = False,
) -> dict[str, Any]:
    return {
        "pluginId": plugin_id,
        "tools": list(tools),
        "hooks": list(hooks),
        "skills": list(skills),
        "agents": list(agents),
        "defaultAgents": list(default_agents),
        "cleanup": cleanup,
    }


def rejection(value: Any) -> str:
    with pytest.raises(WorkerHostError) as caught:
        build_manifest(value)
    assert caught.value.code == "invalid_contribution"
    return caught.value.message


# ---- plugin id --------------------------------------------------------------


@pytest.mark.parametrize(
    "plugin_id",
    ["example.x", "a", "a1-b_c.d", "example.shout", "a" + "b" * 127],
)
def test_plugin_id_accepted(plugin_id: str) -> None:
    assert build_manifest(raw(plugin_id=plugin_id)).plugin_id == plugin_id


@pytest.mark.parametrize(
    "plugin_id",
    [
        "a" + "b" * 128,  # 129 characters
        "Example.x",  # uppercase
        "example..x",  # double separator
        "example.-x",  # two different separators in a row
        "1example",  # leading digit
        ".example",  # leading separator
        "example.",  # trailing separator
        "",
        "exa mple",
        "exämple",
    ],
)
def test_plugin_id_rejected(plugin_id: str) -> None:
    assert rejection(raw(plugin_id=plugin_id)) == PLUGIN_ID_RULE


def test_plugin_id_missing_or_not_a_string() -> None:
    assert rejection({"tools": []}) == PLUGIN_ID_RULE
    assert rejection(raw(plugin_id=5)) == PLUGIN_ID_RULE  # type: ignore[arg-type]


def test_setup_answer_that_is_not_an_object() -> None:
    assert rejection(None) == INVALID + "setup produced no registrations."
    assert rejection([]) == INVALID + "setup produced no registrations."


def test_malformed_lists() -> None:
    value = raw()
    value["tools"] = {"t": {}}
    assert rejection(value) == INVALID + "tools is malformed."
    value = raw()
    value["hooks"] = "turn.before"
    assert rejection(value) == INVALID + "hooks is malformed."


# ---- tool ids and descriptions ----------------------------------------------


def test_tool_id_accepted() -> None:
    manifest = build_manifest(raw(tool("search"), tool("skills"), tool("Task")))
    assert [t.id for t in manifest.tools] == ["search", "skills", "Task"]


def test_tool_id_empty() -> None:
    assert rejection(raw(tool(""))) == INVALID + "a tool id must be a non-empty string."


def test_tool_id_not_a_string() -> None:
    assert rejection(raw(tool(7))) == INVALID + "a tool id must be a non-empty string."  # type: ignore[arg-type]


@pytest.mark.parametrize("reserved", ["skill", "task"])
def test_tool_id_reserved(reserved: str) -> None:
    assert rejection(raw(tool(reserved))) == INVALID + f"the tool id {reserved!r} is reserved."


def test_tool_id_duplicate() -> None:
    message = rejection(raw(tool("t"), tool("u"), tool("t", description="Another.")))
    assert message == INVALID + "the tool id 't' is registered twice."


def test_tool_declaration_not_an_object() -> None:
    assert rejection(raw("t")) == INVALID + "a tool declaration is malformed."  # type: ignore[arg-type]


@pytest.mark.parametrize("description", ["", "   ", None, 5])
def test_tool_description_rejected(description: Any) -> None:
    message = rejection(raw(tool(description=description)))
    assert message == INVALID + "tool t: the description must be a non-empty string."


def test_tool_description_accepted_as_given() -> None:
    manifest = build_manifest(raw(tool(description=" Padded. ")))
    assert manifest.tools[0].description == " Padded. "


# ---- inputSchema ------------------------------------------------------------

ACCEPTED_SCHEMAS: dict[str, dict[str, Any]] = {
    "bare object": {"type": "object"},
    "every structural keyword": {
        "$comment": "c",
        "title": "T",
        "description": "D",
        "type": "object",
        "properties": {
            "s": {"type": "string", "minLength": 1, "maxLength": 9, "enum": ["a", "b"]},
            "n": {"type": "number", "minimum": 0, "maximum": 9, "multipleOf": 0.5},
            "e": {"type": "integer", "exclusiveMinimum": 0, "exclusiveMaximum": 9},
            "c": {"const": {"pattern": "not a keyword here", "format": "nor here"}},
            "l": {
                "type": "array",
                "items": {"type": "string"},
                "prefixItems": [{"type": "string"}],
                "contains": {"const": "x"},
                "minContains": 1,
                "maxContains": 2,
                "minItems": 1,
                "maxItems": 3,
                "uniqueItems": True,
            },
            "o": {
                "type": "object",
                "propertyNames": {"maxLength": 3},
                "minProperties": 1,
                "maxProperties": 2,
                "dependentRequired": {"a": ["b"]},
                "dependentSchemas": {"a": {"required": ["b"]}},
            },
            "x": {"allOf": [{}], "anyOf": [{}], "oneOf": [{}], "not": {"type": "null"}},
            "y": {"if": {"type": "string"}, "then": {"minLength": 1}, "else": {"type": "null"}},
        },
        "required": ["s"],
        "additionalProperties": False,
    },
    "property names that look like keywords": {
        "type": "object",
        "properties": {"pattern": {"type": "string"}, "default": {}, "format": {}},
    },
    "$schema at the root": {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
    },
    "local $ref into $defs": {
        "type": "object",
        "$defs": {"name": {"type": "string"}},
        "properties": {"a": {"$ref": "#/$defs/name"}},
    },
}


@pytest.mark.parametrize("schema", ACCEPTED_SCHEMAS.values(), ids=list(ACCEPTED_SCHEMAS))
def test_schema_accepted(schema: dict[str, Any]) -> None:
    assert schema_problem(schema) is None
    manifest = build_manifest(raw(tool(schema=schema)))
    assert manifest.tools[0].input_schema == schema


def _nested(location: str, keyword: str, value: Any) -> tuple[dict[str, Any], str]:
    """A schema with `keyword: value` placed at `location`, and that location's name."""
    bad = {keyword: value}
    schemas: dict[str, dict[str, Any]] = {
        "root": {"type": "object", **bad},
        "properties": {"type": "object", "properties": {"a": {"type": "string", **bad}}},
        "items": {
            "type": "object",
            "properties": {"a": {"type": "array", "items": {"type": "string", **bad}}},
        },
        "$defs": {"type": "object", "$defs": {"d": {"type": "string", **bad}}},
        "anyOf": {"type": "object", "anyOf": [{"required": []}, bad]},
        "prefixItems": {
            "type": "object",
            "properties": {"a": {"prefixItems": [{}, {"type": "string", **bad}]}},
        },
        "additionalProperties": {"type": "object", "additionalProperties": bad},
        "if/then": {"type": "object", "if": {}, "then": {"not": bad}},
        "dependentSchemas": {"type": "object", "dependentSchemas": {"a": bad}},
    }
    names = {
        "root": "inputSchema",
        "properties": "inputSchema.properties.a",
        "items": "inputSchema.properties.a.items",
        "$defs": "inputSchema.$defs.d",
        "anyOf": "inputSchema.anyOf[1]",
        "prefixItems": "inputSchema.properties.a.prefixItems[1]",
        "additionalProperties": "inputSchema.additionalProperties",
        "if/then": "inputSchema.then.not",
        "dependentSchemas": "inputSchema.dependentSchemas.a",
    }
    return schemas[location], names[location]


FORBIDDEN = {"pattern": "^x", "format": "email", "default": "x", "examples": ["x"]}
LOCATIONS = [
    "root",
    "properties",
    "items",
    "$defs",
    "anyOf",
    "prefixItems",
    "additionalProperties",
    "if/then",
    "dependentSchemas",
]


@pytest.mark.parametrize("location", LOCATIONS)
@pytest.mark.parametrize("keyword", list(FORBIDDEN))
def test_schema_keyword_rejected(keyword: str, location: str) -> None:
    schema, where = _nested(location, keyword, FORBIDDEN[keyword])
    problem = f"{where} uses the keyword {keyword!r}, which is not allowed"
    assert schema_problem(schema) == problem
    assert rejection(raw(tool(schema=schema))) == INVALID + f"tool t: {problem}."


@pytest.mark.parametrize(
    "keyword", ["$id", "$anchor", "unevaluatedProperties", "additionalItems", "readOnly"]
)
def test_other_keywords_outside_the_allow_list_are_rejected(keyword: str) -> None:
    schema = {"type": "object", keyword: {} if keyword != "$id" else "urn:x"}
    assert schema_problem(schema) == (
        f"inputSchema uses the keyword {keyword!r}, which is not allowed"
    )


@pytest.mark.parametrize("schema", [[], "object", None, True])
def test_schema_root_not_an_object(schema: Any) -> None:
    assert schema_problem(schema) == "inputSchema must be an object"
    assert rejection(raw(tool(schema=schema))) == INVALID + "tool t: inputSchema must be an object."


def test_schema_missing_input_schema() -> None:
    entry = tool()
    del entry["inputSchema"]
    assert rejection(raw(entry)) == INVALID + "tool t: inputSchema must be an object."


@pytest.mark.parametrize(
    "schema",
    [{}, {"type": "string"}, {"type": ["object", "null"]}, {"properties": {}}],
)
def test_schema_root_type_not_object(schema: dict[str, Any]) -> None:
    assert schema_problem(schema) == 'inputSchema must have type "object" at its root'


def test_schema_keyword_is_only_allowed_at_the_root() -> None:
    schema = {
        "type": "object",
        "properties": {"a": {"$schema": "https://json-schema.org/draft/2020-12/schema"}},
    }
    assert schema_problem(schema) == (
        "inputSchema.properties.a uses the keyword '$schema', which is not allowed"
    )


@pytest.mark.parametrize(
    "ref",
    [
        "https://example.com/schema.json",
        "other.json#/$defs/a",
        "/absolute/path",
        "urn:example:a",
    ],
)
def test_schema_non_local_ref_rejected(ref: str) -> None:
    schema = {"type": "object", "properties": {"a": {"$ref": ref}}}
    assert schema_problem(schema) == (
        "inputSchema.properties.a has a $ref that is not a local #/... pointer that resolves"
    )


def test_schema_ref_that_is_not_a_string_rejected() -> None:
    schema = {"type": "object", "properties": {"a": {"$ref": 5}}}
    assert schema_problem(schema) == (
        "inputSchema.properties.a has a $ref that is not a local #/... pointer that resolves"
    )


def test_schema_ref_to_a_plain_name_fragment_rejected() -> None:
    # The contract allows local `#/...` JSON pointers only. `#name` is an anchor
    # reference, and `$anchor` is not an allowed keyword, so it can never resolve.
    schema = {"type": "object", "properties": {"a": {"$ref": "#name"}}}
    assert schema_problem(schema) == (
        "inputSchema.properties.a has a $ref that is not a local #/... pointer that resolves"
    )


def test_schema_dangling_local_ref_rejected_at_setup() -> None:
    # Accepting it would make every later call fail inside jsonschema with an
    # untranslated referencing error; the declaration must be rejected at setup.
    schema = {"type": "object", "properties": {"a": {"$ref": "#/$defs/missing"}}}
    with pytest.raises(WorkerHostError) as caught:
        build_manifest(raw(tool(schema=schema)))
    assert caught.value.code == "invalid_contribution"
    assert caught.value.message.startswith(INVALID + "tool t: inputSchema")
    assert "$ref" in caught.value.message


@pytest.mark.parametrize(
    ("schema", "reason"),
    [
        (
            {"type": "object", "properties": {"a": {"type": 5}}},
            "5 is not valid under any of the given schemas",
        ),
        (
            {"type": "object", "properties": {"a": {"minLength": -1}}},
            "-1 is less than the minimum of 0",
        ),
        ({"type": "object", "required": "a"}, "'a' is not of type 'array'"),
    ],
)
def test_schema_invalid_json_schema(schema: dict[str, Any], reason: str) -> None:
    assert schema_problem(schema) == f"inputSchema is not a valid JSON Schema: {reason}"
    message = rejection(raw(tool(schema=schema)))
    assert message == INVALID + f"tool t: inputSchema is not a valid JSON Schema: {reason}."


def test_schema_nested_deeply_never_escapes_as_a_foreign_error() -> None:
    # 120 levels fit in the guest's JSON depth limit (256), so a bundle can send
    # this. Accepting it or rejecting it as a contribution are both fine; a raw
    # RecursionError out of build_manifest is not.
    schema: dict[str, Any] = {"type": "object"}
    for _ in range(120):
        schema = {"type": "object", "properties": {"a": schema}}
    try:
        manifest = build_manifest(raw(tool(schema=schema)))
    except WorkerHostError as error:
        assert error.code == "invalid_contribution"
        assert error.message.startswith(INVALID + "tool t: ")
    else:
        assert manifest.tools[0].input_schema == schema


# ---- flags, hooks, agents ---------------------------------------------------


def test_flags_accepted() -> None:
    manifest = build_manifest(
        raw(
            tool("a", directOnly=True, discoversWorkspaceInstructions=True, permissions=True),
            tool("b"),
        )
    )
    a, b = manifest.tools
    assert (a.direct_only, a.discovers_workspace_instructions, a.has_permissions) == (
        True,
        True,
        True,
    )
    assert (b.direct_only, b.discovers_workspace_instructions, b.has_permissions) == (
        False,
        False,
        False,
    )


@pytest.mark.parametrize("flag", ["directOnly", "discoversWorkspaceInstructions"])
@pytest.mark.parametrize("value", [False, None, "true", 1])
def test_flag_other_than_true_rejected(flag: str, value: Any) -> None:
    message = rejection(raw(tool(**{flag: value})))
    assert message == INVALID + f"tool t: {flag} must be true when present."


def test_hook_names_accepted_in_registration_order() -> None:
    names = ("tool.execute.after", "turn.before", "model.request.before", "tool.execute.before")
    assert build_manifest(raw(hooks=names)).hooks == names


@pytest.mark.parametrize("name", ["tool.before", "Turn.before", "", "events.subscribe"])
def test_unknown_hook_name_rejected(name: str) -> None:
    assert rejection(raw(hooks=("turn.before", name))) == INVALID + f"{name!r} is not a hook name."


def test_one_default_agent_accepted() -> None:
    agent = {"id": "helper", "displayName": "Helper", "description": "Helps."}
    manifest = build_manifest(raw(agents=(agent,), default_agents=("helper",)))
    assert manifest.default_agent == "helper"
    assert [declared.id for declared in manifest.agents] == ["helper"]


def test_two_default_agents_rejected() -> None:
    message = rejection(raw(default_agents=("a", "b")))
    assert message == INVALID + "agents.setDefault was called more than once."


def test_cleanup_flag() -> None:
    assert build_manifest(raw(cleanup=True)).has_cleanup is True
    assert build_manifest(raw()).has_cleanup is False


# ---- fingerprint and shape --------------------------------------------------


def _reordered(value: Any) -> Any:
    """The same JSON with every object's keys in reverse order."""
    if isinstance(value, dict):
        return {key: _reordered(value[key]) for key in reversed(list(value))}
    if isinstance(value, list):
        return [_reordered(item) for item in value]
    return value


FULL = raw(
    tool(
        "t",
        schema={"type": "object", "properties": {"b": {"type": "string"}, "a": {"type": "number"}}},
        permissions=True,
        directOnly=True,
    ),
    tool("u"),
    hooks=("turn.before", "tool.execute.after"),
    skills=(SKILL,),
    agents=(AGENT,),
    default_agents=("helper",),
)


def test_fingerprint_stable_across_key_order() -> None:
    first = build_manifest(FULL)
    second = build_manifest(_reordered(copy.deepcopy(FULL)))
    assert list(_reordered(FULL)) != list(FULL)
    assert first.fingerprint == second.fingerprint
    assert first.canonical == second.canonical
    assert len(first.fingerprint) == 64


def test_fingerprint_changes_with_a_description() -> None:
    changed = copy.deepcopy(FULL)
    changed["tools"][1]["description"] = "A tool!"
    assert build_manifest(changed).fingerprint != build_manifest(FULL).fingerprint


@pytest.mark.parametrize(
    "change",
    [
        lambda v: v["tools"][0]["inputSchema"]["properties"]["a"].update(type="integer"),
        lambda v: v["tools"][0].update(permissions=False),
        lambda v: v["tools"][0].pop("directOnly"),
        lambda v: v.update(hooks=list(reversed(v["hooks"]))),
        lambda v: v["skills"][0].update(body="Do it twice."),
        lambda v: v["agents"][0].update(mode="all"),
        lambda v: v.update(defaultAgents=[]),
    ],
    ids=["schema", "permissions", "flag", "hook order", "skill", "agent", "default agent"],
)
def test_fingerprint_covers_every_registration(change: Any) -> None:
    changed = copy.deepcopy(FULL)
    change(changed)
    assert build_manifest(changed).fingerprint != build_manifest(FULL).fingerprint


def test_fingerprint_ignores_the_cleanup_flag() -> None:
    with_cleanup = dict(FULL, cleanup=True)
    assert build_manifest(with_cleanup).fingerprint == build_manifest(FULL).fingerprint


def test_canonical_round_trips_through_load_manifest() -> None:
    manifest = build_manifest(FULL)
    again = load_manifest(manifest.canonical)
    assert again.fingerprint == manifest.fingerprint
    assert again.tools == manifest.tools
    assert json.loads(again.canonical) == json.loads(manifest.canonical)


@pytest.mark.parametrize(
    ("value", "shape"),
    [
        (raw(), "empty"),
        (raw(tool()), "tools-only"),
        (raw(hooks=("turn.before",)), "hook-only"),
        (raw(tool(), hooks=("turn.before",)), "mixed"),
        (raw(tool(), agents=(AGENT,)), "mixed"),
        (raw(hooks=("turn.before",), skills=(SKILL,)), "mixed"),
    ],
)
def test_shape(value: dict[str, Any], shape: str) -> None:
    manifest: Manifest = build_manifest(value)
    assert manifest.shape == shape


# ---- through a real isolate -------------------------------------------------


def test_forbidden_keyword_fails_activation_in_an_isolate(plugin_runner: PluginRunner) -> None:
    source = tool_source(
        "return 'unreachable';",
        schema="{ type: 'object', properties: { a: { type: 'string', pattern: '^x' } } }",
    )
    with pytest.raises(WorkerHostError) as caught:
        asyncio.run(plugin_runner.activate(plugin_code(source)))
    assert (caught.value.code, caught.value.message) == (
        "invalid_contribution",
        INVALID
        + "tool t: inputSchema.properties.a uses the keyword 'pattern', which is not allowed.",
    )


def test_unknown_hook_fails_activation_in_an_isolate(plugin_runner: PluginRunner) -> None:
    source = plugin_source("context.hooks.register('tool.before', async () => {});")
    with pytest.raises(WorkerHostError) as caught:
        asyncio.run(plugin_runner.activate(plugin_code(source)))
    assert (caught.value.code, caught.value.message) == (
        "invalid_contribution",
        INVALID + "'tool.before' is not a hook name.",
    )


def test_registrations_reach_the_manifest_from_an_isolate(plugin_runner: PluginRunner) -> None:
    source = plugin_source(
        "context.tools.register({ id: 'a', description: 'A.', inputSchema: { type: 'object' },\n"
        "  directOnly: true, permissions: async () => [], execute: async () => null });\n"
        "context.hooks.register('turn.before', async () => {});\n"
        f"context.skills.register({json.dumps(SKILL)});\n"
        f"context.agents.register({json.dumps(AGENT)});\n"
        "context.agents.setDefault('helper');\n"
        "return () => {};"
    )
    manifest = asyncio.run(plugin_runner.activate(plugin_code(source)))
    expected = build_manifest(
        raw(
            tool("a", description="A.", permissions=True, directOnly=True),
            hooks=("turn.before",),
            skills=(SKILL,),
            agents=(AGENT,),
            default_agents=("helper",),
            cleanup=True,
        )
    )
    assert manifest == expected
    assert manifest.shape == "mixed"


def test_deep_schema_from_an_isolate_never_escapes_as_a_foreign_error(
    plugin_runner: PluginRunner,
) -> None:
    source = tool_source(
        "return null;",
        schema="(() => { let s = { type: 'object' };\n"
        "  for (let i = 0; i < 120; i++) s = { type: 'object', properties: { a: s } };\n"
        "  return s; })()",
    )
    try:
        manifest = asyncio.run(plugin_runner.activate(plugin_code(source)))
    except WorkerHostError as error:
        assert error.code == "invalid_contribution"
        assert error.message.startswith(INVALID + "tool t: ")
    else:
        assert manifest.tools[0].id == "t"


def test_a_recursive_ref_is_refused_because_validating_it_can_explode() -> None:
    # Recursion with fan-out costs 2^depth of the model's input; the host
    # refuses recursive $refs at setup rather than risk it.
    schema = {"type": "object", "additionalProperties": {"$ref": "#"}}
    assert rejection(raw(tool(schema=schema))) == (
        INVALID + "tool t: inputSchema has a $ref that refers back to itself."
    )


def test_a_ref_graph_that_fans_out_is_refused() -> None:
    defs: dict[str, Any] = {
        f"d{i}": {"allOf": [{"$ref": f"#/$defs/d{i + 1}"}, {"$ref": f"#/$defs/d{i + 1}"}]}
        for i in range(30)
    }
    defs["d30"] = {"type": "integer"}
    schema = {"type": "object", "properties": {"x": {"$ref": "#/$defs/d0"}}, "$defs": defs}
    assert rejection(raw(tool(schema=schema))) == (
        INVALID + "tool t: inputSchema is too complex once its $refs are followed."
    )


def test_a_schema_over_64_kib_is_refused() -> None:
    schema = {"type": "object", "description": "x" * (64 * 1024)}
    assert rejection(raw(tool(schema=schema))) == (
        INVALID + "tool t: inputSchema is larger than 64 KiB."
    )
