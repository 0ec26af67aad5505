"""What one sandboxed command may take: per-process limits, a bounded artifact."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from capabilities import WorkspaceShell
from capabilities._shell import MAX_ARTIFACT_BYTES


def execute(tmp_path: Path, command: str) -> dict[str, Any]:
    return asyncio.run(WorkspaceShell(tmp_path).execute({"command": command}))


def test_the_command_runs_under_per_process_limits(tmp_path: Path) -> None:
    result = execute(tmp_path, "ulimit -c; ulimit -v; ulimit -f")
    assert result["output"].split() == ["0", str(4 * 1024 * 1024), str(2 * 1024 * 1024)]


def test_the_artifact_keeps_the_first_64_mib_and_says_it_is_incomplete(tmp_path: Path) -> None:
    total = MAX_ARTIFACT_BYTES + 1024 * 1024
    result = execute(tmp_path, f"head -c {total} /dev/zero")
    artifact = result["artifact"]
    assert (artifact["state"], artifact["observedBytes"]) == ("incomplete", total)
    assert (tmp_path / artifact["path"]).stat().st_size == MAX_ARTIFACT_BYTES
    assert result["exitCode"] == 0
