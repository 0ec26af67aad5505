"""Building bundles with the real esbuild, and running what it builds in real node."""

from __future__ import annotations

import json
import os
import pickle
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import sdk
from sdk import (
    CONTRACT_MODULE,
    DEFAULT_ALIASES,
    SDK_MODULE,
    PackagingError,
    build_bundle,
    find_esbuild,
    sdk_js_path,
)

RunNode = Callable[..., Any]

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"

ESBUILD_MISSING_MESSAGE = (
    "esbuild was not found on PATH, in ./node_modules/.bin or in the Python environment's "
    "node_modules/.bin; install it with `npm install esbuild`."
)

# Static imports and re-exports that name another module, and dynamic `import(...)`.
STATIC_IMPORT = re.compile(rb"^\s*(?:import\s*[\w{*'\"]|export\s*(?:\*|\{[^}]*\})\s*from\b)", re.M)
DYNAMIC_IMPORT = re.compile(rb"\bimport\s*\(")

# Loads a bundle by file URL, runs its setup against a recording context, then calls the first
# registered tool's `permissions` (when present) and `execute` with the given input.
RUN_BUNDLE = r"""
const module = await import(process.argv[2]);
const input = JSON.parse(process.argv[3]);
const plugin = module.default;
const tools = [];
const context = {
  activation: { scope: 'session', sessionId: 's1', revision: { id: 'r1', version: 1 } },
  options: {},
  tools: { register: (declaration) => tools.push(declaration) },
};
const cleanup = await plugin.setup(context);
const call = { sessionId: 's1', turnId: 't1', workdir: '.', toolCallId: 'c1', permissions: [] };
const tool = tools[0];
console.log(JSON.stringify({
  exports: Object.keys(module),
  id: plugin.id,
  setup: typeof plugin.setup,
  pluginKeys: Object.keys(plugin),
  frozen: Object.isFrozen(plugin),
  cleanup: typeof cleanup,
  tools: tools.map((declaration) => declaration.id),
  permissions: tool.permissions ? await tool.permissions(input, call) : null,
  result: await tool.execute(input, call),
}));
"""


def run_bundle(run_node: RunNode, bundle: Path, tool_input: dict[str, Any]) -> Any:
    return run_node(RUN_BUNDLE, bundle.as_uri(), json.dumps(tool_input))


def assert_self_contained(bundle: bytes) -> None:
    assert STATIC_IMPORT.search(bundle) is None
    assert DYNAMIC_IMPORT.search(bundle) is None
    assert b"@worker-host/sdk" not in bundle.replace(b"// @worker-host/sdk\n", b"")
    assert CONTRACT_MODULE.encode() not in bundle


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


# ---------------------------------------------------------------------------------------------
# examples


def test_shout_example_builds_into_a_self_contained_bundle_that_runs(
    run_node: RunNode, tmp_path: Path
) -> None:
    outfile = tmp_path / "dist" / "shout.mjs"
    bundle = build_bundle(EXAMPLES / "shout" / "plugin.mjs", outfile)

    assert outfile.read_bytes() == bundle
    assert_self_contained(bundle)
    assert run_bundle(run_node, outfile, {"text": "quiet please"}) == {
        "exports": ["default"],
        "id": "example.shout",
        "setup": "function",
        "pluginKeys": ["id", "setup"],
        "frozen": True,
        "cleanup": "undefined",
        "tools": ["shout"],
        "permissions": [{"action": "shout", "resources": ["*"], "save": ["*"]}],
        "result": "QUIET PLEASE",
    }


def test_basic_example_builds_with_the_contract_module_name(
    run_node: RunNode, tmp_path: Path
) -> None:
    source = (EXAMPLES / "basic" / "plugin.mjs").read_text(encoding="utf-8")
    assert "from '@zephyrcloudio/harness-plugin'" in source
    outfile = tmp_path / "basic.mjs"

    bundle = build_bundle(str(EXAMPLES / "basic" / "plugin.mjs"), str(outfile))

    assert_self_contained(bundle)
    assert run_bundle(run_node, outfile, {"value": 21}) == {
        "exports": ["default"],
        "id": "example.basic",
        "setup": "function",
        "pluginKeys": ["id", "setup"],
        "frozen": True,
        "cleanup": "undefined",
        "tools": ["double"],
        "permissions": None,
        "result": {"value": 42},
    }


