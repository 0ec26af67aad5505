"""Bundle verification: does setup activate, and is it deterministic?

Runs setup several times, each in a fresh isolate, once per options set, and
compares the canonical manifests. When two runs differ, `first_difference`
names the contribution and field that changed, the way an author reads it:
``tool roll: description: 'Roll 0.12' then 'Roll 0.83'``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ._activation import Activation, PluginCode, PluginRunner
from ._calls import HostOperations
from ._errors import WorkerHostError
from ._manifest import Manifest

DEFAULT_RUNS = 3
MAX_RUNS = 100
_VERIFY_ACTIVATION = Activation("session", "verify", 1, "verify")
_KEYED_LISTS = {"tools": "tool", "skills": "skill", "agents": "agent"}
_ABSENT = object()


@dataclass(frozen=True)
class OptionsResult:
    """What setup registered for one options set, and whether runs agreed."""

    options: dict[str, Any]
    manifest: Manifest
    difference: str | None = None

    @property
    def deterministic(self) -> bool:
        return self.difference is None


@dataclass(frozen=True)
class VerifyReport:
    """The outcome of `verify_bundle`: one `OptionsResult` per options set."""

    sha256: str
    size: int
    results: tuple[OptionsResult, ...] = field(default=())

    @property
    def deterministic(self) -> bool:
        return all(result.deterministic for result in self.results)

    @property
    def manifest(self) -> Manifest:
        return self.results[0].manifest


async def verify_bundle(
    runner: PluginRunner,
    bundle: bytes,
    sha256: str,
    *,
    options_sets: Sequence[dict[str, Any]] = ({},),
    runs: int = DEFAULT_RUNS,
    operations: HostOperations | None = None,
) -> VerifyReport:
    """Runs setup `runs` times per options set in fresh isolates.

    Raises `WorkerHostError` `invalid_runs` (1 to 100), and every activation
    failure of the first run (`bundle_invalid`, `setup_failed`,
    `invalid_contribution`, isolate faults); a later run that fails or differs
    is reported as that options set's `difference`.
    """
    if not 1 <= runs <= MAX_RUNS:
        raise WorkerHostError("invalid_runs", f"--runs must be between 1 and {MAX_RUNS}.")
    results = []
    for options in options_sets or ({},):
        first: Manifest | None = None
        difference = None
        for run in range(runs):
            code = PluginCode(first.plugin_id if first else "", bundle, _VERIFY_ACTIVATION,
                              dict(options))
            try:
                manifest = await runner.activate(code, operations, check_id=False)
            except WorkerHostError as error:
                if first is None:
                    raise
                difference = f"run {run + 1} failed: {error.code}: {error.message}"
                break
            if first is None:
                first = manifest
            elif manifest.fingerprint != first.fingerprint:
                difference = first_difference(first.canonical, manifest.canonical)
                break
        assert first is not None, "runs >= 1"
        results.append(OptionsResult(dict(options), first, difference))
    return VerifyReport(sha256, len(bundle), tuple(results))


def first_difference(before: str, after: str) -> str:
    """The first place two canonical manifests differ, as one readable line."""
    return _difference(json.loads(before), json.loads(after), []) or "the manifests differ"


def _difference(before: Any, after: Any, path: list[str]) -> str | None:
    if isinstance(before, dict) and isinstance(after, dict):
        for key in sorted(set(before) | set(after)):
            if key not in before or key not in after:
                return _line(path + [key], before.get(key, _ABSENT), after.get(key, _ABSENT))
            if not path and key in _KEYED_LISTS:
                found = _keyed_difference(_KEYED_LISTS[key], before[key], after[key])
            else:
                found = _difference(before[key], after[key], path + [key])
            if found:
                return found
        return None
    if isinstance(before, list) and isinstance(after, list) and len(before) == len(after):
        for index, (left, right) in enumerate(zip(before, after, strict=True)):
            found = _difference(left, right, path + [f"[{index}]"])
            if found:
                return found
        return None
    return None if before == after else _line(path, before, after)


def _keyed_difference(kind: str, before: list[Any], after: list[Any]) -> str | None:
    """Compares registrations by id: `tool roll: description: ...`."""
    ids_before = [item.get("id") for item in before]
    ids_after = [item.get("id") for item in after]
    if ids_before != ids_after:
        return f"{kind}s: registered {ids_before} then {ids_after}"
    for left, right in zip(before, after, strict=True):
        found = _difference(left, right, [])
        if found:
            return f"{kind} {left.get('id')}: {found}"
    return None


def _line(path: list[str], before: Any, after: Any) -> str:
    where = ".".join(path).replace(".[", "[") or "manifest"
    return f"{where}: {_short(before)} then {_short(after)}"


def _short(value: Any, limit: int = 80) -> str:
    text = "absent" if value is _ABSENT else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= limit else text[: limit - 1] + "…"
