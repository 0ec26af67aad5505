"""The JavaScript sdk (sdk/js/index.mjs), exercised in real node against hostile inputs."""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from sdk import sdk_js_path

RunNode = Callable[..., Any]

# Every script starts with this: the sdk imported by file URL, and `show` to carry `undefined`
# through JSON.
PRELUDE = """
const sdk = await import(process.argv[2]);
const show = (value) => (value === undefined ? '<undefined>' : value);
const out = (value) => console.log(JSON.stringify(value));
"""

GUARDS = {
    "isPluginError": "PluginError",
    "isWorkspaceFileError": "WorkspaceFileError",
    "isWorkspaceShellError": "WorkspaceShellError",
    "isWebFetchError": "WebFetchError",
    "isQuestionDismissedError": "QuestionDismissedError",
}

LIMITS = {
    "MAX_FILE_READ_BYTES": 51200,
    "MAX_SHELL_OUTPUT_BYTES": 51200,
    "MAX_SHELL_TIMEOUT_MS": 2147483647,
    "MAX_DIRECTORY_ENTRIES": 2000,
    "DEFAULT_WEB_FETCH_TIMEOUT_MS": 30000,
    "MAX_WEB_FETCH_RESPONSE_BYTES": 5242880,
    "MAX_WEB_FETCH_TIMEOUT_MS": 120000,
    "MAX_JOURNAL_KIND_LENGTH": 64,
    "MAX_JOURNAL_SUMMARY_LENGTH": 256,
    "MAX_JOURNAL_DATA_BYTES": 4096,
    "MAX_JOURNAL_ENTRIES_PER_TURN": 50,
}

RUNTIME_EXPORTS = sorted(
    [
        "PluginError",
        "QuestionDismissedError",
        "WebFetchError",
        "WorkspaceFileError",
        "WorkspaceShellError",
        "asString",
        "definePlugin",
        *GUARDS,
        *LIMITS,
    ]
)


def run_sdk(run_node: RunNode, script: str, *args: str) -> Any:
    """Run ``script`` after PRELUDE; ``args`` follow the sdk's URL in ``process.argv``."""
    return run_node(PRELUDE + script, sdk_js_path().as_uri(), *args)


def test_exports_exactly_the_contract_runtime_names(run_node: RunNode) -> None:
    result = run_sdk(run_node, "out(Object.keys(sdk).sort());")
    assert result == RUNTIME_EXPORTS


def test_limit_constants_have_the_contract_values(run_node: RunNode) -> None:
    script = f"out(Object.fromEntries({list(LIMITS)!r}.map((n) => [n, sdk[n]])));"
    assert run_sdk(run_node, script) == LIMITS


def test_as_string_accepts_only_primitive_strings_and_runs_no_user_code(
    run_node: RunNode,
) -> None:
    script = r"""
let calls = 0;
const count = () => { calls += 1; return 'converted'; };
// Every trap the engine looks up throws (and is counted), whichever operation asks for it.
const everyTrap = new Proxy({}, { get: () => () => { calls += 1; throw new Error('trap'); } });
const trapAll = new Proxy({}, everyTrap);
const values = {
  string: 'hello',
  empty: '',
  stringWrapper: new String('wrapped'),
  number: 42,
  bigint: 10n,
  boolean: true,
  nullValue: null,
  undefinedValue: undefined,
  symbol: Symbol('s'),
  toStringObject: { toString: count },
  valueOfObject: { valueOf: count },
  toPrimitiveObject: { [Symbol.toPrimitive]: count },
  throwingToPrimitive: { [Symbol.toPrimitive]() { calls += 1; throw new Error('no'); } },
  prototypeLess: Object.assign(Object.create(null), { toString: count }),
  hostileProxy: trapAll,
  proxiedString: new Proxy(new String('x'), {}),
  array: ['a'],
  func: Object.assign(() => 'f', { toString: count }),
};
const results = {};
for (const [name, value] of Object.entries(values)) results[name] = show(sdk.asString(value));
out({ results, calls });
"""
    assert run_sdk(run_node, script) == {
        "results": {
            "string": "hello",
            "empty": "",
            "stringWrapper": "<undefined>",
            "number": "<undefined>",
            "bigint": "<undefined>",
            "boolean": "<undefined>",
            "nullValue": "<undefined>",
            "undefinedValue": "<undefined>",
            "symbol": "<undefined>",
            "toStringObject": "<undefined>",
            "valueOfObject": "<undefined>",
            "toPrimitiveObject": "<undefined>",
            "throwingToPrimitive": "<undefined>",
            "prototypeLess": "<undefined>",
            "hostileProxy": "<undefined>",
            "proxiedString": "<undefined>",
            "array": "<undefined>",
            "func": "<undefined>",
        },
        "calls": 0,
    }


