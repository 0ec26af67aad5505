"""Fixtures for the sdk tests: running real node scripts."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

NODE_TIMEOUT_SECONDS = 60

RunNode = Callable[..., Any]


@pytest.fixture(scope="session")
def node_executable() -> str:
    found = shutil.which("node")
    if found is None:
        pytest.fail("node (20 or newer) must be on PATH to run the sdk tests")
    return found


@pytest.fixture
def run_node(tmp_path: Path, node_executable: str) -> RunNode:
    """Run an ES module script with node and return the JSON it prints on its last line.

    Extra positional arguments reach the script as ``process.argv[2:]``.
    """
    counter = 0

    def run(source: str, *args: str) -> Any:
        nonlocal counter
        counter += 1
        script = tmp_path / f"script_{counter}.mjs"
        script.write_text(source, encoding="utf-8")
        completed = subprocess.run(
            [node_executable, str(script), *args],
            capture_output=True,
            text=True,
            timeout=NODE_TIMEOUT_SECONDS,
            check=False,
            cwd=tmp_path,
        )
        assert completed.returncode == 0, completed.stderr
        return json.loads(completed.stdout.strip().splitlines()[-1])

    return run
