"""`worker-host rules|turns|catalog`, `plugins inspect` and `tools call --turn`
as separate processes against a real HTTPS server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from sdk import build_bundle
from tests.support.https_server import LoopbackServer, ThrowawayCA
from tests.support.operator import allow_all_config
from tests.worker_host.turn_bundles import (
    data_dir,
    guest_cache,
    hook,
    is_uuid,
    logging_hook,
    plugin,
    tool,
)

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
DEPLOY = plugin("p.deploy", tool(
    "deploy", "return 'deployed ' + input.env;",
    schema="{ type: 'object', properties: { env: { type: 'string' } }, required: ['env'] }",
    permissions="return [{ action: 'deploy', resources: [input.env], save: [input.env] }];",
))
QUESTION = {"question": "Ship it now?", "header": "Ship",
            "options": [{"label": "Yes", "description": ""}]}
ASK = plugin("p.ask", tool("ask", f"return await ctx.askQuestion([{json.dumps(QUESTION)}]);"))


class Cli:
    """Runs `python -m worker_host` with its own data directory and no config
    file unless one is passed with `--config`."""

    def __init__(self, data: Path, ca_file: Path) -> None:
        self.env = {key: value for key, value in os.environ.items()
                    if key not in ("WORKER_HOST_DATA_DIR", "WORKER_HOST_CONFIG")}
        self.env.update(SSL_CERT_FILE=str(ca_file), WORKER_HOST_DATA_DIR=str(data))

    def __call__(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "worker_host", *args], env=self.env,
                              capture_output=True, text=True, timeout=60,
                              stdin=subprocess.DEVNULL)

    def ok(self, *args: str) -> str:
        done = self(*args)
        assert (done.returncode, done.stderr) == (0, ""), done.stderr
        return done.stdout

    def json(self, *args: str) -> Any:
        return json.loads(self.ok(*args, "--json"))


@pytest.fixture
def cli(tmp_path: Path, tls_ca: ThrowawayCA, tmp_path_factory: pytest.TempPathFactory) -> Cli:
    return Cli(data_dir(tmp_path, guest_cache(tmp_path_factory)), tls_ca.ca_file)


def serve(server: LoopbackServer, name: str, source: bytes) -> str:
    server.serve(f"/{name}.mjs", source)
    return server.url(f"/{name}.mjs")


def add(cli: Cli, server: LoopbackServer, plugin_id: str, source: bytes, *extra: str) -> str:
    return cli.ok("plugins", "add", "--session", "demo", "--bundle",
                  serve(server, plugin_id, source), "--plugin-id", plugin_id, *extra)


def assert_one_line_error(done: subprocess.CompletedProcess[str], code: str, message: str,
                          exit_code: int = 1) -> None:
    assert (done.returncode, done.stdout, done.stderr) == (
        exit_code, "", f"worker-host: error[{code}]: {message}\n")


def test_rules_add_and_list(cli: Cli, https_server: LoopbackServer) -> None:
    add(cli, https_server, "p.deploy", DEPLOY)
    assert cli.ok("rules", "list", "--session", "demo") == ""
    assert cli.ok("rules", "add", "--session", "demo", "--action", "deploy", "--resource", "*",
                  "--effect", "allow") == "added rule deploy * allow\n"
    assert cli.ok("rules", "add", "--session", "demo", "--action", "deploy", "--resource",
                  "prod", "--effect", "deny") == "added rule deploy prod deny\n"
    assert cli.ok("rules", "list", "--session", "demo") == (
        "deploy  *  allow\ndeploy  prod  deny\n")
    assert cli.json("rules", "list", "--session", "demo") == [
        {"action": "deploy", "resource": "*", "effect": "allow"},
        {"action": "deploy", "resource": "prod", "effect": "deny"},
    ]
    assert cli.ok("tools", "call", "--session", "demo", "deploy", "--input",
                  '{"env": "dev"}') == "deployed dev\n"
    assert_one_line_error(
        cli("tools", "call", "--session", "demo", "deploy", "--input", '{"env": "prod"}'),
        "tool_denied", "Permission to run deploy was denied.")

    bad = cli("rules", "add", "--session", "demo", "--action", "deploy", "--resource", "*",
              "--effect", "maybe")
    assert (bad.returncode, bad.stdout) == (2, "")
    assert bad.stderr == (
        "worker-host: error[usage]: argument --effect: invalid choice: 'maybe' (choose from "
        "'allow', 'ask', 'deny') (see worker-host rules add --help)\n")
    assert_one_line_error(cli("rules", "list", "--session", "ghost"), "session_not_found",
                          "No session named 'ghost'.")
    assert_one_line_error(
        cli("rules", "add", "--session", "demo", "--action", "", "--resource", "*",
            "--effect", "deny"),
        "invalid_rule", "Permission rule 'action' must be a non-empty string.")


def test_a_turn_with_approvals_from_flags_and_its_events(
    cli: Cli, https_server: LoopbackServer
) -> None:
    add(cli, https_server, "p.deploy", DEPLOY)
    turn_id = cli.ok("turns", "begin", "--session", "demo", "--prompt", "ship",
                     "--model", "openai/gpt-5-mini").strip()
    assert is_uuid(turn_id)

    def call(env: str, *flags: str) -> subprocess.CompletedProcess[str]:
        return cli("tools", "call", "--session", "demo", "deploy", "--input",
                   json.dumps({"env": env}), "--turn", turn_id, *flags)

    assert call("dev", "--approve", "once").stdout == "deployed dev\n"
    assert call("stage", "--approve", "always").stdout == "deployed stage\n"
    assert call("stage").stdout == "deployed stage\n"
    assert_one_line_error(call("prod", "--approve", "reject"), "tool_denied",
                          "Permission to run deploy was denied.")

    events = cli.json("turns", "events", "--session", "demo", turn_id)
    assert [event["type"] for event in events] == [
        "turn.started",
        "tool.requested", "approval.requested", "approval.resolved", "tool.completed",
        "tool.requested", "approval.requested", "approval.resolved", "tool.completed",
        "tool.requested", "approval.resolved", "tool.completed",
        "tool.requested", "approval.requested", "approval.resolved",
        "turn.terminal",
    ]
    assert events[0] == {"type": "turn.started", "turnId": turn_id,
                         "model": {"providerId": "openai", "modelId": "gpt-5-mini"}}
    assert [(e["decision"], e["source"], e.get("reply")) for e in events
            if e["type"] == "approval.resolved"] == [
        ("allow", "callback", "once"), ("allow", "callback", "always"), ("allow", "saved", None),
        ("deny", "callback", "reject")]
    assert events[-1]["outcome"] == {
        "kind": "failed", "turnId": turn_id,
        "fault": {"code": "tool_denied", "message": "Permission to run deploy was denied."}}
    text = cli.ok("turns", "events", "--session", "demo", turn_id).splitlines()
    assert len(text) == len(events)
    assert text[0].startswith("turn.started ")
    assert text[-1].startswith("turn.terminal ")
    assert_one_line_error(cli("turns", "end", "--session", "demo", turn_id), "turn_ended",
                          f"Turn {turn_id} has already ended.")

    second = cli.ok("turns", "begin", "--session", "demo").strip()
    assert cli.ok("tools", "call", "--session", "demo", "deploy", "--input", '{"env":"stage"}',
                  "--turn", second) == "deployed stage\n"
    assert cli.ok("turns", "end", "--session", "demo", second, "--text", "Shipped.") == (
        f"ended {second}: completed\n")
    last = cli.json("turns", "events", "--session", "demo", second)[-1]
    assert last == {"type": "turn.terminal", "turnId": second,
                    "outcome": {"kind": "completed", "turnId": second, "text": "Shipped."}}
    assert_one_line_error(cli("turns", "events", "--session", "demo", "nope"), "turn_not_found",
                          "Session demo has no turn 'nope'.")
    assert_one_line_error(cli("turns", "begin", "--session", "demo", "--model", "gpt"),
                          "invalid_model", "--model takes PROVIDER/MODEL.")


def test_a_call_inside_a_turn_uses_the_agent_the_turn_began_with(
    cli: Cli, https_server: LoopbackServer, tmp_path: Path
) -> None:
    """`turns begin --agent wide` selects the Turn's Agent; a later
    `tools call --turn` is the same Turn and must keep it (the lexical
    default here, `narrow`, offers only `a`)."""
    config = str(allow_all_config(tmp_path))
    source = plugin(
        "p.agents", tool("a", "return 'a';"), tool("b", "return 'b';"),
        "context.agents.register({ id: 'narrow', displayName: 'Narrow', description: 'A only.',"
        " tools: { mode: 'include', names: ['a'] } });",
        "context.agents.register({ id: 'wide', displayName: 'Wide', description: 'All.' });")
    add(cli, https_server, "p.agents", source, "--config", config)
    turn_id = cli.ok("turns", "begin", "--session", "demo", "--agent", "wide",
                     "--config", config).strip()
    assert cli.ok("tools", "call", "--session", "demo", "b", "--turn", turn_id,
                  "--config", config) == "b\n"


def test_without_a_flag_a_request_from_a_pipe_is_denied(
    cli: Cli, https_server: LoopbackServer
) -> None:
    add(cli, https_server, "p.deploy", DEPLOY)
    turn_id = cli.ok("turns", "begin", "--session", "demo").strip()
    assert_one_line_error(
        cli("tools", "call", "--session", "demo", "deploy", "--input", '{"env":"dev"}',
            "--turn", turn_id),
        "tool_denied", "Permission to run deploy was denied.")
    events = cli.json("turns", "events", "--session", "demo", turn_id)
    (decision,) = [e for e in events if e["type"] == "approval.resolved"]
    assert (decision["decision"], decision["source"]) == ("deny", "default")
    assert_one_line_error(
        cli("tools", "call", "--session", "demo", "deploy", "--input", '{"env":"dev"}'),
        "tool_denied", "Permission to run deploy was denied.")


def test_answer_answers_a_tools_questions(
    cli: Cli, https_server: LoopbackServer, tmp_path: Path
) -> None:
    config = str(allow_all_config(tmp_path))
    add(cli, https_server, "p.ask", ASK, "--config", config)
    turn_id = cli.ok("turns", "begin", "--session", "demo", "--config", config).strip()
    assert cli.ok("tools", "call", "--session", "demo", "ask", "--turn", turn_id, "--answer",
                  '[["Yes"]]', "--config", config) == '[["Yes"]]\n'
    assert_one_line_error(
        cli("tools", "call", "--session", "demo", "ask", "--turn", turn_id, "--config", config),
        "question_dismissed", "The user dismissed this question.")
    assert_one_line_error(
        cli("tools", "call", "--session", "demo", "ask", "--answer", '{"a": 1}',
            "--config", config),
        "invalid_answer", "--answer must be a JSON list of lists of strings.")
    events = cli.json("turns", "events", "--session", "demo", turn_id)
    questions = [e for e in events if e["type"].startswith("question.")]
    assert [e["type"] for e in questions] == [
        "question.asked", "question.replied", "question.asked", "question.rejected"]
    assert questions[0]["request"]["questions"] == [QUESTION]
    assert questions[1]["answers"] == [["Yes"]]
    assert questions[1]["requestId"] == questions[0]["request"]["id"]


def test_catalog_lists_tools_skills_agents_and_loads_a_skill(
    cli: Cli, https_server: LoopbackServer, tmp_path: Path
) -> None:
    notes = build_bundle(EXAMPLES / "notes" / "plugin.mjs", tmp_path / "notes.mjs")
    add(cli, https_server, "example.notes", notes)
    add(cli, https_server, "p.agents", plugin(
        "p.agents",
        "context.agents.register({ id: 'writer', displayName: 'Writer', "
        "description: 'Writes notes.' });"))
    document = cli.json("catalog", "--session", "demo")
    assert [tool["name"] for tool in document["tools"]] == ["notes_save"]
    assert document["tools"][0]["pluginId"] == "example.notes"
    assert document["skills"] == [{
        "pluginId": "example.notes", "id": "note-style", "displayName": "Note style",
        "description": "House style for notes saved with notes_save.",
        "body": "# Note style\n\n- Titles are short noun phrases in sentence case.\n"
                "- Start the body with a one-line summary, then bullet points.",
        "version": "1.0.0", "modelAdvertisement": {"advertised": True, "userInvocable": True},
        "publicMetadata": {"tags": ["notes"]}, "files": []}]
    assert [(a["pluginId"], a["id"], a["mode"]) for a in document["agents"]] == [
        ("p.agents", "writer", "all")]
    assert document["defaultAgent"] is None
    assert cli.ok("catalog", "--session", "demo") == (
        "tool   notes_save  [example.notes]\n"
        "skill  note-style  [example.notes]  House style for notes saved with notes_save.\n"
        "agent  writer  [p.agents]  Writes notes.\n"
        "default agent: -\n")
    assert cli.ok("catalog", "--session", "demo", "--skill", "note-style") == (
        "Base location: ze-plugin:example.notes\n\n# Note style\n\n"
        "- Titles are short noun phrases in sentence case.\n"
        "- Start the body with a one-line summary, then bullet points.\n")
    assert_one_line_error(cli("catalog", "--session", "demo", "--skill", "nope"),
                          "unknown_skill", "Session demo has no skill 'nope'.")


@pytest.mark.parametrize(
    ("parts", "shape", "tools", "hooks"),
    [
        ((logging_hook("turn.before", "x"), logging_hook("tool.execute.after", "y")),
         "hook-only", [], ["turn.before", "tool.execute.after"]),
        ((tool("one"), tool("two")), "tools-only", ["one", "two"], []),
        ((tool("one"), hook("tool.execute.before", "return {};")), "mixed", ["one"],
         ["tool.execute.before"]),
    ],
)
def test_plugins_inspect_shows_the_pin_contributions_and_shape(
    cli: Cli, https_server: LoopbackServer, parts: tuple[str, ...], shape: str,
    tools: list[str], hooks: list[str],
) -> None:
    source = plugin("p.x", *parts)
    add(cli, https_server, "p.x", source, "--options", '{"level": 2}')
    report = cli.json("plugins", "inspect", "--session", "demo", "p.x")
    pin = report["pin"]
    assert (report["pluginId"], report["scope"], report["state"], report["shape"]) == (
        "p.x", "session", "active", shape)
    assert pin["url"] == https_server.url("/p.x.mjs")
    assert (pin["options"], pin["signer"], len(pin["sha256"])) == ({"level": 2}, None, 64)
    assert [t["id"] for t in report["tools"]] == tools
    assert report["hooks"] == hooks
    assert (report["skills"], report["agents"], report["defaultAgent"], report["cleanup"]) == (
        [], [], None, False)
    text = cli.ok("plugins", "inspect", "--session", "demo", "p.x").splitlines()
    assert text == [
        "plugin       p.x  (session scope)",
        "state        active",
        f"url          {pin['url']}",
        f"sha256       {pin['sha256']}",
        'options      {"level": 2}',
        "signed by    -",
        f"fingerprint  {report['fingerprint']}",
        f"shape        {shape}",
        f"tools        {', '.join(tools) or '-'}",
        f"hooks        {', '.join(hooks) or '-'}",
        "skills       -",
        "agents       -",
        "default      -",
    ]
    assert_one_line_error(cli("plugins", "inspect", "--session", "demo", "p.y"),
                          "plugin_not_found", "Session demo has no plugin 'p.y'.")


def test_host_plugins_and_rules_from_the_operator_config_file(
    cli: Cli, https_server: LoopbackServer, tmp_path: Path
) -> None:
    greeter = plugin("h.greet", tool("greet", "return 'hello ' + input.name;"),
                     tool("secret", "return 'classified';"))
    failing = plugin("h.broken", "throw new PluginError({ message: 'x', "
                                 "publicMessage: 'Needs a token.' });")
    config = tmp_path / "operator.json"
    config.write_text(json.dumps({
        "plugins": [{"pluginId": "h.greet", "url": serve(https_server, "greet", greeter)},
                    {"pluginId": "h.broken", "url": serve(https_server, "broken", failing)}],
        "permissions": [{"action": "greet", "resource": "*", "effect": "allow"},
                        {"action": "secret", "resource": "*", "effect": "deny"}],
    }))
    add(cli, https_server, "p.deploy", DEPLOY, "--config", str(config))
    assert [(t["name"], t["pluginId"]) for t in cli.json(
        "tools", "list", "--session", "demo", "--config", str(config))] == [
        ("greet", "h.greet"), ("deploy", "p.deploy")]
    assert cli.ok("tools", "call", "--session", "demo", "greet", "--input", '{"name": "Ada"}',
                  "--config", str(config)) == "hello Ada\n"
    assert_one_line_error(
        cli("tools", "call", "--session", "demo", "secret", "--config", str(config)),
        "unknown_tool", "Session demo has no tool named 'secret'.")
    assert_one_line_error(
        cli("tools", "call", "--session", "demo", "deploy", "--input", '{"env":"dev"}',
            "--config", str(config)),
        "tool_denied", "Permission to run deploy was denied.")
    report = cli.json("plugins", "inspect", "--session", "demo", "h.greet", "--config",
                      str(config))
    assert (report["scope"], report["state"], report["shape"]) == ("host", "active",
                                                                   "tools-only")
    assert cli.json("plugins", "inspect", "--session", "demo", "h.broken", "--config",
                    str(config)) == {"pluginId": "h.broken", "scope": "host",
                                     "state": "failed", "failure": "Needs a token."}
    assert cli.ok("plugins", "inspect", "--session", "demo", "h.broken", "--config",
                  str(config)) == (
        "plugin       h.broken  (host scope)\nstate        failed\n"
        "failure      Needs a token.\n")
    assert cli.ok("rules", "list", "--session", "demo", "--config", str(config)) == ""
