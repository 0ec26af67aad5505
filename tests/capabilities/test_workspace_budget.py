"""A guest cannot make one workspace walk or listing arbitrarily expensive."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from capabilities import CapabilityError, WorkspaceFiles


def test_a_link_of_many_steps_is_refused(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "f.txt").write_text("x")
    # Each link holds 1,600 components; chained, they exceed the walk's budget.
    hops = "d/../" * 800
    (tmp_path / "l0").symlink_to(hops + "d/f.txt")
    for index in range(1, 5):
        (tmp_path / f"l{index}").symlink_to(hops + f"l{index - 1}")
    files = WorkspaceFiles(tmp_path)
    assert asyncio.run(files.read_text({"filePath": "l0"}))["content"] == "x"
    with pytest.raises(CapabilityError) as caught:
        asyncio.run(files.read_text({"filePath": "l4"}))
    assert caught.value.code == "invalid_path"


def test_a_huge_directory_pages_without_holding_every_entry(tmp_path: Path) -> None:
    big = tmp_path / "big"
    big.mkdir()
    for index in range(20_000):
        os.close(os.open(big / f"n{index:05d}", os.O_CREAT | os.O_WRONLY))
    files = WorkspaceFiles(tmp_path)
    page = asyncio.run(files.read_directory({"dirPath": "big", "offset": 19_999, "limit": 5}))
    assert page["totalEntries"] == 20_000
    assert [entry["name"] for entry in page["entries"]] == ["n19998", "n19999"]
    assert page["truncated"] is False