def test_guards_match_each_error_class_and_only_its_own(run_node: RunNode) -> None:
    script = r"""
const errors = {
  PluginError: new sdk.PluginError({ message: 'm' }),
  WorkspaceFileError: new sdk.WorkspaceFileError({ code: 'not_found' }),
  WorkspaceShellError: new sdk.WorkspaceShellError({ code: 'spawn_failed' }),
  WebFetchError: new sdk.WebFetchError({ code: 'timed_out' }),
  QuestionDismissedError: new sdk.QuestionDismissedError(),
  Error: new Error('plain'),
};
const guards = ['isPluginError', 'isWorkspaceFileError', 'isWorkspaceShellError',
  'isWebFetchError', 'isQuestionDismissedError'];
const matrix = {};
for (const [name, error] of Object.entries(errors)) {
  matrix[name] = guards.filter((guard) => sdk[guard](error));
}
out(matrix);
"""
    assert run_sdk(run_node, script) == {
        "PluginError": ["isPluginError"],
        "WorkspaceFileError": ["isWorkspaceFileError"],
        "WorkspaceShellError": ["isWorkspaceShellError"],
        "WebFetchError": ["isWebFetchError"],
        "QuestionDismissedError": ["isQuestionDismissedError"],
        "Error": [],
    }


@pytest.mark.parametrize(("guard", "tag"), sorted(GUARDS.items()))
def test_guard_reads_only_an_own_data_tag_and_never_runs_user_code(
    run_node: RunNode, guard: str, tag: str
) -> None:
    script = r"""
const [guard, tag] = [process.argv[3], process.argv[4]];
const is = sdk[guard];
const calls = { getter: 0, conversion: 0, getTrap: 0, descriptorTrap: 0 };
const converting = {
  toString() { calls.conversion += 1; return tag; },
  valueOf() { calls.conversion += 1; return tag; },
  [Symbol.toPrimitive]() { calls.conversion += 1; return tag; },
};
const revocable = Proxy.revocable({ _tag: tag }, {});
revocable.revoke();
const cases = {
  ownData: { _tag: tag },
  ownDataNonEnumerable: Object.defineProperty({}, '_tag', { value: tag, enumerable: false }),
  frozen: Object.freeze({ _tag: tag }),
  prototypeLess: Object.assign(Object.create(null), { _tag: tag }),
  prototypeLessUntagged: Object.create(null),
  functionWithTag: Object.assign(function tagged() {}, { _tag: tag }),
  stringWrapperWithTag: Object.assign(new String(tag), { _tag: tag }),
  stringWrapper: new String(tag),
  inherited: Object.create({ _tag: tag }),
  inheritedThroughClass: new (class { get _tag() { calls.getter += 1; return tag; } })(),
  ownGetter: { get _tag() { calls.getter += 1; return tag; } },
  throwingGetter: { get _tag() { calls.getter += 1; throw new Error('getter'); } },
  wrongTag: { _tag: tag + 'X' },
  lowercaseTag: { _tag: tag.toLowerCase() },
  tagIsStringWrapper: { _tag: new String(tag) },
  tagConverts: { _tag: converting },
  tagIsArray: { _tag: [tag] },
  noTag: { message: tag },
  proxyPassThrough: new Proxy({ _tag: tag }, {
    get() { calls.getTrap += 1; throw new Error('get trap'); },
  }),
  proxyDescriptorTrapThrows: new Proxy({ _tag: tag }, {
    getOwnPropertyDescriptor() { calls.descriptorTrap += 1; throw new Error('descriptor'); },
    get() { calls.getTrap += 1; return tag; },
  }),
  proxyDescriptorTrapLies: new Proxy({}, {
    getOwnPropertyDescriptor() {
      calls.descriptorTrap += 1;
      return { value: tag, writable: true, enumerable: true, configurable: false };
    },
  }),
  proxyHandlerIsHostile: new Proxy({ _tag: tag }, new Proxy({}, {
    get() { calls.getTrap += 1; throw new Error('handler'); },
  })),
  revokedProxy: revocable.proxy,
  primitiveTagString: tag,
  number: 1,
  nullValue: null,
  undefinedValue: undefined,
  symbol: Symbol(tag),
  boolean: true,
};
const results = {};
for (const [name, value] of Object.entries(cases)) results[name] = is(value);
// The guards keep working when the globals they rely on are replaced afterwards.
Object.getOwnPropertyDescriptor = () => { throw new Error('patched'); };
Object.hasOwn = () => { throw new Error('patched'); };
results.afterPatchingGlobals = is({ _tag: tag });
out({ results, calls });
"""
    result = run_sdk(run_node, script, guard, tag)
    assert result == {
        "results": {
            "ownData": True,
            "ownDataNonEnumerable": True,
            "frozen": True,
            "prototypeLess": True,
            "prototypeLessUntagged": False,
            "functionWithTag": True,
            "stringWrapperWithTag": True,
            "stringWrapper": False,
            "inherited": False,
            "inheritedThroughClass": False,
            "ownGetter": False,
            "throwingGetter": False,
            "wrongTag": False,
            "lowercaseTag": False,
            "tagIsStringWrapper": False,
            "tagConverts": False,
            "tagIsArray": False,
            "noTag": False,
            "proxyPassThrough": True,
            "proxyDescriptorTrapThrows": False,
            # The trap breaks a Proxy invariant (non-configurable, absent on the target), so
            # the engine throws and the guard reports no match.
            "proxyDescriptorTrapLies": False,
            "proxyHandlerIsHostile": False,
            "revokedProxy": False,
            "primitiveTagString": False,
            "number": False,
            "nullValue": False,
            "undefinedValue": False,
            "symbol": False,
            "boolean": False,
            "afterPatchingGlobals": True,
        },
        "calls": {"getter": 0, "conversion": 0, "getTrap": 1, "descriptorTrap": 2},
    }