def test_bundle_bytes_do_not_depend_on_the_current_directory_or_install_location(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    entry = EXAMPLES / "shout" / "plugin.mjs"
    monkeypatch.chdir(REPO)
    from_repo = build_bundle(entry)
    monkeypatch.chdir(tmp_path)
    from_elsewhere = build_bundle(entry)

    assert from_repo == from_elsewhere
    assert from_repo.startswith(b"// @worker-host/sdk\n")
    assert b"\n// plugin.mjs\n" in from_repo
    assert b"../" not in from_repo
    assert os.fsencode(sdk_js_path().parent) not in from_repo
    assert os.fsencode(REPO) not in from_repo


def test_without_outfile_nothing_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    entry = write(tmp_path / "src" / "plugin.mjs", (EXAMPLES / "basic" / "plugin.mjs").read_text())
    monkeypatch.chdir(tmp_path)

    bundle = build_bundle(entry)

    assert bundle.startswith(b"// @worker-host/sdk\n")
    assert sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*")) == [
        "src",
        "src/plugin.mjs",
    ]


def test_typescript_entry_builds_with_types_stripped(run_node: RunNode, tmp_path: Path) -> None:
    write(
        tmp_path / "src" / "shouting.ts",
        "export type Loudness = 'loud' | 'louder';\n"
        "export const shoutText = (text: string, loudness: Loudness = 'loud'): string =>\n"
        "  loudness === 'loud' ? text.toUpperCase() : `${text.toUpperCase()}!`;\n",
    )
    entry = write(
        tmp_path / "src" / "index.ts",
        """import {
  asString,
  definePlugin,
  PluginError,
  type ToolDeclaration,
} from '@zephyrcloudio/harness-plugin';
import { shoutText, type Loudness } from './shouting';

interface ShoutInput {
  readonly text: string;
}

const loudness: Loudness = 'louder';

const shout: ToolDeclaration<ShoutInput> = {
  id: 'shout',
  description: 'Uppercase a short string.',
  inputSchema: {
    type: 'object',
    properties: { text: { type: 'string', minLength: 1 } },
    required: ['text'],
    additionalProperties: false,
  },
  permissions: async () => [{ action: 'shout', resources: ['*'], save: ['*'] }],
  execute: async (input) => {
    const text = asString(input.text);
    if (text === undefined) throw new PluginError({ message: 'Shout input is invalid.' });
    return shoutText(text, loudness);
  },
};

export default definePlugin({
  id: 'example.shout',
  setup: (context) => {
    context.tools.register(shout);
  },
});
""",
    )
    outfile = tmp_path / "dist" / "worker.js"

    bundle = build_bundle(entry, outfile)

    assert_self_contained(bundle)
    assert b"ShoutInput" not in bundle
    assert b"Loudness" not in bundle
    result = run_bundle(run_node, outfile, {"text": "hi"})
    assert (result["id"], result["tools"], result["result"]) == ("example.shout", ["shout"], "HI!")


# ---------------------------------------------------------------------------------------------
# aliases


def test_default_aliases_map_both_module_names_to_the_packaged_sdk() -> None:
    assert dict(DEFAULT_ALIASES) == {
        "@worker-host/sdk": str(sdk_js_path()),
        "@zephyrcloudio/harness-plugin": str(sdk_js_path()),
    }
    assert (SDK_MODULE, CONTRACT_MODULE) == ("@worker-host/sdk", "@zephyrcloudio/harness-plugin")
    with pytest.raises(TypeError):
        DEFAULT_ALIASES["other"] = "x"  # type: ignore[index]


def test_packaged_sdk_files_are_installed_beside_each_other() -> None:
    path = sdk_js_path()
    assert path.is_absolute()
    assert path.name == "index.mjs"
    assert sorted(p.name for p in path.parent.iterdir() if p.is_file()) == [
        "index.d.ts",
        "index.mjs",
        "package.json",
    ]


