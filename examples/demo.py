"""The main job on embedded defaults: build, publish, add and call a plugin.

Builds `examples/shout` into a bundle with esbuild, serves it over HTTPS on
loopback with a throwaway CA, then runs the `worker-host` CLI as separate
processes: add the bundle to a session by URL, list the tools, allow `shout`
with a session rule, call it.
State goes to a fresh SQLite data directory. Run it from a checkout after
`.ci/setup.sh` (the README's first command does both).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from sdk import build_bundle  # noqa: E402
from tests.support.https_server import LoopbackServer, ThrowawayCA  # noqa: E402


def run(command: list[str], env: dict[str, str]) -> str:
    print("$ worker-host " + " ".join(command), flush=True)
    done = subprocess.run([sys.executable, "-m", "worker_host", *command], env=env,
                          capture_output=True, text=True)
    sys.stdout.write(done.stdout)
    sys.stderr.write(done.stderr)
    if done.returncode != 0:
        raise SystemExit(done.returncode)
    return done.stdout


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="worker-host-demo-") as temp:
        workdir = Path(temp)
        bundle = build_bundle(REPO / "examples" / "shout" / "plugin.mjs")
        ca = ThrowawayCA(workdir)
        with LoopbackServer(tls=ca.server_context()) as server:
            server.serve("/shout.mjs", bundle)
            env = dict(
                os.environ,
                SSL_CERT_FILE=str(ca.ca_file),
                WORKER_HOST_DATA_DIR=str(workdir / "data"),
            )
            url = server.url("/shout.mjs")
            run(["plugins", "add", "--session", "demo", "--bundle", url,
                 "--plugin-id", "example.shout"], env)
            run(["tools", "list", "--session", "demo"], env)
            # With no rule matching, a call asks, and a CLI with no one to ask
            # denies it: allow shout for this session.
            run(["rules", "add", "--session", "demo", "--action", "shout", "--resource", "*",
                 "--effect", "allow"], env)
            output = run(["tools", "call", "--session", "demo", "shout",
                          "--input", '{"text":"hi"}'], env)
    if output.strip() != "HI":
        raise SystemExit(f"demo: expected HI, got {output.strip()!r}")
    print("demo: ok")


if __name__ == "__main__":
    main()