def test_guards_match_failures_from_another_copy_of_the_module(
    run_node: RunNode, tmp_path: Path
) -> None:
    copy = tmp_path / "copy" / "index.mjs"
    copy.parent.mkdir()
    shutil.copyfile(sdk_js_path(), copy)
    script = r"""
const other = await import(process.argv[3]);
const error = new other.WorkspaceFileError({ code: 'io' });
out({
  sameClass: other.WorkspaceFileError === sdk.WorkspaceFileError,
  instanceOf: error instanceof sdk.WorkspaceFileError,
  guard: sdk.isWorkspaceFileError(error),
  reverse: other.isPluginError(new sdk.PluginError({ message: 'm' })),
});
"""
    assert run_sdk(run_node, script, copy.as_uri()) == {
        "sameClass": False,
        "instanceOf": False,
        "guard": True,
        "reverse": True,
    }


def test_error_classes_carry_contract_messages_and_own_data_properties(
    run_node: RunNode,
) -> None:
    script = r"""
const describe = (error) => {
  const own = {};
  for (const key of ['_tag', 'code', 'publicMessage']) {
    const d = Object.getOwnPropertyDescriptor(error, key);
    if (d !== undefined) own[key] = d;
  }
  return {
    message: error.message,
    name: error.name,
    text: String(error),
    isError: error instanceof Error,
    ownKeys: Reflect.ownKeys(error).filter((key) => key !== 'stack').map(String).sort(),
    own,
    json: JSON.stringify(error),
  };
};
out({
  plugin: describe(new sdk.PluginError({ message: 'private detail' })),
  pluginPublic: describe(new sdk.PluginError({ message: 'private', publicMessage: 'Safe.' })),
  pluginExplicitUndefined: describe(
    new sdk.PluginError({ message: 'm', publicMessage: undefined }),
  ),
  file: describe(new sdk.WorkspaceFileError({ code: 'not_found' })),
  shell: describe(new sdk.WorkspaceShellError({ code: 'invalid_timeout' })),
  web: describe(new sdk.WebFetchError({ code: 'http_status' })),
  question: describe(new sdk.QuestionDismissedError()),
});
"""

    def data(value: str) -> dict[str, object]:
        return {"value": value, "writable": False, "enumerable": True, "configurable": False}

    def tagged(tag: str, code: str, message: str) -> dict[str, object]:
        return {
            "message": message,
            "name": tag,
            "text": f"{tag}: {message}",
            "isError": True,
            "ownKeys": ["_tag", "code", "message"],
            "own": {"_tag": data(tag), "code": data(code)},
            "json": f'{{"_tag":"{tag}","code":"{code}"}}',
        }

    assert run_sdk(run_node, script) == {
        "plugin": {
            "message": "private detail",
            "name": "PluginError",
            "text": "PluginError: private detail",
            "isError": True,
            "ownKeys": ["_tag", "message"],
            "own": {"_tag": data("PluginError")},
            "json": '{"_tag":"PluginError"}',
        },
        "pluginPublic": {
            "message": "private",
            "name": "PluginError",
            "text": "PluginError: private",
            "isError": True,
            "ownKeys": ["_tag", "message", "publicMessage"],
            "own": {"_tag": data("PluginError"), "publicMessage": data("Safe.")},
            "json": '{"_tag":"PluginError","publicMessage":"Safe."}',
        },
        "pluginExplicitUndefined": {
            "message": "m",
            "name": "PluginError",
            "text": "PluginError: m",
            "isError": True,
            "ownKeys": ["_tag", "message"],
            "own": {"_tag": data("PluginError")},
            "json": '{"_tag":"PluginError"}',
        },
        "file": tagged("WorkspaceFileError", "not_found", "Workspace file failed: not_found"),
        "shell": tagged(
            "WorkspaceShellError", "invalid_timeout", "Workspace shell failed: invalid_timeout"
        ),
        "web": tagged("WebFetchError", "http_status", "Web fetch failed: http_status"),
        "question": tagged(
            "QuestionDismissedError", "question_dismissed", "The user dismissed this question."
        ),
    }