def test_caller_aliases_merge_with_defaults_and_relative_targets_use_the_current_directory(
    run_node: RunNode, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(tmp_path / "lib" / "naming.mjs", "export const prefix = 'example';\n")
    entry = write(
        tmp_path / "src" / "plugin.mjs",
        "import { definePlugin } from '@worker-host/sdk';\n"
        "import { asString } from '@zephyrcloudio/harness-plugin';\n"
        "import { prefix } from 'naming';\n"
        "export default definePlugin({\n"
        "  id: `${prefix}.alias`,\n"
        "  setup: (context) => context.tools.register({\n"
        "    id: 'echo', description: 'Echo', inputSchema: { type: 'object' },\n"
        "    execute: async (input) => asString(input.text) ?? '',\n"
        "  }),\n"
        "});\n",
    )
    monkeypatch.chdir(tmp_path)
    outfile = tmp_path / "out.mjs"

    bundle = build_bundle("src/plugin.mjs", outfile, aliases={"naming": "./lib/naming.mjs"})

    assert_self_contained(bundle)
    assert entry.is_file()
    result = run_bundle(run_node, outfile, {"text": "same"})
    assert (result["id"], result["result"]) == ("example.alias", "same")


def test_alias_targets_may_be_absolute_paths_with_spaces(run_node: RunNode, tmp_path: Path) -> None:
    copy = tmp_path / "sdk copy with spaces" / "index.mjs"
    write(copy, sdk_js_path().read_text(encoding="utf-8") + "export const COPY = 'copy';\n")
    write(
        tmp_path / "plugin dir" / "plugin.mjs",
        "import { COPY, definePlugin } from '@worker-host/sdk';\n"
        "export default definePlugin({ id: `example.${COPY}`, setup: (context) =>\n"
        "  context.tools.register({ id: 'noop', description: 'No-op',\n"
        "    inputSchema: { type: 'object' }, execute: async () => null }) });\n",
    )
    outfile = tmp_path / "out dir" / "bundle.mjs"

    bundle = build_bundle(
        tmp_path / "plugin dir" / "plugin.mjs", outfile, aliases={SDK_MODULE: str(copy)}
    )

    assert_self_contained(bundle)
    assert bundle.startswith(b"// ../sdk copy with spaces/index.mjs\n")
    assert run_bundle(run_node, outfile, {})["id"] == "example.copy"


def test_alias_name_with_an_equals_sign_is_rejected(tmp_path: Path) -> None:
    entry = write(tmp_path / "plugin.mjs", "export default {};\n")
    with pytest.raises(PackagingError) as caught:
        build_bundle(entry, aliases={"bad=name": "./x.mjs"})
    assert (caught.value.code, caught.value.message) == (
        "build_failed",
        "Invalid alias name: 'bad=name'",
    )


# ---------------------------------------------------------------------------------------------
# failures


def assert_build_failed(entry: Path, message: str, tmp_path: Path) -> None:
    with pytest.raises(PackagingError) as caught:
        build_bundle(entry, tmp_path / "never-written.mjs")
    error = caught.value
    assert (error.code, error.message, str(error)) == ("build_failed", message, message)
    assert "\n" not in error.message
    assert str(tmp_path) not in error.message
    assert os.fspath(REPO) not in error.message
    assert not (tmp_path / "never-written.mjs").exists()


def test_syntax_error_reports_esbuild_first_error_on_one_line(tmp_path: Path) -> None:
    entry = write(
        tmp_path / "dir with spaces" / "plugin.mjs",
        "export default {\n  id: 'x' 'y',\n  setup() {},\n};\nconst = ;\n",
    )
    assert_build_failed(entry, 'plugin.mjs:2:10: Expected "}" but found "\'y\'"', tmp_path)


def test_error_in_an_imported_file_outside_the_entry_directory_names_only_the_file(
    tmp_path: Path,
) -> None:
    write(tmp_path / "lib" / "broken.mjs", "export const x = ;\n")
    entry = write(
        tmp_path / "src" / "plugin.mjs",
        "import { x } from '../lib/broken.mjs';\nexport default { id: x };\n",
    )
    assert_build_failed(entry, 'broken.mjs:1:17: Unexpected ";"', tmp_path)


@pytest.mark.parametrize(
    ("target", "shown"),
    [
        ("{entry_dir}/sub dir/missing.mjs", "sub dir/missing.mjs"),
        ("{tmp}/elsewhere/missing.mjs", "missing.mjs"),
        ("/nonexistent root/deeper/missing.mjs", "missing.mjs"),
    ],
)
def test_absolute_paths_in_esbuild_messages_are_made_relative_or_removed(
    tmp_path: Path, target: str, shown: str
) -> None:
    entry_dir = tmp_path / "plugin"
    specifier = target.format(entry_dir=entry_dir, tmp=tmp_path)
    entry = write(
        entry_dir / "plugin.mjs", f"import x from {json.dumps(specifier)};\nexport default x;\n"
    )
    assert_build_failed(entry, f'plugin.mjs:1:14: Could not resolve "{shown}"', tmp_path)


def test_unknown_package_fails_the_build(tmp_path: Path) -> None:
    entry = write(tmp_path / "plugin.mjs", "import pad from 'left-pad';\nexport default pad;\n")
    assert_build_failed(entry, 'plugin.mjs:1:16: Could not resolve "left-pad"', tmp_path)


def test_entry_without_default_export_fails_the_build(tmp_path: Path) -> None:
    entry = write(tmp_path / "plugin.mjs", "export const plugin = { id: 'example.none' };\n")
    assert_build_failed(
        entry, "The bundle has no default export; export the plugin as default", tmp_path
    )


@pytest.mark.parametrize("relative", [True, False])
def test_missing_entry_is_entry_not_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, relative: bool
) -> None:
    monkeypatch.chdir(tmp_path)
    entry: str | Path = "src/missing.mjs" if relative else tmp_path / "src" / "missing.mjs"
    with pytest.raises(PackagingError) as caught:
        build_bundle(entry)
    shown = "src/missing.mjs" if relative else "missing.mjs"
    assert (caught.value.code, str(caught.value)) == (
        "entry_not_found",
        f"Bundle entry not found: {shown}",
    )


