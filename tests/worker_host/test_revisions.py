"""Host and session revisions through real bundles: skipped host plugins
versus rejected session revisions, ids shared between scopes, cleanups, the
tools delta of a change, and the Skill catalog."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from sdk import build_bundle
from tests.support.https_server import LoopbackServer, ThrowawayCA
from tests.worker_host.turn_bundles import (
    ALLOW_RULE,
    Env,
    agent,
    data_dir,
    guest_cache,
    plugin,
    read_log,
    run,
    tool,
)
from worker_host import Host, PluginFailure, ToolsDelta, WorkerHostError

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
PATTERN_SCHEMA = "{ type: 'object', properties: { s: { type: 'string', pattern: '^a' } } }"
REJECTED_TOOL = ("The plugin's setup is invalid: tool bad: inputSchema.properties.s uses the "
                 "keyword 'pattern', which is not allowed.")
LONG_REASON = "Set the API key option to use this plugin. " + "x" * 600
CLEANUP_LOG = "cleanups.log"


@pytest.fixture
def env(tmp_path: Path, tls_ca: ThrowawayCA, https_server: LoopbackServer,
        tmp_path_factory: pytest.TempPathFactory) -> Env:
    return Env(data_dir(tmp_path, guest_cache(tmp_path_factory)), tls_ca.ca_file, https_server)


def cleanup(label: str, body: str | None = None) -> str:
    """Setup returns a cleanup that logs `label` with the activation's scope and version."""
    body = body or (f"await appendLine(context, '{label} ' + context.activation.scope + ' ' +"
                    f" context.activation.revision.version, '/workspace/{CLEANUP_LOG}');")
    return f"return async () => {{ {body} }};"


GOOD_ONE = plugin("h.one", tool("one"))
GOOD_TWO = plugin("h.two", tool("two"))


# ---- host scope skips, session scope rejects ----------------------------------------------


@pytest.mark.parametrize(
    ("setup", "failure"),
    [
        (f"context.tools.register({{ id: 'leaked', description: 'd', inputSchema: {{ type: "
         f"'object' }}, execute: async () => 1 }});"
         f" throw new PluginError({{ message: 'no key', publicMessage: '  {LONG_REASON}  ' }});",
         LONG_REASON[:512]),
        (tool("bad", schema=PATTERN_SCHEMA), REJECTED_TOOL),
        ("context.journal.registerKind({ kind: 'fact' });",
         "journal.registerKind is not supported on the Worker host."),
    ],
    ids=["public-message", "rejected-tool", "journal-kind"],
)
def test_a_host_plugin_that_describes_its_failure_is_skipped(
    env: Env, setup: str, failure: str
) -> None:
    host_plugins = (env.host_plugin("h.one", GOOD_ONE),
                    env.host_plugin("h.bad", plugin("h.bad", setup)),
                    env.host_plugin("h.two", GOOD_TWO))

    async def scenario() -> None:
        async with Host(env.config(host_plugins=host_plugins, permissions=ALLOW_RULE)) as host:
            assert host.host_failures() == [PluginFailure("h.bad", failure)]
            assert len(failure) <= 512
            session = host.session("s", create=True)
            assert [(t.name, t.plugin_id) for t in session.tools()] == [
                ("one", "h.one"), ("two", "h.two")]
            assert session.inspect("h.bad") == {"pluginId": "h.bad", "scope": "host",
                                                "state": "failed", "failure": failure}
            active = session.inspect("h.two")
            assert (active["scope"], active["state"], active["shape"]) == (
                "host", "active", "tools-only")
            assert (await session.call_tool("two", {"x": 1})).value == {"x": 1}
        async with Host(env.config(host_plugins=host_plugins, permissions=ALLOW_RULE)) as host:
            assert host.host_failures() == [PluginFailure("h.bad", failure)]

    run(scenario)


