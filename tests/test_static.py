"""The static checks STYLE.md asks for, run as part of the suite."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *args], cwd=REPO, capture_output=True, text=True)


def test_mypy_strict_on_the_packages() -> None:
    done = run("mypy")
    assert done.returncode == 0, done.stdout + done.stderr


def test_ruff_on_the_whole_tree() -> None:
    done = run("ruff", "check", ".", "--output-format", "concise")
    assert done.returncode == 0, done.stdout + done.stderr