def test_directory_entry_is_entry_not_found(tmp_path: Path) -> None:
    (tmp_path / "plugin.mjs").mkdir()
    with pytest.raises(PackagingError) as caught:
        build_bundle(tmp_path / "plugin.mjs")
    assert (caught.value.code, caught.value.message) == (
        "entry_not_found",
        "Bundle entry not found: plugin.mjs",
    )


# ---------------------------------------------------------------------------------------------
# finding esbuild


@pytest.fixture(scope="session")
def real_esbuild() -> Path:
    # Session scope: resolved before any function fixture empties the search locations.
    return Path(os.path.realpath(find_esbuild()))


@pytest.fixture
def nowhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """PATH, the current directory and sys.prefix all point at empty directories."""
    empty = tmp_path / "empty"
    for name in ("path", "cwd", "prefix"):
        (empty / name).mkdir(parents=True)
    monkeypatch.setenv("PATH", str(empty / "path"))
    monkeypatch.chdir(empty / "cwd")
    monkeypatch.setattr(sys, "prefix", str(empty / "prefix"))
    return empty


def link_esbuild(directory: Path, real_esbuild: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    link = directory / "esbuild"
    link.symlink_to(real_esbuild)
    return link


def test_missing_esbuild_is_esbuild_missing_with_the_install_command(
    nowhere: Path, tmp_path: Path
) -> None:
    entry = write(tmp_path / "plugin.mjs", "export default {};\n")
    with pytest.raises(PackagingError) as find_caught:
        find_esbuild()
    with pytest.raises(PackagingError) as build_caught:
        build_bundle(entry)
    for caught in (find_caught, build_caught):
        assert (caught.value.code, caught.value.message) == (
            "esbuild_missing",
            ESBUILD_MISSING_MESSAGE,
        )


def test_esbuild_is_found_in_the_current_directory_node_modules(
    nowhere: Path, real_esbuild: Path, run_node: RunNode, tmp_path: Path
) -> None:
    link = link_esbuild(nowhere / "cwd" / "node_modules" / ".bin", real_esbuild)
    assert find_esbuild() == link
    outfile = tmp_path / "basic.mjs"
    build_bundle(EXAMPLES / "basic" / "plugin.mjs", outfile)
    assert run_bundle(run_node, outfile, {"value": 2})["result"] == {"value": 4}


def test_esbuild_is_found_under_sys_prefix(nowhere: Path, real_esbuild: Path) -> None:
    link = link_esbuild(nowhere / "prefix" / "node_modules" / ".bin", real_esbuild)
    assert find_esbuild() == link


def test_esbuild_on_path_comes_first(nowhere: Path, real_esbuild: Path) -> None:
    on_path = link_esbuild(nowhere / "path", real_esbuild)
    link_esbuild(nowhere / "cwd" / "node_modules" / ".bin", real_esbuild)
    link_esbuild(nowhere / "prefix" / "node_modules" / ".bin", real_esbuild)
    assert find_esbuild() == on_path


def test_a_non_executable_file_is_not_esbuild(nowhere: Path) -> None:
    fake = write(nowhere / "cwd" / "node_modules" / ".bin" / "esbuild", "not a program\n")
    fake.chmod(0o644)
    with pytest.raises(PackagingError) as caught:
        find_esbuild()
    assert caught.value.code == "esbuild_missing"


# ---------------------------------------------------------------------------------------------
# the public surface


def test_public_names_are_sorted_and_exported() -> None:
    assert sdk.__all__ == sorted(sdk.__all__)
    assert sdk.__all__ == [
        "CONTRACT_MODULE",
        "DEFAULT_ALIASES",
        "PackagingError",
        "PackagingErrorCode",
        "SDK_MODULE",
        "build_bundle",
        "find_esbuild",
        "sdk_js_path",
    ]
    for name in sdk.__all__:
        assert getattr(sdk, name) is not None


def test_packaging_error_keeps_code_and_message_through_pickling() -> None:
    error = PackagingError("build_failed", "plugin.mjs:1:1: Unexpected end of file")
    copy = pickle.loads(pickle.dumps(error))
    assert (copy.code, copy.message, str(copy)) == (
        "build_failed",
        "plugin.mjs:1:1: Unexpected end of file",
        "plugin.mjs:1:1: Unexpected end of file",
    )
    assert repr(copy) == "PackagingError('build_failed', 'plugin.mjs:1:1: Unexpected end of file')"


# ---------------------------------------------------------------------------------------------
# type declarations

# The contract's opening example, kept unchanged in examples/shout-ts.
CONTRACT_SHOUT_TS = (EXAMPLES / "shout-ts" / "plugin.ts").read_text(encoding="utf-8")

# Each line must be a type error; an unused `@ts-expect-error` fails the check, so this proves
# the declarations are precise rather than `any`.
TYPE_ERRORS_TS = """import {
  definePlugin,
  isWebFetchError,
  MAX_FILE_READ_BYTES,
} from '@worker-host/sdk';

const limit: 51200 = MAX_FILE_READ_BYTES;
declare const caught: unknown;
if (isWebFetchError(caught)) {
  // @ts-expect-error not a WebFetchErrorCode
  const code: 'not_found' = caught.code;
  void code;
}
export default definePlugin({
  id: 'example.types',
  setup: (context) => {
    // @ts-expect-error hook names are a closed set
    context.hooks.register('tool.execute.around', async () => undefined);
    // @ts-expect-error approval is allow or deny
    context.hooks.register('tool.execute.before', async () => ({ approval: 'maybe' }));
    context.tools.register({
      id: 'bad',
      description: 'Returns undefined',
      inputSchema: { type: 'object' },
      // @ts-expect-error execute must return JSON
      execute: async () => undefined,
    });
    void limit;
  },
});
"""


def find_tsc() -> Path | None:
    found = shutil.which("tsc")
    if found is not None:
        return Path(found)
    for base in (Path.cwd(), Path(sys.prefix), REPO):
        candidate = base / "node_modules" / ".bin" / "tsc"
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    return None


def test_contract_shout_example_type_checks_against_the_declarations(tmp_path: Path) -> None:
    tsc = find_tsc()
    assert tsc is not None, "TypeScript (tsc) is missing: bash .ci/setup.sh installs it"
    write(tmp_path / "src" / "shout.ts", CONTRACT_SHOUT_TS)
    write(tmp_path / "src" / "errors.ts", TYPE_ERRORS_TS)
    declarations = str(sdk_js_path().parent / "index.d.ts")
    tsconfig = {
        "compilerOptions": {
            "strict": True,
            "exactOptionalPropertyTypes": True,
            "noEmit": True,
            "skipLibCheck": False,
            "target": "es2022",
            "lib": ["es2022"],
            "types": [],
            "module": "esnext",
            "moduleResolution": "bundler",
            "paths": {SDK_MODULE: [declarations], CONTRACT_MODULE: [declarations]},
        },
        "include": ["src"],
    }
    write(tmp_path / "tsconfig.json", json.dumps(tsconfig))
    completed = subprocess.run(
        [str(tsc), "-p", str(tmp_path / "tsconfig.json")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr


def test_an_entry_named_like_an_option_is_still_a_file(tmp_path: Path) -> None:
    entry = tmp_path / "--outdir=elsewhere.mjs"
    entry.write_text("export default { id: 'example.odd', setup() {} };\n")
    bundle = build_bundle(entry)
    assert b"example.odd" in bundle
    assert not (tmp_path / "elsewhere").exists()
