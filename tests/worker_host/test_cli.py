"""The `worker-host` CLI as separate processes against a real HTTPS server."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.https_server import LoopbackServer, ThrowawayCA
from tests.support.operator import allow_all_config

SHOUT = b"""export default {
  id: 'example.shout',
  setup(context) {
    context.tools.register({
      id: 'shout',
      description: 'Uppercase a short string.',
      inputSchema: { type: 'object', properties: { text: { type: 'string' } },
                     required: ['text'], additionalProperties: false },
      execute: async (input) => {
        if (input.text === 'fail') throw new Error('secret detail');
        return input.text === 'json' ? { upper: 'JSON', n: 1 } : input.text.toUpperCase();
      },
    });
  },
};
"""


class Cli:
    def __init__(self, data_dir: Path, ca_file: Path) -> None:
        self.env = {
            key: value for key, value in os.environ.items() if key != "WORKER_HOST_DATA_DIR"
        }
        self.env.update(SSL_CERT_FILE=str(ca_file), WORKER_HOST_DATA_DIR=str(data_dir),
                        WORKER_HOST_CONFIG=str(allow_all_config(data_dir.parent)))

    def __call__(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "worker_host", *args],
            env=self.env, capture_output=True, text=True, timeout=60,
        )


@pytest.fixture
def cli(tmp_path: Path, tls_ca: ThrowawayCA) -> Cli:
    return Cli(tmp_path / "data", tls_ca.ca_file)


def assert_one_line_error(done: subprocess.CompletedProcess[str], code: str, message: str) -> None:
    assert done.returncode != 0
    assert done.stdout == ""
    assert done.stderr == f"worker-host: error[{code}]: {message}\n"


def test_add_list_call_as_separate_processes(cli: Cli, https_server: LoopbackServer) -> None:
    https_server.serve("/shout.mjs", SHOUT)
    url = https_server.url("/shout.mjs")

    added = cli("plugins", "add", "--session", "demo", "--bundle", url,
                "--plugin-id", "example.shout")
    assert added.returncode == 0, added.stderr
    assert added.stdout.startswith("added example.shout  sha256:")

    listed = cli("tools", "list", "--session", "demo", "--json")
    assert listed.returncode == 0, listed.stderr
    assert '"name": "shout"' in listed.stdout
    assert '"pluginId": "example.shout"' in listed.stdout

    called = cli("tools", "call", "--session", "demo", "shout", "--input", '{"text":"hi"}')
    assert (called.returncode, called.stdout, called.stderr) == (0, "HI\n", "")

    as_json = cli("tools", "call", "--session", "demo", "shout", "--input", '{"text":"json"}')
    assert as_json.stdout == '{"upper": "JSON", "n": 1}\n'

    pins = cli("plugins", "list", "--session", "demo")
    assert pins.stdout.startswith("example.shout  sha256:")
    assert pins.stdout.rstrip().endswith(url)


def test_failures_are_one_line_with_a_code(cli: Cli, https_server: LoopbackServer) -> None:
    https_server.serve("/shout.mjs", SHOUT)
    url = https_server.url("/shout.mjs")
    cli("plugins", "add", "--session", "demo", "--bundle", url, "--plugin-id", "example.shout")

    assert_one_line_error(
        cli("tools", "call", "--session", "demo", "shout", "--input", '{"text":"fail"}'),
        "runtime_failed", "Tool execution failed.",
    )
    assert_one_line_error(
        cli("tools", "call", "--session", "demo", "shout", "--input", '{"text": 1}'),
        "invalid_input", "Tool input validation failed.",
    )
    assert_one_line_error(
        cli("tools", "call", "--session", "demo", "shout", "--input", '{"text":'),
        "invalid_json", "--input is not valid JSON (Expecting value at position 8).",
    )
    assert_one_line_error(
        cli("tools", "call", "--session", "demo", "nope"),
        "unknown_tool", "Session demo has no tool named 'nope'.",
    )
    assert_one_line_error(
        cli("tools", "list", "--session", "ghost"),
        "session_not_found", "No session named 'ghost'.",
    )
    bad_url = cli("plugins", "add", "--session", "demo", "--bundle", "http://example.com/x.mjs",
                  "--plugin-id", "example.x")
    assert bad_url.returncode == 1
    assert bad_url.stderr.startswith("worker-host: error[invalid_url]: ")
    assert bad_url.stderr.count("\n") == 1
    assert_one_line_error(
        cli("plugins", "add", "--session", "demo", "--bundle", url, "--plugin-id", "example.x",
            "--options", "[1]"),
        "invalid_options", "Plugin options must be a JSON object.",
    )
    usage = cli("tools", "call", "--session", "demo")
    assert usage.returncode == 2
    assert usage.stderr.startswith("worker-host: error[usage]: ")
    assert "Traceback" not in usage.stderr


def test_refresh_only_repins_a_new_digest(cli: Cli, https_server: LoopbackServer) -> None:
    https_server.serve("/shout.mjs", SHOUT)
    url = https_server.url("/shout.mjs")
    cli("plugins", "add", "--session", "demo", "--bundle", url, "--plugin-id", "example.shout")

    unchanged = cli("plugins", "refresh", "--session", "demo", "example.shout")
    assert unchanged.returncode == 0
    assert unchanged.stdout.startswith("unchanged example.shout: sha256:")

    https_server.serve("/shout.mjs", SHOUT.replace(b"toUpperCase", b"toLowerCase"))
    still = cli("tools", "call", "--session", "demo", "shout", "--input", '{"text":"Hi"}')
    assert still.stdout == "HI\n"
    refreshed = cli("plugins", "refresh", "--session", "demo", "example.shout")
    assert refreshed.stdout.startswith("refreshed example.shout: sha256:")
    after = cli("tools", "call", "--session", "demo", "shout", "--input", '{"text":"Hi"}')
    assert after.stdout == "hi\n"
