"""Signed bundles end to end: keygen, sign, trust policy, refusal, re-check."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.https_server import LoopbackServer, ThrowawayCA
from tests.support.operator import allow_all_config

SHOUT = b"""export default { id: 'example.shout', setup(context) {
  context.tools.register({ id: 'shout', description: 'Uppercase.',
    inputSchema: { type: 'object', properties: { text: { type: 'string' } } },
    execute: async (input) => input.text.toUpperCase() });
} };
"""


class Cli:
    def __init__(self, tmp_path: Path, ca_file: Path) -> None:
        self.cwd = tmp_path
        self.env = dict(os.environ, WORKER_HOST_DATA_DIR=str(tmp_path / "data"),
                        SSL_CERT_FILE=str(ca_file))
        self.env["WORKER_HOST_CONFIG"] = str(allow_all_config(tmp_path))

    def __call__(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "worker_host", *args], cwd=self.cwd,
                              env=self.env, capture_output=True, text=True, timeout=60)


@pytest.fixture
def cli(tmp_path: Path, tls_ca: ThrowawayCA) -> Cli:
    return Cli(tmp_path, tls_ca.ca_file)


def keygen(cli: Cli, name: str) -> str:
    done = cli("bundle", "keygen", "--name", name)
    assert done.returncode == 0, done.stderr
    assert (cli.cwd / f"{name}.key").stat().st_mode & 0o777 == 0o600
    return done.stdout.splitlines()[-1].split()[-1]


def publish(cli: Cli, server: LoopbackServer, key: str, bundle: bytes = SHOUT) -> str:
    (cli.cwd / "shout.mjs").write_bytes(bundle)
    signed = cli("bundle", "sign", "shout.mjs", "--key", f"{key}.key")
    assert signed.returncode == 0, signed.stderr
    server.serve("/shout.mjs", bundle)
    server.serve("/shout.mjs.sig", (cli.cwd / "shout.mjs.sig").read_bytes(),
                 content_type="application/json")
    return server.url("/shout.mjs")


def add(cli: Cli, url: str, *extra: str) -> subprocess.CompletedProcess[str]:
    return cli("plugins", "add", "--session", "demo", "--bundle", url,
               "--plugin-id", "example.shout", *extra)


def test_a_trusted_signature_is_checked_and_recorded(
    cli: Cli, https_server: LoopbackServer
) -> None:
    key_id = keygen(cli, "release")
    url = publish(cli, https_server, "release")
    added = add(cli, url, "--trust-key", "release.pub")
    assert added.returncode == 0, added.stderr
    assert added.stdout.splitlines() == [
        added.stdout.splitlines()[0], "  + tool shout  [example.shout]"
    ]
    assert added.stdout.splitlines()[0].endswith(f"signed by {key_id}")
    assert "/shout.mjs.sig" in https_server.requests

    called = cli("tools", "call", "--session", "demo", "shout", "--input", '{"text":"hi"}',
                 "--trust-key", "release.pub")
    assert (called.returncode, called.stdout) == (0, "HI\n")


def test_untrusted_unsigned_and_tampered_bundles_activate_nothing(
    cli: Cli, https_server: LoopbackServer
) -> None:
    keygen(cli, "release")
    other_id = keygen(cli, "stranger")
    url = publish(cli, https_server, "stranger")

    untrusted = add(cli, url, "--trust-key", "release.pub")
    assert untrusted.returncode == 1
    assert untrusted.stderr.startswith("worker-host: error[untrusted_key]: ")
    assert other_id in untrusted.stderr

    publish(cli, https_server, "release")
    https_server.serve("/shout.mjs", SHOUT.replace(b"toUpperCase", b"toLowerCase"))
    tampered = add(cli, url, "--trust-key", "release.pub")
    assert tampered.returncode == 1
    assert tampered.stderr.startswith("worker-host: error[signature_invalid]: ")

    https_server.serve("/shout.mjs", SHOUT)
    https_server.remove("/shout.mjs.sig")
    unsigned = add(cli, url, "--trust-key", "release.pub")
    assert unsigned.returncode == 1
    assert unsigned.stderr.startswith("worker-host: error[signature_missing]: ")

    listed = cli("plugins", "list", "--session", "demo")
    assert (listed.returncode, listed.stdout) == (0, "")


def test_a_given_signature_file_and_a_config_file(
    cli: Cli, https_server: LoopbackServer
) -> None:
    keygen(cli, "release")
    publish(cli, https_server, "release")
    https_server.remove("/shout.mjs.sig")
    (cli.cwd / "operator.json").write_text(json.dumps({"trustedKeys": ["release.pub"]}))
    added = add(cli, https_server.url("/shout.mjs"), "--config", "operator.json",
                "--signature", "shout.mjs.sig")
    assert added.returncode == 0, added.stderr
    assert "/shout.mjs.sig" not in https_server.requests

    without_trust = cli("plugins", "add", "--session", "other", "--bundle",
                        https_server.url("/shout.mjs"), "--plugin-id", "example.shout",
                        "--signature", "shout.mjs.sig")
    assert without_trust.stderr == (
        "worker-host: error[no_trust_policy]: A signature was given but this host trusts no "
        "signing keys.\n"
    )


def test_a_pin_made_without_trust_is_refused_once_trust_is_required(
    cli: Cli, https_server: LoopbackServer
) -> None:
    keygen(cli, "release")
    url = publish(cli, https_server, "release")
    assert add(cli, url).returncode == 0
    refused = cli("tools", "call", "--session", "demo", "shout", "--input", '{"text":"hi"}',
                  "--trust-key", "release.pub")
    assert refused.stderr == (
        "worker-host: error[signature_missing]: Plugin example.shout was pinned without a "
        "signature, and this host requires one; refresh it.\n"
    )
    refreshed = cli("plugins", "refresh", "--session", "demo", "example.shout",
                    "--trust-key", "release.pub")
    assert refreshed.returncode == 0, refreshed.stderr
    called = cli("tools", "call", "--session", "demo", "shout", "--input", '{"text":"hi"}',
                 "--trust-key", "release.pub")
    assert called.stdout == "HI\n"


def test_bad_config_files_are_one_line_errors(cli: Cli) -> None:
    (cli.cwd / "typo.json").write_text(json.dumps({"network": {"alowLoopback": True}}))
    done = cli("plugins", "list", "--session", "demo", "--config", "typo.json")
    assert done.stderr == (
        "worker-host: error[invalid_config]: Invalid config: unknown setting "
        "network.alowLoopback.\n"
    )
    (cli.cwd / "limits.json").write_text(json.dumps({"limits": {"cpuTimeMs": 0}}))
    done = cli("plugins", "list", "--session", "demo", "--config", "limits.json")
    assert done.stderr == (
        "worker-host: error[invalid_config]: Invalid isolate limits: cpu_time_ms must be at "
        "least 1.\n"
    )
