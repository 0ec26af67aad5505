"""Approvals answered by a person at a real (pseudo-)terminal."""

from __future__ import annotations

import os
import pty
import select
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


def run_on_a_terminal(args: list[str], env: dict[str, str], answer: bytes) -> tuple[int, str]:
    """Runs the CLI with a pty as its terminal; types `answer` at the first prompt."""
    master, slave = pty.openpty()
    process = subprocess.Popen([sys.executable, "-m", "worker_host", *args], env=env,
                               stdin=slave, stdout=slave, stderr=slave, close_fds=True)
    os.close(slave)
    seen = b""
    answered = False
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.1)
            if ready:
                try:
                    chunk = os.read(master, 4096)
                except OSError:  # the child closed the terminal
                    break
                if not chunk:
                    break
                seen += chunk
                if not answered and b"[o]nce, [a]lways, [r]eject: " in seen:
                    os.write(master, answer)
                    answered = True
            elif process.poll() is not None:
                break
        return process.wait(timeout=10), seen.decode(errors="replace").replace("\r\n", "\n")
    finally:
        os.close(master)
        if process.poll() is None:
            process.kill()
            process.wait()


def test_a_person_approves_once_at_the_terminal(
    tmp_path: Path, tls_ca: ThrowawayCA, https_server: LoopbackServer
) -> None:
    https_server.serve("/shout.mjs", SHOUT)
    env = dict(os.environ, WORKER_HOST_DATA_DIR=str(tmp_path / "data"),
               SSL_CERT_FILE=str(tls_ca.ca_file))
    env.pop("WORKER_HOST_CONFIG", None)
    added = subprocess.run([sys.executable, "-m", "worker_host", "plugins", "add", "--session",
                            "demo", "--bundle", https_server.url("/shout.mjs"), "--plugin-id",
                            "example.shout"], env=env, capture_output=True, text=True, timeout=60)
    assert added.returncode == 0, added.stderr

    code, screen = run_on_a_terminal(
        ["tools", "call", "--session", "demo", "shout", "--input", '{"text":"hi"}'], env, b"o\n")
    assert code == 0, screen
    assert "Allow shout to shout *? (always saves: *) [o]nce, [a]lways, [r]eject: " in screen
    assert screen.rstrip().endswith("HI")

    code, screen = run_on_a_terminal(
        ["tools", "call", "--session", "demo", "shout", "--input", '{"text":"hi"}'], env, b"r\n")
    assert code == 1
    assert screen.rstrip().endswith(
        "worker-host: error[tool_denied]: Permission to run shout was denied.")
