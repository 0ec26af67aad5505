"""Revisions: activating a scope's pins, the catalog rules between scopes,
tools deltas, and retiring a revision's activations.

A host revision (the operator's plugins, for every session) and each
session's revisions are immutable, numbered sets of pins. Activating one runs
every pin's setup under the new revision identity. In a host revision a setup
that throws a `PluginError` with a non-blank `publicMessage`, or a rejected
tool declaration, skips that plugin (it is reported as failed with the
trimmed message, at most 512 characters); in a session revision any failure
rejects the whole revision.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Literal

from ._activation import Activation, PluginCode, PluginRunner, SetupFailed
from ._calls import HostOperations
from ._declarations import check_default_agent
from ._errors import WorkerHostError
from ._manifest import RejectedTool, load_manifest, quoted
from ._storage import Pin, Revision
from ._turns import ActivePlugin, Catalog

log = logging.getLogger("worker_host.revisions")

Scope = Literal["host", "session"]


@dataclass(frozen=True)
class PluginFailure:
    """A host plugin skipped at activation, with its safe reason."""

    plugin_id: str
    message: str


@dataclass(frozen=True)
class ToolsDelta:
    """The tools a revision change added and removed: (tool name, plugin id)."""

    added: tuple[tuple[str, str], ...] = ()
    removed: tuple[tuple[str, str], ...] = ()


def _invalid(reason: str) -> WorkerHostError:
    return WorkerHostError("invalid_contribution", f"The revision is invalid: {reason}.")


async def activate_pins(
    runner: PluginRunner,
    scope: Scope,
    activation: Activation,
    pins: Sequence[Pin],
    load_bundle: Callable[[Pin], bytes],
    operations: HostOperations,
) -> tuple[list[Pin], list[PluginFailure]]:
    """Runs setup for every pin under `activation`.

    Returns the activated pins (fingerprint, manifest and cleanup filled in)
    and, for a host scope, the skipped plugins. Raises every activation
    failure that does not skip (all of them for a session scope).
    """
    activated: list[Pin] = []
    failures: list[PluginFailure] = []
    try:
        for pin in pins:
            code = PluginCode(pin.plugin_id, load_bundle(pin), activation, pin.options)
            try:
                manifest = await runner.activate(code, operations,
                                                 clean_up_rejected=scope == "host")
            except SetupFailed as failure:
                if scope != "host" or not failure.public_message:
                    raise
                failures.append(PluginFailure(pin.plugin_id, failure.public_message))
                continue
            except RejectedTool as rejected:
                if scope != "host":
                    raise
                failures.append(PluginFailure(pin.plugin_id, rejected.message[:512]))
                continue
            activated.append(replace(pin, fingerprint=manifest.fingerprint,
                                     manifest=manifest.canonical, cleanup=manifest.has_cleanup))
    except BaseException:
        await roll_back(runner, activated, activation, load_bundle, operations)
        raise
    return activated, failures


async def roll_back(
    runner: PluginRunner,
    activated: Sequence[Pin],
    activation: Activation,
    load_bundle: Callable[[Pin], bytes],
    operations: HostOperations,
) -> None:
    """Runs the cleanups of a revision that was activated but not committed."""
    revision = Revision("", activation.revision_version, activation.revision_id, tuple(activated))
    await retire(runner, revision, activation, load_bundle, operations)


def check_catalog(host: Sequence[Pin], session: Sequence[Pin],
                  configured_default: str | None = None) -> None:
    """The rules between plugins of one effective catalog.

    Tool ids are unique across the catalog (a session plugin cannot reuse a
    host tool's id); Skill and Agent ids are unique per scope and a session
    cannot reuse a host id; each revision sets at most one default agent,
    which must exist and must not be `subagent`-only. Raises
    `invalid_contribution`.
    """
    tools: dict[str, str] = {}
    for pin in [*host, *session]:
        for tool in load_manifest(pin.manifest).tools:
            if tool.id in tools:
                raise _invalid(f"tool {quoted(tool.id)} of {pin.plugin_id} is already declared "
                               f"by {tools[tool.id]}")
            tools[tool.id] = pin.plugin_id
    for kind in ("skills", "agents"):
        seen: dict[str, str] = {}
        for pin in [*host, *session]:
            manifest = load_manifest(pin.manifest)
            for declared in getattr(manifest, kind):
                if declared.id in seen:
                    raise _invalid(f"{kind[:-1]} {declared.id!r} of {pin.plugin_id} is already "
                                   f"declared by {seen[declared.id]}")
                seen[declared.id] = pin.plugin_id
    agents = [agent for pin in [*host, *session] for agent in load_manifest(pin.manifest).agents]
    for pins in (host, session):
        defaults = [load_manifest(pin.manifest).default_agent for pin in pins]
        chosen = [agent_id for agent_id in defaults if agent_id is not None]
        if len(chosen) > 1:
            raise _invalid("agents.setDefault was called more than once in one revision")
        check_default_agent(agents, chosen[0] if chosen else None)
    check_default_agent(agents, configured_default)


def catalog(host: Sequence[Pin], host_activation: Activation, session: Sequence[Pin],
            session_activation: Activation, load_bundle: Callable[[Pin], bytes],
            configured_default: str | None = None) -> Catalog:
    """The effective catalog: host plugins, then session plugins, ready to run.

    The default agent is the session revision's, else the operator's, else
    the host revision's.
    """
    plugins: list[ActivePlugin] = []
    scopes: tuple[tuple[Scope, Sequence[Pin], Activation], ...] = (
        ("host", host, host_activation), ("session", session, session_activation))
    for scope, pins, activation in scopes:
        for pin in pins:
            plugins.append(ActivePlugin(scope, pin, load_manifest(pin.manifest),
                                        _code_loader(pin, activation, load_bundle)))
    session_default = next((p.manifest.default_agent for p in plugins
                            if p.scope == "session" and p.manifest.default_agent), None)
    host_default = next((p.manifest.default_agent for p in plugins
                         if p.scope == "host" and p.manifest.default_agent), None)
    return Catalog(tuple(plugins), session_default or configured_default or host_default)


def _code_loader(pin: Pin, activation: Activation,
                 load_bundle: Callable[[Pin], bytes]) -> Callable[[], PluginCode]:
    return lambda: PluginCode(pin.plugin_id, load_bundle(pin), activation, pin.options)


def tools_delta(before: Sequence[Pin], after: Sequence[Pin]) -> ToolsDelta:
    """Tool names (with their plugin) that appear or disappear between revisions."""
    def names(pins: Sequence[Pin]) -> set[tuple[str, str]]:
        return {(tool.id, pin.plugin_id) for pin in pins
                for tool in load_manifest(pin.manifest).tools}

    old, new = names(before), names(after)
    return ToolsDelta(tuple(sorted(new - old)), tuple(sorted(old - new)))


async def retire(
    runner: PluginRunner,
    revision: Revision,
    activation: Activation,
    load_bundle: Callable[[Pin], bytes],
    operations: HostOperations,
) -> None:
    """Calls the cleanups of a retired revision's activations, once each.

    In reverse plugin order (the last activated is cleaned up first), each in
    a fresh isolate (setup, then the cleanup it returned); failures are
    logged and the others still run.
    """
    for pin in reversed(revision.pins):
        if not pin.cleanup:
            continue
        try:
            code = PluginCode(pin.plugin_id, load_bundle(pin), activation, pin.options)
            answer = await runner.invoke(code, pin.fingerprint,
                                         {"target": {"kind": "cleanup"}, "input": None,
                                          "context": {}}, operations)
            if answer.status == "failed":
                log.warning("cleanup of %s failed: %s", pin.plugin_id, answer.error)
        except WorkerHostError as error:
            log.warning("cleanup of %s failed: %s", pin.plugin_id, error.code)
        except Exception:  # a cleanup must never stop the others, whatever it does
            log.exception("cleanup of %s failed", pin.plugin_id)


