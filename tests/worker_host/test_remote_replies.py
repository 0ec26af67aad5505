"""Approvals answered from another process: the contract's `remote` source."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from tests.support.https_server import LoopbackServer, ThrowawayCA

SHOUT = b"""export default { id: 'example.shout', setup(context) {
  context.tools.register({ id: 'shout', description: 'Uppercase.',
    inputSchema: { type: 'object', properties: { text: { type: 'string' } } },
    execute: async (input) => input.text.toUpperCase() });
} };"""


def test_a_waiting_call_is_answered_by_another_process(
    tmp_path: Path, tls_ca: ThrowawayCA, https_server: LoopbackServer
) -> None:
    https_server.serve("/shout.mjs", SHOUT)
    env = dict(os.environ, WORKER_HOST_DATA_DIR=str(tmp_path / "data"),
               SSL_CERT_FILE=str(tls_ca.ca_file))
    env.pop("WORKER_HOST_CONFIG", None)

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "worker_host", *args], env=env,
                              capture_output=True, text=True, timeout=60)

    assert cli("plugins", "add", "--session", "demo", "--bundle",
               https_server.url("/shout.mjs"), "--plugin-id", "example.shout").returncode == 0
    turn = cli("turns", "begin", "--session", "demo").stdout.strip()
    waiting = subprocess.Popen(
        [sys.executable, "-m", "worker_host", "tools", "call", "--session", "demo", "shout",
         "--input", '{"text":"hi"}', "--turn", turn, "--wait-remote"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        pending: list[dict[str, object]] = []
        deadline = time.monotonic() + 30
        while not pending and time.monotonic() < deadline:
            pending = json.loads(cli("turns", "pending", "--session", "demo", "--json").stdout)
            time.sleep(0.1)
        assert [(r["toolId"], r["action"], r["resources"]) for r in pending] == [
            ("shout", "shout", ["*"])]
        replied = cli("turns", "reply", "--session", "demo", str(pending[0]["id"]), "once")
        assert replied.returncode == 0, replied.stderr
        stdout, stderr = waiting.communicate(timeout=30)
    finally:
        if waiting.poll() is None:
            waiting.kill()
            waiting.communicate()
    assert (waiting.returncode, stdout, stderr) == (0, "HI\n", "")

    events = json.loads(cli("turns", "events", "--session", "demo", turn, "--json").stdout)
    resolved = [e for e in events if e["type"] == "approval.resolved"]
    assert [(e["decision"], e["source"], e["reply"]) for e in resolved] == [
        ("allow", "remote", "once")]
    assert json.loads(cli("turns", "pending", "--session", "demo", "--json").stdout) == []

    again = cli("turns", "reply", "--session", "demo", str(pending[0]["id"]), "once")
    assert again.stderr == (
        f"worker-host: error[request_not_pending]: Session demo has no pending request "
        f"'{pending[0]['id']}'.\n"
    )
