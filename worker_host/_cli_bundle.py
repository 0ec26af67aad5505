"""`worker-host bundle ...`: build, verify, sign bundles and make signing keys.

`build` runs the real esbuild (through `sdk.build_bundle`), then proves in
fresh isolates that the result activates and that setup is deterministic
before it writes anything. Progress is shown step by step on a terminal and
not at all in pipes; results go to stdout, failures are one line on stderr.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from rich.console import Console

from bundle_loader import BundleLoaderError, generate_key_pair, sign_digest
from capabilities import ShellPolicy
from sdk import DEFAULT_ALIASES, PackagingError, build_bundle

from ._activation import PluginRunner
from ._call_scope import CallScope, CapabilityPolicy
from ._errors import WorkerHostError
from ._host import HostConfig, fetch
from ._runtime import guest_record, shared_runtime
from ._verify import DEFAULT_RUNS, VerifyReport, verify_bundle

MANIFEST_FORMAT = "worker-host-bundle-manifest/1"
_URL = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*://")

JsonArgument = Callable[[str, str], Any]


def add_bundle_commands(
    groups: argparse._SubParsersAction[Any], common: argparse.ArgumentParser,
    parser_class: type[argparse.ArgumentParser],
) -> None:
    """Adds the `bundle` command group to the CLI's parser."""
    bundle = groups.add_parser("bundle", help="build, verify and sign bundles")
    commands = bundle.add_subparsers(dest="command", required=True, parser_class=parser_class)
    build = commands.add_parser("build", parents=[common],
                                help="bundle a JS/TS entry with esbuild and verify it")
    build.add_argument("entry", metavar="ENTRY")
    build.add_argument("-o", "--out-dir", type=Path, default=Path("dist"), metavar="DIR",
                       help="where to write the bundle and its manifest (default: ./dist)")
    build.add_argument("--options", action="append", default=[], metavar="JSON",
                       help="an options object to verify setup with (repeatable)")
    build.add_argument("--alias", action="append", default=[], metavar="NAME=PATH",
                       help="map an import specifier to a file or package (repeatable)")
    build.add_argument("--runs", type=int, default=DEFAULT_RUNS,
                       help=f"setup runs per options set (default {DEFAULT_RUNS})")
    verify = commands.add_parser("verify", parents=[common],
                                 help="rerun setup and report whether it is deterministic")
    verify.add_argument("bundle", metavar="BUNDLE_OR_URL")
    verify.add_argument("--options", action="append", default=[], metavar="JSON")
    verify.add_argument("--runs", type=int, default=DEFAULT_RUNS)
    verify.add_argument("--sha256", metavar="HEX",
                        help="refuse the bundle unless it has this digest")
    verify.add_argument("--json", action="store_true", help="print the report as JSON")
    keygen = commands.add_parser("keygen", parents=[common],
                                 help="make an Ed25519 key pair for signing bundles")
    keygen.add_argument("-o", "--out-dir", type=Path, default=Path("."), metavar="DIR")
    keygen.add_argument("--name", default="worker-host-signing",
                        help="file name stem: NAME.key (private) and NAME.pub")
    sign = commands.add_parser("sign", parents=[common],
                               help="write a detached signature over a bundle's digest")
    sign.add_argument("bundle", metavar="BUNDLE")
    sign.add_argument("--key", type=Path, required=True, metavar="KEY",
                      help="the private key file from bundle keygen")
    sign.add_argument("-o", "--output", type=Path, metavar="SIG",
                      help="where to write the signature (default: BUNDLE.sig)")


def _aliases(pairs: list[str]) -> dict[str, str]:
    aliases = dict(DEFAULT_ALIASES)
    for pair in pairs:
        name, separator, target = pair.partition("=")
        if not separator or not name or not target:
            raise WorkerHostError("invalid_alias", f"--alias takes NAME=PATH, not {pair!r}.")
        aliases[name] = target
    return aliases