@pytest.mark.parametrize(
    ("setup", "code", "message"),
    [
        ("throw new PluginError({ message: 'private detail' });", "setup_failed",
         "Plugin h.bad failed to set up."),
        ("throw new PluginError({ message: 'private detail', publicMessage: '   ' });",
         "setup_failed", "Plugin h.bad failed to set up."),
        ("throw new Error('private detail');", "setup_failed", "Plugin h.bad failed to set up."),
        (agent("Bad Id"), "invalid_contribution",
         "Agent declaration: id must be '/'-separated segments, each a lowercase letter followed "
         "by lowercase letters and digits joined by single '.', '_' or '-' characters."),
    ],
    ids=["message-only", "blank-public-message", "plain-error", "malformed-agent"],
)
def test_any_other_host_plugin_failure_fails_host_start_and_keeps_the_previous_revision(
    env: Env, setup: str, code: str, message: str
) -> None:
    good = (env.host_plugin("h.one", GOOD_ONE),)
    broken = (*good, env.host_plugin("h.bad", plugin("h.bad", setup)))

    async def scenario() -> None:
        async with Host(env.config(host_plugins=good)) as host:
            assert [t.name for t in host.session("s", create=True).tools()] == ["one"]
        host = Host(env.config(host_plugins=broken))
        try:
            with pytest.raises(WorkerHostError) as caught:
                await host.start()
            assert (caught.value.code, caught.value.message) == (code, message)
            assert "private detail" not in caught.value.message
            assert [t.name for t in host.session("s").tools()] == ["one"]
            assert host.host_failures() == []
        finally:
            host.close()

    run(scenario)


@pytest.mark.parametrize(
    ("setup", "code", "message"),
    [
        (f"throw new PluginError({{ message: 'no key', publicMessage: '  {LONG_REASON}  ' }});",
         "setup_failed", f"Plugin s.bad failed to set up: {LONG_REASON[:512]}"),
        (tool("bad", schema=PATTERN_SCHEMA), "invalid_contribution", REJECTED_TOOL),
        ("throw new PluginError({ message: 'private detail' });", "setup_failed",
         "Plugin s.bad failed to set up."),
        ("context.journal.registerKind({ kind: 'fact' });", "setup_failed",
         "Plugin s.bad failed to set up: journal.registerKind is not supported on the Worker "
         "host."),
    ],
    ids=["public-message", "rejected-tool", "message-only", "journal-kind"],
)
def test_the_same_failures_reject_a_whole_session_revision(
    env: Env, setup: str, code: str, message: str
) -> None:
    async def scenario() -> None:
        async with Host(env.config(permissions=ALLOW_RULE)) as host:
            session = await env.session(host, ("s.one", plugin("s.one", tool("one"))))
            before = session.revision()
            with pytest.raises(WorkerHostError) as caught:
                await session.add_plugin(env.url("bad", plugin("s.bad", setup)), "s.bad")
            assert (caught.value.code, caught.value.message) == (code, message)
            assert session.revision() == before
            assert [t.name for t in session.tools()] == ["one"]
            assert (await session.call_tool("one", {"k": 1})).value == {"k": 1}
            with pytest.raises(WorkerHostError) as missing:
                session.inspect("s.bad")
            assert missing.value.code == "plugin_not_found"

    run(scenario)


@pytest.mark.parametrize(
    ("declaration", "message"),
    [
        (tool("shared"), "The revision is invalid: tool 'shared' of s.dup is already declared "
                         "by h.base."),
        ("context.skills.register({ id: 'style', displayName: 'Style', description: 'Mine.', "
         "version: '1', body: 'Be mine.', modelAdvertisement: { advertised: true, "
         "userInvocable: true }, publicMetadata: { tags: [] } });",
         "The revision is invalid: skill 'style' of s.dup is already declared by h.base."),
        (agent("reviewer"),
         "The revision is invalid: agent 'reviewer' of s.dup is already declared by h.base."),
    ],
    ids=["tool", "skill", "agent"],
)
def test_a_session_plugin_cannot_reuse_a_host_id(
    env: Env, declaration: str, message: str
) -> None:
    base = plugin(
        "h.base", tool("shared"), agent("reviewer"),
        "context.skills.register({ id: 'style', displayName: 'Style', description: 'Host.', "
        "version: '1', body: 'Be host.', modelAdvertisement: { advertised: true, "
        "userInvocable: true }, publicMetadata: { tags: [] } });")

    async def scenario() -> None:
        async with Host(env.config(host_plugins=(env.host_plugin("h.base", base),))) as host:
            session = await env.session(host)
            with pytest.raises(WorkerHostError) as caught:
                await session.add_plugin(env.url("dup", plugin("s.dup", declaration)), "s.dup")
            assert (caught.value.code, caught.value.message) == ("invalid_contribution", message)
            assert session.revision().version == 0

    run(scenario)


