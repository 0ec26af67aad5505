"""Probe bundles for the capability tests: tools that use host capabilities from an isolate.

A probe tool catches what a capability throws and returns it as plain JSON:
``{ok: true, value}`` or ``{ok: false, tag, code, name, message}``, where
``tag`` and ``code`` are read as the error's *own data properties* (what
``isWorkspaceFileError`` and friends look at), never through accessors.

- ``probe_source(body)``: a bundle whose tool ``t`` runs ``body`` as
  ``async (input, ctx) => {...}`` with ``probe``, ``files``, ``shell`` and
  ``web`` in scope (the setup context's capabilities).
- ``STEPS``: a bundle whose tool ``t`` performs ``input.steps``, a list of
  ``[method, args]`` such as ``["workspaceFiles.readText", {"filePath": "a"}]``,
  one after the other, each with the call's ``signal``, and returns the list of
  probe results. One activation serves a whole table of cases.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.worker_host.bundles import CONTEXT, plugin_code, tool_source
from worker_host import CallScope, PluginRunner
from worker_host._tools import CallContext, ToolResult, call_tool

PROBE = """
const own = (value, key) => {
  if ((typeof value !== 'object' && typeof value !== 'function') || value === null) return null;
  const descriptor = Object.getOwnPropertyDescriptor(value, key);
  return descriptor !== undefined && 'value' in descriptor ? descriptor.value : null;
};
const probe = async (fn) => {
  try {
    return { ok: true, value: await fn() };
  } catch (e) {
    return {
      ok: false,
      tag: own(e, '_tag'),
      code: own(e, 'code'),
      name: String(e?.name),
      message: String(e?.message),
    };
  }
};
let files, shell, web;
"""

_CAPTURE = "files = context.workspaceFiles; shell = context.workspaceShell; web = context.webFetch;"


def probe_source(
    execute_body: str,
    *,
    setup_body: str = "",
    permissions_body: str | None = None,
    prefix: str = "",
) -> bytes:
    """A bundle with tool ``t`` running ``execute_body``; see the module docstring."""
    return tool_source(
        execute_body,
        setup_body=_CAPTURE + "\n" + setup_body,
        permissions_body=permissions_body,
        prefix=PROBE + prefix,
    )


STEPS = probe_source(
    """
const results = [];
for (const [method, args] of input.steps) {
  const [group, name] = method.split('.');
  results.push(await probe(() => context[group][name]({ ...args, signal: ctx.signal })));
}
return results;
"""
)


async def run_tool(
    runner: PluginRunner,
    source: bytes,
    scope: CallScope,
    tool_input: Any = None,
    *,
    context: CallContext = CONTEXT,
) -> ToolResult:
    """Activates ``source`` under ``scope`` and calls its tool ``t`` once, as the model would."""
    code = plugin_code(source)
    manifest = await runner.activate(code, scope)
    tool = manifest.tool("t")
    assert tool is not None
    return await call_tool(
        runner,
        code,
        manifest.fingerprint,
        tool,
        {} if tool_input is None else tool_input,
        context,
        scope,
    )


async def run_steps(
    runner: PluginRunner, scope: CallScope, *steps: tuple[str, dict[str, Any]]
) -> list[dict[str, Any]]:
    """The probe results of ``steps`` performed in order by one call of ``STEPS``."""
    result = await run_tool(runner, STEPS, scope, {"steps": [list(step) for step in steps]})
    assert result.ok, result
    value: list[dict[str, Any]] = result.value
    return value


def ok(value: Any) -> dict[str, Any]:
    return {"ok": True, "value": value}


_PREFIXES = {
    "WorkspaceFileError": "Workspace file failed: ",
    "WorkspaceShellError": "Workspace shell failed: ",
    "WebFetchError": "Web fetch failed: ",
}


def tagged(tag: str, code: str) -> dict[str, Any]:
    """A contract failure as a probe reports it, without ``name`` (see ``without_name``)."""
    return {"ok": False, "tag": tag, "code": code, "message": _PREFIXES[tag] + code}


def file_failure(code: str) -> dict[str, Any]:
    return tagged("WorkspaceFileError", code)


def shell_failure(code: str) -> dict[str, Any]:
    return tagged("WorkspaceShellError", code)


def web_failure(code: str) -> dict[str, Any]:
    return tagged("WebFetchError", code)


def plugin_error(message: str) -> dict[str, Any]:
    return {"ok": False, "tag": "PluginError", "code": None, "message": message}


def no_capability(name: str) -> dict[str, Any]:
    return plugin_error(f"This host provides no {name} capability.")


def without_name(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Probe results with ``name`` dropped from failures.

    The contract specifies a rebuilt failure by its own ``_tag`` and ``code``
    data properties and its message; ``name`` is not part of it.
    """
    return [{k: v for k, v in r.items() if k != "name"} for r in results]


def assert_no_host_path(value: Any, *paths: Path) -> None:
    """No host path (as given or resolved) appears anywhere in ``value``'s JSON."""
    text = json.dumps(value, ensure_ascii=False)
    for path in paths:
        for spelling in {str(path), str(path.resolve())}:
            assert spelling not in text, f"{spelling} leaked into {text[:500]}"