class _Progress:
    """Step-by-step status on a terminal; silent when stderr is not one."""

    def __init__(self) -> None:
        self._console = Console(stderr=True)

    @contextmanager
    def step(self, text: str) -> Iterator[None]:
        if not self._console.is_terminal:
            yield
            return
        with self._console.status(text):
            yield
        self._console.print(f"[green]✓[/green] {text}")


def _runner(config: HostConfig) -> PluginRunner:
    return PluginRunner(shared_runtime(config.data_dir / "cache"), config.isolate_limits)


def _scope(workspace: Path) -> CallScope:
    """Capabilities for verification: an empty workspace, no shell."""
    return CallScope.for_workspace(workspace, CapabilityPolicy(shell=ShellPolicy(enabled=False)))


async def _verify(
    config: HostConfig, bundle: bytes, options_sets: list[dict[str, Any]], runs: int
) -> VerifyReport:
    digest = hashlib.sha256(bundle).hexdigest()
    with tempfile.TemporaryDirectory(prefix="worker-host-verify-") as workspace:
        return await verify_bundle(
            _runner(config), bundle, digest, options_sets=options_sets or [{}], runs=runs,
            operations=_scope(Path(workspace)),
        )


def _options_sets(texts: list[str], json_argument: JsonArgument) -> list[dict[str, Any]]:
    sets = []
    for text in texts:
        value = json_argument(text, "--options")
        if not isinstance(value, dict):
            raise WorkerHostError("invalid_options", "Plugin options must be a JSON object.")
        sets.append(value)
    return sets


def _manifest_document(report: VerifyReport) -> dict[str, Any]:
    manifest = report.manifest
    record = guest_record()
    return {
        "format": MANIFEST_FORMAT,
        "pluginId": manifest.plugin_id,
        "kind": "js",
        "sha256": report.sha256,
        "size": report.size,
        "shape": manifest.shape,
        "registers": {
            "tools": [tool.id for tool in manifest.tools],
            "hooks": list(manifest.hooks),
            "skills": [skill.id for skill in manifest.skills],
            "agents": [agent.id for agent in manifest.agents],
            "defaultAgent": manifest.default_agent,
        },
        "fingerprints": [
            {"options": result.options, "fingerprint": result.manifest.fingerprint}
            for result in report.results
        ],
        "verifiedWith": {
            "engine": "quickjs-ng",
            "version": record["quickjs_ng"],
            "guestSha256": record["wasm_sha256"],
        },
    }


def _report_lines(report: VerifyReport, runs: int) -> list[str]:
    manifest = report.manifest
    listed = manifest.tools and ", ".join(tool.id for tool in manifest.tools)
    lines = [
        f"sha256   {report.sha256}  ({report.size} bytes)",
        f"plugin   {manifest.plugin_id}  ({manifest.shape})",
        f"tools    {listed or '-'}",
        f"hooks    {', '.join(manifest.hooks) or '-'}",
        f"skills   {', '.join(skill.id for skill in manifest.skills) or '-'}",
        f"agents   {', '.join(agent.id for agent in manifest.agents) or '-'}",
    ]
    for result in report.results:
        options = json.dumps(result.options, sort_keys=True)
        if result.deterministic:
            lines.append(f"options  {options}: deterministic over {runs} runs, "
                         f"fingerprint {result.manifest.fingerprint}")
        else:
            lines.append(f"options  {options}: NOT deterministic: {result.difference}")
    return lines


def _read(path: Path, code: str) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise WorkerHostError(code, f"Cannot read {path}.") from exc