# ---- cleanups ----------------------------------------------------------------------------


def test_cleanups_run_once_each_last_plugin_first_when_a_revision_is_retired(env: Env) -> None:
    sources = {pid: plugin(pid, tool(pid.replace(".", "_")), cleanup(pid))
               for pid in ("p.a", "p.b", "p.c")}

    async def scenario() -> None:
        async with Host(env.config()) as host:
            session = await env.session(host, ("p.a", sources["p.a"]))
            assert read_log(session, CLEANUP_LOG) == []
            await session.add_plugin(env.url("b", sources["p.b"]), "p.b")
            assert read_log(session, CLEANUP_LOG) == ["p.a session 1"]
            await session.add_plugin(env.url("c", sources["p.c"]), "p.c")
            await session.remove_plugin("p.a")
            assert read_log(session, CLEANUP_LOG) == [
                "p.a session 1",
                "p.b session 2", "p.a session 2",
                "p.c session 3", "p.b session 3", "p.a session 3",
            ]
            assert session.inspect("p.b")["cleanup"] is True

    run(scenario)


def test_a_rejected_revision_runs_no_cleanup_of_the_active_one(env: Env) -> None:
    # Revision 2 activated p.a before p.bad failed: that activation is rolled
    # back (its cleanup runs); the active revision 1 is untouched.
    async def scenario() -> None:
        async with Host(env.config()) as host:
            session = await env.session(host, ("p.a", plugin("p.a", tool("a"), cleanup("p.a"))))
            with pytest.raises(WorkerHostError):
                await session.add_plugin(env.url("bad", plugin("p.bad", "throw new Error('x');")),
                                         "p.bad")
            assert read_log(session, CLEANUP_LOG) == ["p.a session 2"]
            assert session.revision().version == 1

    run(scenario)


def test_a_throwing_cleanup_is_logged_and_the_others_still_run(
    env: Env, caplog: pytest.LogCaptureFixture
) -> None:
    async def scenario() -> None:
        async with Host(env.config()) as host:
            session = await env.session(
                host,
                ("p.a", plugin("p.a", tool("a"), cleanup("p.a"))),
                ("p.throws", plugin("p.throws", tool("b"),
                                    cleanup("", "throw new Error('cleanup broke');"))),
                ("p.rejects", plugin("p.rejects", tool("c"),
                                     cleanup("", "await Promise.reject(new PluginError("
                                                 "{ message: 'nope' }));"))),
            )
            (session.workspace / CLEANUP_LOG).unlink()
            caplog.clear()
            with caplog.at_level(logging.WARNING, logger="worker_host.revisions"):
                await session.remove_plugin("p.throws")
            assert read_log(session, CLEANUP_LOG) == ["p.a session 3"]
            failures = [r.getMessage() for r in caplog.records
                        if r.name == "worker_host.revisions"]
            assert len(failures) == 2
            assert failures[0].startswith("cleanup of p.rejects failed: ")
            assert failures[1].startswith("cleanup of p.throws failed: ")

    run(scenario)


def host_workspace(env: Env) -> Path:
    """The host scope's workspace, made beforehand so that these cleanup tests
    do not depend on the host creating it (see the test after them)."""
    workspace = env.data / "workspaces" / "@host"
    workspace.mkdir(parents=True, exist_ok=True)
    return workspace


def test_a_retired_host_revision_runs_its_cleanups(env: Env) -> None:
    first = (env.host_plugin("h.one", plugin("h.one", tool("one"), cleanup("h.one"))),)
    second = (*first, env.host_plugin("h.two", plugin("h.two", tool("two"), cleanup("h.two"))))
    host_log = host_workspace(env) / CLEANUP_LOG

    async def scenario() -> None:
        async with Host(env.config(host_plugins=first)):
            pass
        async with Host(env.config(host_plugins=first)):
            assert not host_log.exists()
        async with Host(env.config(host_plugins=second)):
            assert host_log.read_text().splitlines() == ["h.one host 1"]

    run(scenario)


