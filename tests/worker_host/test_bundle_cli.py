"""`worker-host bundle build|verify` as separate processes with the real esbuild."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.support.https_server import LoopbackServer, ThrowawayCA

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"


def cli(*args: str, cwd: Path, data_dir: Path,
        ca_file: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, WORKER_HOST_DATA_DIR=str(data_dir))
    if ca_file is not None:
        env["SSL_CERT_FILE"] = str(ca_file)
    env["PATH"] = f"{REPO / '.venv' / 'node_modules' / '.bin'}{os.pathsep}{env['PATH']}"
    return subprocess.run([sys.executable, "-m", "worker_host", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)


def test_build_prints_an_add_command_that_activates_the_served_bundle(
    tmp_path: Path, tls_ca: ThrowawayCA, https_server: LoopbackServer
) -> None:
    built = cli("bundle", "build", str(EXAMPLES / "notes" / "plugin.mjs"),
                cwd=tmp_path, data_dir=tmp_path / "data")
    assert built.returncode == 0, built.stderr
    assert built.stderr == ""  # quiet in pipes
    bundle = (tmp_path / "dist" / "example.notes.mjs").read_bytes()
    manifest = json.loads((tmp_path / "dist" / "example.notes.manifest.json").read_text())
    assert manifest["pluginId"] == "example.notes"
    assert manifest["kind"] == "js"
    assert manifest["size"] == len(bundle)
    assert manifest["registers"] == {"tools": ["notes_save"], "hooks": ["tool.execute.before"],
                                     "skills": ["note-style"], "agents": [],
                                     "defaultAgent": None}
    assert manifest["verifiedWith"]["engine"] == "quickjs-ng"
    assert f"sha256   {manifest['sha256']}\n" in built.stdout

    add_line = built.stdout.strip().splitlines()[-1].split()
    assert add_line[:2] == ["worker-host", "plugins"]
    https_server.serve("/example.notes.mjs", bundle)
    add_args = [https_server.url("/example.notes.mjs") if arg.startswith("https://HOST/")
                else "demo" if arg == "SESSION" else arg for arg in add_line[1:]]
    added = cli(*add_args, cwd=tmp_path, data_dir=tmp_path / "data", ca_file=tls_ca.ca_file)
    assert added.returncode == 0, added.stderr
    assert added.stdout.startswith(f"added example.notes  sha256:{manifest['sha256']}  mixed")


def test_a_nondeterministic_bundle_is_reported_and_never_written(tmp_path: Path) -> None:
    built = cli("bundle", "build", str(EXAMPLES / "dice" / "plugin.mjs"),
                cwd=tmp_path, data_dir=tmp_path / "data")
    assert built.returncode == 1
    assert "options  {}: NOT deterministic: tool roll: description: " in built.stdout
    assert built.stderr == (
        "worker-host: error[setup_nondeterministic]: Setup registered different contributions "
        "in different runs; nothing was written.\n"
    )
    assert not (tmp_path / "dist").exists()


def test_verify_reports_each_options_set(tmp_path: Path) -> None:
    cli("bundle", "build", str(EXAMPLES / "notes" / "plugin.mjs"), cwd=tmp_path,
        data_dir=tmp_path / "data")
    verified = cli("bundle", "verify", "dist/example.notes.mjs", "--runs", "2",
                   "--options", '{"folder": "journal"}', "--json",
                   cwd=tmp_path, data_dir=tmp_path / "data")
    assert verified.returncode == 0, verified.stderr
    report = json.loads(verified.stdout)
    assert report["deterministic"] is True
    assert [entry["options"] for entry in report["fingerprints"]] == [{"folder": "journal"}]

    bad = cli("bundle", "verify", "dist/missing.mjs", cwd=tmp_path, data_dir=tmp_path / "data")
    assert (bad.returncode, bad.stderr) == (
        1, "worker-host: error[bundle_unreadable]: Cannot read dist/missing.mjs.\n"
    )


def test_build_errors_are_one_line(tmp_path: Path) -> None:
    (tmp_path / "broken.mjs").write_text("export default {\n")
    broken = cli("bundle", "build", "broken.mjs", cwd=tmp_path, data_dir=tmp_path / "data")
    assert broken.returncode == 1
    assert broken.stderr.startswith("worker-host: error[build_failed]: broken.mjs:")
    assert broken.stderr.count("\n") == 1
    alias = cli("bundle", "build", "broken.mjs", "--alias", "nothing", cwd=tmp_path,
                data_dir=tmp_path / "data")
    assert alias.stderr == (
        "worker-host: error[invalid_alias]: --alias takes NAME=PATH, not 'nothing'.\n"
    )


def test_every_example_builds_with_the_cli(tmp_path: Path) -> None:
    built_ids = []
    for entry in sorted(EXAMPLES.glob("*/plugin.*")):
        if entry.parent.name == "dice":
            continue
        done = cli("bundle", "build", str(entry), "-o", str(tmp_path / entry.parent.name),
                   cwd=tmp_path, data_dir=tmp_path / "data")
        assert done.returncode == 0, (entry, done.stderr)
        (manifest,) = (tmp_path / entry.parent.name).glob("*.manifest.json")
        built_ids.append(json.loads(manifest.read_text())["pluginId"])
    assert built_ids == ["example.approval-hook", "example.basic", "example.notes",
                         "example.shout", "example.shout"]