def _keygen(out_dir: Path, name: str) -> int:
    private, public = out_dir / f"{name}.key", out_dir / f"{name}.pub"
    for path in (private, public):
        if path.exists():
            raise WorkerHostError("key_exists", f"{path} exists; choose another --name.")
    pair = generate_key_pair()
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        descriptor = os.open(private, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(pair.private_pem)
        public.write_bytes(pair.public_pem)
    except OSError as exc:
        raise WorkerHostError("write_failed", f"Could not write to {out_dir}.") from exc
    print(f"private key {private}  (keep it secret)")
    print(f"public key  {public}")
    print(f"key id      {pair.key_id}")
    return 0


def _sign(bundle_path: Path, key_path: Path, output: Path | None) -> int:
    bundle = _read(bundle_path, "bundle_unreadable")
    digest = hashlib.sha256(bundle).hexdigest()
    try:
        signature = sign_digest(_read(key_path, "key_unreadable"), digest)
    except BundleLoaderError as exc:
        raise WorkerHostError(exc.code, exc.message) from exc
    target = output or bundle_path.with_name(bundle_path.name + ".sig")
    try:
        target.write_bytes(signature)
    except OSError as exc:
        raise WorkerHostError("write_failed", f"Could not write {target}.") from exc
    print(f"signed   {bundle_path}  sha256 {digest}")
    print(f"by       {json.loads(signature)['keyId']}")
    print(f"wrote    {target}  (publish it beside the bundle, at the bundle's URL + .sig)")
    return 0


async def run_bundle_command(
    args: argparse.Namespace, config: HostConfig, json_argument: JsonArgument
) -> int:
    """Runs a `bundle` command; returns the exit code."""
    if args.command == "keygen":
        return _keygen(args.out_dir, args.name)
    if args.command == "sign":
        return _sign(Path(args.bundle), args.key, args.output)
    progress = _Progress()
    options_sets = _options_sets(args.options, json_argument)
    if args.command == "build":
        with progress.step("Bundling with esbuild"):
            try:
                bundle = build_bundle(args.entry, aliases=_aliases(args.alias))
            except PackagingError as exc:
                raise WorkerHostError(exc.code, exc.message) from exc
        with progress.step(f"Verifying setup in fresh isolates ({args.runs} runs per options set)"):
            report = await _verify(config, bundle, options_sets, args.runs)
        if not report.deterministic:
            print("\n".join(_report_lines(report, args.runs)))
            raise WorkerHostError(
                "setup_nondeterministic",
                "Setup registered different contributions in different runs; "
                "nothing was written.",
            )
        plugin_id = report.manifest.plugin_id
        out = args.out_dir
        bundle_path = out / f"{plugin_id}.mjs"
        manifest_path = out / f"{plugin_id}.manifest.json"
        try:
            out.mkdir(parents=True, exist_ok=True)
            bundle_path.write_bytes(bundle)
            manifest_path.write_text(json.dumps(_manifest_document(report), indent=2) + "\n")
        except OSError as exc:
            raise WorkerHostError("write_failed", f"Could not write to {out}.") from exc
        print(f"built    {bundle_path}  ({report.size} bytes)")
        print(f"manifest {manifest_path}")
        print(f"sha256   {report.sha256}")
        print("Publish the bundle at an https URL, then add it with:")
        print(f"  worker-host plugins add --session SESSION --bundle https://HOST/PATH/"
              f"{bundle_path.name} --plugin-id {plugin_id} --sha256 {report.sha256}")
        return 0
    source = args.bundle
    if _URL.match(source):
        bundle, _ = await fetch(config, source, args.sha256)
    else:
        bundle = _read(Path(source), "bundle_unreadable")
        if args.sha256 and hashlib.sha256(bundle).hexdigest() != args.sha256.lower():
            raise WorkerHostError("integrity_mismatch", "The bundle's SHA-256 is not --sha256.")
    report = await _verify(config, bundle, options_sets, args.runs)
    if args.json:
        document = _manifest_document(report)
        document["deterministic"] = report.deterministic
        document["differences"] = [
            {"options": r.options, "difference": r.difference}
            for r in report.results if r.difference
        ]
        print(json.dumps(document, indent=2))
    else:
        print("\n".join(_report_lines(report, args.runs)))
    return 0 if report.deterministic else 1
