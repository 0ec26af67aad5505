"""Tool input schemas: the contract's keyword allow-list, and input validation."""

from __future__ import annotations

import json
from collections.abc import Iterator
from functools import lru_cache
from typing import Any
from urllib.parse import unquote

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

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
    for location, keyword, value in _keywords(schema, "inputSchema", root=True):
        if location.count(".") > MAX_SCHEMA_DEPTH:
            return f"inputSchema is nested more than {MAX_SCHEMA_DEPTH} levels deep"
        if keyword not in ALLOWED_KEYWORDS:
            return f"{location} uses the keyword {keyword!r}, which is not allowed"
        if keyword == "$ref" and not _resolves(schema, value):
            return f"{location} has a $ref that is not a local #/... pointer that resolves"
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        return f"inputSchema is not a valid JSON Schema: {exc.message}"
    except RecursionError:
        return "inputSchema is nested too deeply"
    return None


def _resolves(schema: dict[str, Any], ref: Any) -> bool:
    """Whether `ref` is `#` or a `#/...` JSON pointer to a subschema of `schema`."""
    if not isinstance(ref, str) or not (ref == "#" or ref.startswith("#/")):
        return False
    target: Any = schema
    for token in ref[2:].split("/") if ref != "#" else ():
        token = unquote(token).replace("~1", "/").replace("~0", "~")
        if isinstance(target, dict) and token in target:
            target = target[token]
        elif isinstance(target, list) and token.isdigit() and int(token) < len(target):
            target = target[int(token)]
        else:
            return False
    return isinstance(target, dict | bool)


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

    An input nested too deeply to validate is not valid.
    """
    try:
        return bool(_validator(json.dumps(schema, sort_keys=True)).is_valid(value))
    except RecursionError:
        return False


@lru_cache(maxsize=512)
def _validator(schema_json: str) -> Draft202012Validator:
    return Draft202012Validator(json.loads(schema_json))
