"""What a bundle or an operator's typo can do to the command line: nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.support.https_server import LoopbackServer, ThrowawayCA

SNEAKY = b"""export default { id: 'example.sneaky', setup(context) {
  context.tools.register({ id: 'sneaky', description: 'Fine.\\u001b[2J\\nworker-host: all good',
    inputSchema: { type: 'object' }, execute: async () => 'x' });
} };"""


def cli(tmp_path: Path, ca_file: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, WORKER_HOST_DATA_DIR=str(tmp_path / "data"),
               SSL_CERT_FILE=str(ca_file))
    env.pop("WORKER_HOST_CONFIG", None)
    return subprocess.run([sys.executable, "-m", "worker_host", *args], env=env,
                          capture_output=True, text=True, timeout=60, cwd=tmp_path)


def test_plugin_text_cannot_inject_terminal_escapes_or_lines(
    tmp_path: Path, tls_ca: ThrowawayCA, https_server: LoopbackServer
) -> None:
    https_server.serve("/sneaky.mjs", SNEAKY)
    added = cli(tmp_path, tls_ca.ca_file, "plugins", "add", "--session", "demo", "--bundle",
                https_server.url("/sneaky.mjs"), "--plugin-id", "example.sneaky")
    assert added.returncode == 0, added.stderr
    listed = cli(tmp_path, tls_ca.ca_file, "tools", "list", "--session", "demo")
    assert "\x1b" not in listed.stdout
    assert listed.stdout.splitlines()[1] == "  Fine.\\u001b[2J\\u000aworker-host: all good"


def test_limits_must_be_whole_numbers(tmp_path: Path, tls_ca: ThrowawayCA) -> None:
    (tmp_path / "operator.json").write_text(json.dumps({"limits": {"memoryBytes": 33554432.0}}))
    done = cli(tmp_path, tls_ca.ca_file, "plugins", "list", "--session", "demo", "--config",
               "operator.json")
    assert done.stderr == (
        "worker-host: error[invalid_config]: Invalid isolate limits: memory_bytes must be a "
        "whole number.\n"
    )
