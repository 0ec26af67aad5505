"""InMemoryWorkspaceFiles: the same results and codes as the disk workspace."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from capabilities import CapabilityError, InMemoryWorkspaceFiles


def run(method: Callable[[dict[str, Any]], Awaitable[dict[str, Any]]],
        request: dict[str, Any]) -> dict[str, Any]:
    return asyncio.run(method(request))


def code(method: Callable[[dict[str, Any]], Awaitable[dict[str, Any]]],
         request: dict[str, Any]) -> str:
    with pytest.raises(CapabilityError) as caught:
        run(method, request)
    assert caught.value.tag == "WorkspaceFileError"
    return caught.value.code


@pytest.fixture
def files() -> InMemoryWorkspaceFiles:
    return InMemoryWorkspaceFiles({"notes/a.md": "alpha\n", "big.txt": "x" * 51_201})


def test_read_write_remove_round_trip(files: InMemoryWorkspaceFiles) -> None:
    assert run(files.read_text, {"filePath": "/workspace/notes/a.md"}) == {
        "filePath": "/workspace/notes/a.md", "content": "alpha\n", "byteLength": 6,
    }
    assert run(files.write_text, {"filePath": "deep/new/é.md", "content": "é"}) == {
        "filePath": "deep/new/é.md", "byteLength": 2,
    }
    assert run(files.remove_file, {"filePath": "notes/a.md"}) == {"filePath": "notes/a.md"}
    assert files.files == {"big.txt": "x" * 51_201, "deep/new/é.md": "é"}


def test_failure_codes(files: InMemoryWorkspaceFiles) -> None:
    assert code(files.read_text, {"filePath": "missing.md"}) == "not_found"
    assert code(files.read_text, {"filePath": "notes"}) == "not_file"
    assert code(files.read_text, {"filePath": "big.txt"}) == "too_large"
    assert code(files.read_text, {"filePath": "notes/a.md", "maxBytes": 3}) == (
        "max_bytes_exceeded"
    )
    assert code(files.read_text, {"filePath": "notes/a.md", "maxBytes": 0}) == (
        "max_bytes_exceeded"
    )
    assert code(files.read_text, {"filePath": "/etc/passwd"}) == "invalid_path"
    assert code(files.read_text, {"filePath": "../outside"}) == "invalid_path"
    assert code(files.read_text, {"filePath": ""}) == "invalid_path"
    assert code(files.write_text, {"filePath": "notes", "content": "x"}) == "not_file"
    assert code(files.write_text, {"filePath": "notes/a.md/x", "content": "x"}) == "not_file"
    assert code(files.remove_file, {"filePath": "nope"}) == "not_found"
    assert code(files.read_directory, {"dirPath": "nope"}) == "not_found"
    assert code(files.read_directory, {"dirPath": "big.txt"}) == "not_file"
    assert code(files.read_directory, {"dirPath": ".", "offset": 0}) == "invalid_path"


def test_directory_pages_and_paths(files: InMemoryWorkspaceFiles) -> None:
    assert run(files.read_directory, {"dirPath": ".", "limit": 1}) == {
        "dirPath": ".", "entries": [{"name": "big.txt", "kind": "file"}], "offset": 1,
        "totalEntries": 2, "truncated": True,
    }
    assert run(files.read_directory, {"dirPath": "/workspace", "offset": 2}) == {
        "dirPath": "/workspace", "entries": [{"name": "notes", "kind": "directory"}],
        "offset": 2, "totalEntries": 2, "truncated": False,
    }
    assert run(files.resolve_path, {"filePath": "a.md", "cwd": "notes"}) == {
        "canonicalPath": "/workspace/notes/a.md", "resource": "a.md",
    }
    assert run(files.resolve_path, {"filePath": ".", "cwd": "notes"}) == {
        "canonicalPath": "/workspace/notes", "resource": ".",
    }
    assert run(files.resolve_path, {"filePath": "../big.txt", "cwd": "notes"}) == {
        "canonicalPath": "/workspace/big.txt", "resource": "/workspace/big.txt",
        "externalDirectory": {"resource": "/workspace/*", "save": "/workspace/*"},
    }
    assert code(files.resolve_path, {"filePath": "x", "cwd": "../up"}) == "invalid_path"
