"""Tool input schemas: the contract's keyword allow-list, and input validation."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from functools import lru_cache
from typing import Any
from urllib.parse import unquote

from jsonschema import Draft202012Validator, validators
from jsonschema.exceptions import SchemaError, ValidationError

# Keywords the contract's `JsonSchema` lists; anything else rejects the schema.
ALLOWED_KEYWORDS = frozenset(
    {
        "$comment", "$defs", "$ref", "allOf", "anyOf", "oneOf", "not", "if", "then", "else",
        "type", "const", "enum", "title", "description", "properties", "required",
        "additionalProperties", "propertyNames", "dependentRequired", "dependentSchemas",
        "minProperties", "maxProperties", "prefixItems", "items", "contains", "minContains",
        "maxContains", "minItems", "maxItems", "uniqueItems", "minimum", "maximum",
        "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "minLength", "maxLength",
    }
)
_SCHEMA_MAPS = ("properties", "$defs", "dependentSchemas")
_SCHEMA_VALUES = ("not", "if", "then", "else", "items", "contains", "additionalProperties",
                  "propertyNames")
_SCHEMA_LISTS = ("allOf", "anyOf", "oneOf", "prefixItems")
# Deeper schemas are refused at setup: validating them would exhaust the stack.
MAX_SCHEMA_DEPTH = 64
# Bounds that keep validation cheap whatever a plugin declares: the schema's
# size, and how many subschemas it stands for once every $ref is followed
# (a chain of refs that each fan out would otherwise cost 2^n).
MAX_SCHEMA_BYTES = 64 * 1024
MAX_EXPANDED_SUBSCHEMAS = 2_000
# Larger model inputs fail validation without being looked at.
MAX_INPUT_BYTES = 1024 * 1024


def schema_problem(schema: Any) -> str | None:
    """Why `schema` is not an acceptable tool `inputSchema`, or None when it is.

    The root must be an object schema with `type: "object"`; every subschema may
    use only `ALLOWED_KEYWORDS` (the root may also carry `$schema`); `$ref` must
    be a local `#...` pointer; and the whole must be a valid 2020-12 schema.
    """
    if not isinstance(schema, dict):
        return "inputSchema must be an object"
    if schema.get("type") != "object":
        return 'inputSchema must have type "object" at its root'
    if len(json.dumps(schema)) > MAX_SCHEMA_BYTES:
        return f"inputSchema is larger than {MAX_SCHEMA_BYTES // 1024} KiB"
    for location, keyword, value in _keywords(schema, "inputSchema", root=True):
        if location.count(".") > MAX_SCHEMA_DEPTH:
            return f"inputSchema is nested more than {MAX_SCHEMA_DEPTH} levels deep"
        if keyword not in ALLOWED_KEYWORDS:
            return f"{location} uses the keyword {keyword!r}, which is not allowed"
        if keyword == "$ref" and not _resolves(schema, value):
            return f"{location} has a $ref that is not a local #/... pointer that resolves"
    try:
        if _expanded_size(schema, schema, set(), {}) > MAX_EXPANDED_SUBSCHEMAS:
            return "inputSchema is too complex once its $refs are followed"
    except _RecursiveRef:
        return "inputSchema has a $ref that refers back to itself"
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        return f"inputSchema is not a valid JSON Schema: {exc.message[:200]}"
    except RecursionError:
        return "inputSchema is nested too deeply"
    return None


class _RecursiveRef(Exception):
    pass


def _expanded_size(root: dict[str, Any], node: Any, following: set[str],
                   sizes: dict[str, int]) -> int:
    """How many subschemas `node` stands for with every local $ref followed."""
    if not isinstance(node, dict):
        return 1
    total = 1
    for keyword, value in node.items():
        if keyword == "$ref" and isinstance(value, str):
            if value in following:
                raise _RecursiveRef
            if value not in sizes:
                following.add(value)
                sizes[value] = _expanded_size(root, _target(root, value), following, sizes)
                following.discard(value)
            total += sizes[value]
        elif keyword in _SCHEMA_MAPS and isinstance(value, dict):
            total += sum(_expanded_size(root, sub, following, sizes) for sub in value.values())
        elif keyword in _SCHEMA_VALUES:
            total += _expanded_size(root, value, following, sizes)
        elif keyword in _SCHEMA_LISTS and isinstance(value, list):
            total += sum(_expanded_size(root, sub, following, sizes) for sub in value)
        if total > MAX_EXPANDED_SUBSCHEMAS:
            return total
    return total


def _target(root: dict[str, Any], ref: str) -> Any:
    target: Any = root
    for token in ref[2:].split("/") if ref != "#" else ():
        token = unquote(token).replace("~1", "/").replace("~0", "~")
        target = target[int(token)] if isinstance(target, list) else target[token]
    return target


def _resolves(schema: dict[str, Any], ref: Any) -> bool:
    """Whether `ref` is `#` or a `#/...` JSON pointer to a subschema of `schema`."""
    if not isinstance(ref, str) or not (ref == "#" or ref.startswith("#/")):
        return False
    try:
        return isinstance(_target(schema, ref), dict | bool)
    except (KeyError, IndexError, ValueError, TypeError):
        return False


def _keywords(schema: Any, location: str, *, root: bool = False) -> Iterator[tuple[str, str, Any]]:
    if not isinstance(schema, dict):
        return  # boolean schemas, or a malformed value check_schema reports
    for keyword, value in schema.items():
        if root and keyword == "$schema":
            continue
        yield location, keyword, value
        if keyword in _SCHEMA_MAPS and isinstance(value, dict):
            for name, sub in value.items():
                yield from _keywords(sub, f"{location}.{keyword}.{name}")
        elif keyword in _SCHEMA_VALUES:
            yield from _keywords(value, f"{location}.{keyword}")
        elif keyword in _SCHEMA_LISTS and isinstance(value, list):
            for index, sub in enumerate(value):
                yield from _keywords(sub, f"{location}.{keyword}[{index}]")


def input_is_valid(schema: dict[str, Any], value: Any) -> bool:
    """Whether `value` satisfies an accepted `inputSchema` (2020-12).

    An input larger than `MAX_INPUT_BYTES` as JSON, or nested too deeply to
    validate, is not valid. Synchronous; see `validate_input` for callers on
    an event loop.
    """
    try:
        if len(json.dumps(value)) > MAX_INPUT_BYTES:
            return False
        return bool(_validator(json.dumps(schema, sort_keys=True)).is_valid(value))
    except (RecursionError, ValueError, TypeError):
        return False


async def validate_input(schema: dict[str, Any], value: Any) -> bool:
    """`input_is_valid` on a worker thread, so the event loop stays free."""
    return await asyncio.to_thread(input_is_valid, schema, value)


def json_identity(value: Any) -> Any:
    """`value` with integral floats as ints: in JSON, 1 and 1.0 are one number."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {key: json_identity(item) for key, item in value.items()}
    if isinstance(value, list):
        return [json_identity(item) for item in value]
    return value


def _unique_items(validator: Any, unique: Any, instance: Any, schema: Any) -> Any:
    """uniqueItems in linear time (jsonschema's fallback for mixed types is
    quadratic); JSON equality: true is not 1, 1.0 is 1."""
    if unique and validator.is_type(instance, "array"):
        seen = {json.dumps(json_identity(item), sort_keys=True) for item in instance}
        if len(seen) != len(instance):
            yield ValidationError(f"{instance!r} has non-unique elements")


_FastValidator = validators.extend(  # type: ignore[no-untyped-call]  # untyped in jsonschema
    Draft202012Validator, {"uniqueItems": _unique_items}
)


@lru_cache(maxsize=512)
def _validator(schema_json: str) -> Any:
    return _FastValidator(json.loads(schema_json))