def test_error_tags_cannot_be_reassigned(run_node: RunNode) -> None:
    script = r"""
const error = new sdk.WorkspaceFileError({ code: 'io' });
let threw = false;
try { error._tag = 'PluginError'; } catch { threw = true; }  // modules are strict code
out({ threw, tag: error._tag, code: error.code, stillMatches: sdk.isWorkspaceFileError(error) });
"""
    assert run_sdk(run_node, script) == {
        "threw": True,
        "tag": "WorkspaceFileError",
        "code": "io",
        "stillMatches": True,
    }


def test_define_plugin_returns_a_frozen_copy_with_only_id_and_setup(run_node: RunNode) -> None:
    script = r"""
const reads = { id: 0, setup: 0 };
const setup = () => {};
const input = {
  get id() { reads.id += 1; return 'example.shout'; },
  get setup() { reads.setup += 1; return setup; },
  extra: 'dropped',
};
const plugin = sdk.definePlugin(input);
out({
  keys: Reflect.ownKeys(plugin),
  id: plugin.id,
  sameSetup: plugin.setup === setup,
  frozen: Object.isFrozen(plugin),
  notTheInput: plugin !== input,
  prototypeIsObject: Object.getPrototypeOf(plugin) === Object.prototype,
  reads,
});
"""
    assert run_sdk(run_node, script) == {
        "keys": ["id", "setup"],
        "id": "example.shout",
        "sameSetup": True,
        "frozen": True,
        "notTheInput": True,
        "prototypeIsObject": True,
        "reads": {"id": 1, "setup": 1},
    }


def test_define_plugin_rejects_bad_definitions_with_plugin_errors(run_node: RunNode) -> None:
    script = r"""
const setup = () => {};
const cases = {
  emptyId: { id: '', setup },
  missingId: { setup },
  numberId: { id: 7, setup },
  stringWrapperId: { id: new String('example.shout'), setup },
  missingSetup: { id: 'example.shout' },
  stringSetup: { id: 'example.shout', setup: 'setup' },
  objectSetup: { id: 'example.shout', setup: {} },
  nullPlugin: null,
  undefinedPlugin: undefined,
  stringPlugin: 'example.shout',
};
const results = {};
for (const [name, value] of Object.entries(cases)) {
  try {
    sdk.definePlugin(value);
    results[name] = 'accepted';
  } catch (error) {
    results[name] = { plugin: sdk.isPluginError(error), message: error.message };
  }
}
out(results);
"""
    bad_id = {"plugin": True, "message": "definePlugin: `id` must be a non-empty string."}
    bad_setup = {"plugin": True, "message": "definePlugin: `setup` must be a function."}
    not_object = {
        "plugin": True,
        "message": "definePlugin expects an object with `id` and `setup`.",
    }
    assert run_sdk(run_node, script) == {
        "emptyId": bad_id,
        "missingId": bad_id,
        "numberId": bad_id,
        "stringWrapperId": bad_id,
        "missingSetup": bad_setup,
        "stringSetup": bad_setup,
        "objectSetup": bad_setup,
        "nullPlugin": not_object,
        "undefinedPlugin": not_object,
        "stringPlugin": not_object,
    }


def test_type_declarations_cover_every_runtime_export() -> None:
    declarations = (sdk_js_path().parent / "index.d.ts").read_text(encoding="utf-8")
    declared = set(re.findall(r"^export declare (?:const|class) (\w+)", declarations, re.M))
    assert declared == set(RUNTIME_EXPORTS)
    for name, value in LIMITS.items():
        assert f"export declare const {name} = {value};" in declarations


def test_package_json_names_the_module_and_its_entry_points() -> None:
    package = json.loads((sdk_js_path().parent / "package.json").read_text(encoding="utf-8"))
    assert package["name"] == "@worker-host/sdk"
    assert package["type"] == "module"
    assert package["types"] == "./index.d.ts"
    assert package["exports"]["."] == {"types": "./index.d.ts", "default": "./index.mjs"}