def test_a_skipped_host_plugin_has_the_cleanup_it_returned_run(env: Env) -> None:
    """A host plugin whose tool is rejected is skipped like a self-described
    setup failure: Core "rolls back everything it registered, runs any
    cleanup it returned, reports it as failed"."""
    skipped = plugin("h.bad", tool("bad", schema=PATTERN_SCHEMA), cleanup("h.bad"))
    host_log = host_workspace(env) / CLEANUP_LOG

    async def scenario() -> None:
        async with Host(env.config(host_plugins=(env.host_plugin("h.bad", skipped),))) as host:
            assert host.host_failures() == [PluginFailure("h.bad", REJECTED_TOOL)]
            assert host_log.exists()
            assert host_log.read_text().splitlines() == ["h.bad host 1"]

    run(scenario)


def test_host_plugins_can_use_workspace_files_in_setup_and_cleanup(env: Env) -> None:
    """Host capabilities work while Core calls a host plugin (setup, cleanup)
    as they do for a session plugin: in the host scope's own workspace."""
    source = plugin("h.files", "await appendLine(context, 'setup', '/workspace/setup.log');",
                    tool("one"), cleanup("h.files"))

    async def scenario() -> None:
        async with Host(env.config(host_plugins=(env.host_plugin("h.files", source),))) as host:
            assert host.host_failures() == []
            workspace = env.data / "workspaces" / "@host"
            assert (workspace / "setup.log").read_text() == "setup\n"
        async with Host(env.config()):
            assert (workspace / CLEANUP_LOG).read_text() == "h.files host 1\n"

    run(scenario)


# ---- tools deltas ------------------------------------------------------------------------


def test_add_refresh_and_remove_report_the_tools_they_added_and_removed(env: Env) -> None:
    old = plugin("p.kit", tool("x"), tool("y"))
    new = plugin("p.kit", tool("y"), tool("z"))

    async def scenario() -> None:
        async with Host(env.config()) as host:
            session = await env.session(host, ("p.other", plugin("p.other", tool("o"))))
            added = await session.add_plugin(env.url("kit", old), "p.kit")
            assert added.delta == ToolsDelta(added=(("x", "p.kit"), ("y", "p.kit")))
            unchanged = await session.refresh_plugin("p.kit")
            assert (unchanged.changed, unchanged.delta) == (False, ToolsDelta())
            env.url("kit", new)
            refreshed = await session.refresh_plugin("p.kit")
            assert refreshed.changed is True
            assert refreshed.delta == ToolsDelta(added=(("z", "p.kit"),),
                                                 removed=(("x", "p.kit"),))
            assert refreshed.plugin.delta is None
            assert await session.remove_plugin("p.kit") == ToolsDelta(
                removed=(("y", "p.kit"), ("z", "p.kit")))
            assert [t.name for t in session.tools()] == ["o"]

    run(scenario)


# ---- skills --------------------------------------------------------------------------------


def test_the_notes_example_skill_is_in_the_catalog_and_loads(env: Env, tmp_path: Path) -> None:
    bundle = build_bundle(EXAMPLES / "notes" / "plugin.mjs", tmp_path / "notes.mjs")

    async def scenario() -> None:
        async with Host(env.config()) as host:
            session = await env.session(host, ("example.notes", bundle))
            ((plugin_id, skill),) = session.skills()
            assert plugin_id == "example.notes"
            assert skill.to_json() == {
                "id": "note-style",
                "displayName": "Note style",
                "description": "House style for notes saved with notes_save.",
                "body": "# Note style\n\n- Titles are short noun phrases in sentence case.\n"
                        "- Start the body with a one-line summary, then bullet points.",
                "version": "1.0.0",
                "modelAdvertisement": {"advertised": True, "userInvocable": True},
                "publicMetadata": {"tags": ["notes"]},
                "files": [],
            }
            assert session.load_skill("note-style") == (
                "Base location: ze-plugin:example.notes\n\n" + skill.body)
            with pytest.raises(WorkerHostError) as caught:
                session.load_skill("note-styles")
            assert (caught.value.code, caught.value.message) == (
                "unknown_skill", "Session s has no skill 'note-styles'.")
            report = session.inspect("example.notes")
            assert (report["shape"], report["hooks"], report["skills"]) == (
                "mixed", ["tool.execute.before"], [skill.to_json()])

    run(scenario)
