"""WorkspaceFiles on real directories, files and symlinks: results, codes and escapes."""

from __future__ import annotations

import asyncio
import os
import socket
import stat
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from capabilities._errors import CapabilityError
from capabilities._limits import MAX_DIRECTORY_ENTRIES, MAX_FILE_READ_BYTES
from capabilities._workspace_files import WorkspaceFiles
from capabilities._workspace_paths import Cursor, Raced, Target

Method = Callable[[Any], Coroutine[Any, Any, dict[str, Any]]]
SECRET = b"outside secret\n"


@dataclass
class Workspace:
    files: WorkspaceFiles
    root: Path
    outside: Path

    def outside_state(self) -> dict[str, object]:
        """Everything under the outside directory: files by content, links by target."""
        state: dict[str, object] = {}
        for path in sorted(self.outside.rglob("*")):
            key = str(path.relative_to(self.outside))
            if path.is_symlink():
                state[key] = ("link", os.readlink(path))
            elif path.is_dir():
                state[key] = "dir"
            else:
                state[key] = path.read_bytes()
        return state


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    """A root with notes/a.md and other/b.md, beside an outside directory it must never touch."""
    root = tmp_path / "root"
    outside = tmp_path / "outside"
    (root / "notes").mkdir(parents=True)
    (root / "other").mkdir()
    (root / "notes" / "a.md").write_text("alpha\n")
    (root / "other" / "b.md").write_text("beta\n")
    (outside / "dir").mkdir(parents=True)
    (outside / "secret.txt").write_bytes(SECRET)
    (outside / "dir" / "inner.txt").write_bytes(SECRET)
    return Workspace(WorkspaceFiles(root), root, outside)


def run(method: Method, request: dict[str, Any]) -> dict[str, Any]:
    return asyncio.run(method(request))


def failure(method: Method, request: Any) -> str:
    """Runs a call that must fail and returns its code, after checking the failure's shape."""
    with pytest.raises(CapabilityError) as caught:
        asyncio.run(method(request))
    error = caught.value
    assert error.tag == "WorkspaceFileError"
    assert str(error) == f"Workspace file failed: {error.code}"
    assert error.to_guest() == {"_tag": "WorkspaceFileError", "code": error.code}
    return error.code


# resolve_path


def test_resolve_inside_the_workdir_is_relative(ws: Workspace) -> None:
    assert run(ws.files.resolve_path, {"filePath": "notes/a.md"}) == {
        "canonicalPath": "/workspace/notes/a.md",
        "resource": "notes/a.md",
    }
    assert run(ws.files.resolve_path, {"filePath": "a.md", "cwd": "notes"}) == {
        "canonicalPath": "/workspace/notes/a.md",
        "resource": "a.md",
    }
    assert run(ws.files.resolve_path, {"filePath": "/workspace/notes/a.md", "cwd": "."}) == {
        "canonicalPath": "/workspace/notes/a.md",
        "resource": "notes/a.md",
    }


def test_resolve_the_workdir_itself_is_dot(ws: Workspace) -> None:
    assert run(ws.files.resolve_path, {"filePath": "."}) == {
        "canonicalPath": "/workspace",
        "resource": ".",
    }
    assert run(ws.files.resolve_path, {"filePath": ".", "cwd": "/workspace/notes"}) == {
        "canonicalPath": "/workspace/notes",
        "resource": ".",
    }
    assert run(ws.files.resolve_path, {"filePath": "/workspace/notes/", "cwd": "notes/"}) == {
        "canonicalPath": "/workspace/notes",
        "resource": ".",
    }


def test_resolve_a_target_that_does_not_exist_yet(ws: Workspace) -> None:
    assert run(ws.files.resolve_path, {"filePath": "drafts/new/c.md", "cwd": "notes"}) == {
        "canonicalPath": "/workspace/notes/drafts/new/c.md",
        "resource": "drafts/new/c.md",
    }
    assert not (ws.root / "notes" / "drafts").exists()


def test_resolve_outside_the_workdir_names_a_file_targets_parent(ws: Workspace) -> None:
    for file_path in ("../other/b.md", "/workspace/other/b.md"):
        assert run(ws.files.resolve_path, {"filePath": file_path, "cwd": "notes"}) == {
            "canonicalPath": "/workspace/other/b.md",
            "resource": "/workspace/other/b.md",
            "externalDirectory": {"resource": "/workspace/other/*", "save": "/workspace/other/*"},
        }
    assert run(ws.files.resolve_path, {"filePath": "../other/new.md", "cwd": "notes"}) == {
        "canonicalPath": "/workspace/other/new.md",
        "resource": "/workspace/other/new.md",
        "externalDirectory": {"resource": "/workspace/other/*", "save": "/workspace/other/*"},
    }


def test_resolve_outside_the_workdir_names_an_existing_directory_itself(ws: Workspace) -> None:
    assert run(ws.files.resolve_path, {"filePath": "../other", "cwd": "notes"}) == {
        "canonicalPath": "/workspace/other",
        "resource": "/workspace/other",
        "externalDirectory": {"resource": "/workspace/other/*", "save": "/workspace/other/*"},
    }
    assert run(ws.files.resolve_path, {"filePath": "/workspace", "cwd": "notes"}) == {
        "canonicalPath": "/workspace",
        "resource": "/workspace",
        "externalDirectory": {"resource": "/workspace/*", "save": "/workspace/*"},
    }
    assert run(ws.files.resolve_path, {"filePath": "../b.md", "cwd": "notes"}) == {
        "canonicalPath": "/workspace/b.md",
        "resource": "/workspace/b.md",
        "externalDirectory": {"resource": "/workspace/*", "save": "/workspace/*"},
    }


def test_resolve_follows_symlinks_in_path_and_workdir(ws: Workspace) -> None:
    (ws.root / "docs").symlink_to("notes")
    (ws.root / "abs").symlink_to("/workspace/other")
    (ws.root / "notes" / "up").symlink_to("../other/b.md")

    assert run(ws.files.resolve_path, {"filePath": "docs/a.md"}) == {
        "canonicalPath": "/workspace/notes/a.md",
        "resource": "notes/a.md",
    }
    assert run(ws.files.resolve_path, {"filePath": "a.md", "cwd": "docs"}) == {
        "canonicalPath": "/workspace/notes/a.md",
        "resource": "a.md",
    }
    assert run(ws.files.resolve_path, {"filePath": "abs/later.md"}) == {
        "canonicalPath": "/workspace/other/later.md",
        "resource": "other/later.md",
    }
    assert run(ws.files.resolve_path, {"filePath": "up", "cwd": "notes"}) == {
        "canonicalPath": "/workspace/other/b.md",
        "resource": "/workspace/other/b.md",
        "externalDirectory": {"resource": "/workspace/other/*", "save": "/workspace/other/*"},
    }


def test_resolve_a_dangling_link_inside_names_its_future_target(ws: Workspace) -> None:
    (ws.root / "pending").symlink_to("notes/fresh.md")
    assert run(ws.files.resolve_path, {"filePath": "pending"}) == {
        "canonicalPath": "/workspace/notes/fresh.md",
        "resource": "notes/fresh.md",
    }


def test_resolve_through_a_file_appends_the_rest(ws: Workspace) -> None:
    assert run(ws.files.resolve_path, {"filePath": "notes/a.md/x"}) == {
        "canonicalPath": "/workspace/notes/a.md/x",
        "resource": "notes/a.md/x",
    }


def test_resolve_a_link_climbing_out_of_a_missing_directory_is_not_found(ws: Workspace) -> None:
    (ws.root / "odd").symlink_to("missing/../notes")
    assert failure(ws.files.resolve_path, {"filePath": "odd"}) == "not_found"


def test_resolve_normalizes_dot_dot_lexically(ws: Workspace) -> None:
    assert run(ws.files.resolve_path, {"filePath": "notes/../other/./b.md"}) == {
        "canonicalPath": "/workspace/other/b.md",
        "resource": "other/b.md",
    }
    assert run(ws.files.resolve_path, {"filePath": "/workspace/../workspace/notes"}) == {
        "canonicalPath": "/workspace/notes",
        "resource": "notes",
    }


WORKDIR_1024 = "/".join(["d" * 100] * 10) + "/" + "e" * 14  # no component over NAME_MAX


def test_workdir_of_1024_characters_is_accepted(ws: Workspace) -> None:
    assert len(WORKDIR_1024) == 1024
    assert run(ws.files.resolve_path, {"filePath": "x.md", "cwd": WORKDIR_1024}) == {
        "canonicalPath": f"/workspace/{WORKDIR_1024}/x.md",
        "resource": "x.md",
    }
    absolute = "/workspace/" + WORKDIR_1024[len("/workspace/") :]
    assert len(absolute) == 1024
    assert run(ws.files.resolve_path, {"filePath": "x", "cwd": absolute})["resource"] == "x"


@pytest.mark.parametrize(
    "cwd",
    [
        "",
        WORKDIR_1024 + "e",
        "/workspace/" + WORKDIR_1024[len("/workspace/") :] + "e",
        "\U0001f600" * 513,  # 1,026 UTF-16 code units in 513 code points
        "notes\\sub",
        "..",
        "../workspace",
        "notes/../other",
        "notes/..",
        "/workspace/..",
        "/",
        "/etc",
        "/workspaces/notes",
        "notes\0",
        "\ud800",
        5,
        None,
        ["notes"],
    ],
)
def test_invalid_workdirs(ws: Workspace, cwd: object) -> None:
    assert failure(ws.files.resolve_path, {"filePath": "a.md", "cwd": cwd}) == "invalid_path"


def test_workdir_escaping_through_a_symlink_is_invalid(ws: Workspace) -> None:
    (ws.root / "out").symlink_to(ws.outside)
    assert failure(ws.files.resolve_path, {"filePath": "a.md", "cwd": "out"}) == "invalid_path"
    assert failure(ws.files.resolve_path, {"filePath": "x", "cwd": "out/dir"}) == "invalid_path"


@pytest.mark.parametrize(
    "file_path",
    [
        "",
        "a\0b",
        "/etc/passwd",
        "/",
        "/workspaces",
        "../a.md",
        "/workspace/../etc",
        "\udc80",
        7,
        None,
        ["a"],
    ],
)
def test_invalid_paths_for_every_method(ws: Workspace, file_path: object) -> None:
    assert failure(ws.files.resolve_path, {"filePath": file_path}) == "invalid_path"
    assert failure(ws.files.read_text, {"filePath": file_path}) == "invalid_path"
    assert failure(ws.files.write_text, {"filePath": file_path, "content": "x"}) == "invalid_path"
    assert failure(ws.files.remove_file, {"filePath": file_path}) == "invalid_path"
    assert failure(ws.files.read_directory, {"dirPath": file_path}) == "invalid_path"


def test_missing_members_and_non_objects_are_invalid_paths(ws: Workspace) -> None:
    for method in (ws.files.resolve_path, ws.files.read_text, ws.files.remove_file):
        assert failure(method, {}) == "invalid_path"
        assert failure(method, {"path": "notes/a.md"}) == "invalid_path"
        assert failure(method, ["notes/a.md"]) == "invalid_path"
        assert failure(method, "notes/a.md") == "invalid_path"
    assert failure(ws.files.read_directory, {"filePath": "notes"}) == "invalid_path"
    assert failure(ws.files.write_text, {"filePath": "n.md"}) == "invalid_path"
    assert failure(ws.files.write_text, {"filePath": "n.md", "content": 5}) == "invalid_path"
    assert failure(ws.files.write_text, {"filePath": "n.md", "content": None}) == "invalid_path"
    assert not (ws.root / "n.md").exists()


def test_paths_longer_than_path_max_fail_as_io_and_create_nothing(ws: Workspace) -> None:
    long_path = "/".join(["p" * 200] * 21)  # 4,220 bytes
    assert failure(ws.files.read_text, {"filePath": long_path}) == "io"
    assert failure(ws.files.write_text, {"filePath": long_path, "content": "x"}) == "io"
    assert not (ws.root / ("p" * 200)).exists()


def test_a_custom_guest_root(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("alpha")
    (tmp_path / "abs").symlink_to("/srv/ws/docs")
    (tmp_path / "old").symlink_to("/workspace/docs")
    files = WorkspaceFiles(str(tmp_path), guest_root="/srv/ws/")

    assert files.guest_root == "/srv/ws"
    assert run(files.resolve_path, {"filePath": "abs/a.md"}) == {
        "canonicalPath": "/srv/ws/docs/a.md",
        "resource": "docs/a.md",
    }
    assert run(files.read_text, {"filePath": "/srv/ws/abs/a.md"})["content"] == "alpha"
    assert failure(files.read_text, {"filePath": "/workspace/docs/a.md"}) == "invalid_path"
    assert failure(files.read_text, {"filePath": "old/a.md"}) == "invalid_path"
    with pytest.raises(ValueError):
        WorkspaceFiles(tmp_path, guest_root="workspace")


def test_a_missing_root_is_io_without_naming_it(tmp_path: Path) -> None:
    files = WorkspaceFiles(tmp_path / "gone")
    with pytest.raises(CapabilityError) as caught:
        asyncio.run(files.read_text({"filePath": "a.md"}))
    assert caught.value.code == "io"
    assert caught.value.__cause__ is None
    assert caught.value.__suppress_context__


# read_text


def test_read_text(ws: Workspace) -> None:
    (ws.root / "notes" / "u.md").write_bytes("héllo ✓\n".encode())
    assert run(ws.files.read_text, {"filePath": "notes/u.md"}) == {
        "filePath": "notes/u.md",
        "content": "héllo ✓\n",
        "byteLength": 11,
    }
    assert run(ws.files.read_text, {"filePath": "/workspace/notes/./a.md"}) == {
        "filePath": "/workspace/notes/./a.md",
        "content": "alpha\n",
        "byteLength": 6,
    }
    (ws.root / "empty").write_bytes(b"")
    assert run(ws.files.read_text, {"filePath": "empty"}) == {
        "filePath": "empty",
        "content": "",
        "byteLength": 0,
    }


def test_read_text_failures(ws: Workspace) -> None:
    os.mkfifo(ws.root / "pipe")
    (ws.root / "bad.txt").write_bytes(b"ok \xff\xfe")
    assert failure(ws.files.read_text, {"filePath": "notes/missing.md"}) == "not_found"
    assert failure(ws.files.read_text, {"filePath": "missing/a.md"}) == "not_found"
    assert failure(ws.files.read_text, {"filePath": "notes"}) == "not_file"
    assert failure(ws.files.read_text, {"filePath": "/workspace"}) == "not_file"
    assert failure(ws.files.read_text, {"filePath": "pipe"}) == "not_file"
    assert failure(ws.files.read_text, {"filePath": "notes/a.md/x"}) == "not_file"
    assert failure(ws.files.read_text, {"filePath": "bad.txt"}) == "invalid_utf8"


def test_read_text_size_limit(ws: Workspace) -> None:
    (ws.root / "exact.txt").write_bytes(b"x" * MAX_FILE_READ_BYTES)
    (ws.root / "over.txt").write_bytes(b"x" * (MAX_FILE_READ_BYTES + 1))
    assert MAX_FILE_READ_BYTES == 51_200

    result = run(ws.files.read_text, {"filePath": "exact.txt"})
    assert result["byteLength"] == 51_200
    assert result["content"] == "x" * 51_200
    assert failure(ws.files.read_text, {"filePath": "over.txt"}) == "too_large"
    assert failure(ws.files.read_text, {"filePath": "over.txt", "maxBytes": 10**6}) == "too_large"


def test_read_text_max_bytes(ws: Workspace) -> None:
    (ws.root / "eleven.txt").write_bytes(b"hello world")
    (ws.root / "over.txt").write_bytes(b"x" * (MAX_FILE_READ_BYTES + 1))
    read = ws.files.read_text

    assert failure(read, {"filePath": "eleven.txt", "maxBytes": 10}) == "max_bytes_exceeded"
    assert run(read, {"filePath": "eleven.txt", "maxBytes": 11})["content"] == "hello world"
    assert run(read, {"filePath": "eleven.txt", "maxBytes": 11.0})["byteLength"] == 11
    assert run(read, {"filePath": "eleven.txt", "maxBytes": 10**6})["byteLength"] == 11
    assert run(read, {"filePath": "eleven.txt", "maxBytes": 2**53 - 1})["byteLength"] == 11
    assert failure(read, {"filePath": "over.txt", "maxBytes": 51_200}) == "max_bytes_exceeded"


@pytest.mark.parametrize("max_bytes", [0, -1, 1.5, "10", True, None, 2**53, float("inf"), [10]])
def test_read_text_max_bytes_must_be_a_positive_safe_integer(
    ws: Workspace, max_bytes: object
) -> None:
    assert failure(ws.files.read_text, {"filePath": "notes/a.md", "maxBytes": max_bytes}) == (
        "max_bytes_exceeded"
    )


# write_text


def test_write_text_creates_parents(ws: Workspace) -> None:
    result = run(ws.files.write_text, {"filePath": "new/deeper/c.md", "content": "héllo"})
    assert result == {"filePath": "new/deeper/c.md", "byteLength": 6}
    assert (ws.root / "new" / "deeper" / "c.md").read_bytes() == "héllo".encode()

    result = run(ws.files.write_text, {"filePath": "/workspace/top.md", "content": ""})
    assert result == {"filePath": "/workspace/top.md", "byteLength": 0}
    assert (ws.root / "top.md").read_bytes() == b""


def test_write_text_replaces_keeping_permission_bits_and_leaves_no_temporary_file(
    ws: Workspace,
) -> None:
    target = ws.root / "notes" / "a.md"
    target.chmod(0o640)
    result = run(ws.files.write_text, {"filePath": "notes/a.md", "content": "new ✓"})
    assert result == {"filePath": "notes/a.md", "byteLength": 7}
    assert target.read_text() == "new ✓"
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    assert sorted(p.name for p in (ws.root / "notes").iterdir()) == ["a.md"]


def test_write_text_encodes_lone_surrogates_as_replacement_characters(ws: Workspace) -> None:
    result = run(ws.files.write_text, {"filePath": "s.txt", "content": "a\ud800b"})
    assert result == {"filePath": "s.txt", "byteLength": 5}
    assert (ws.root / "s.txt").read_bytes() == "a\ufffdb".encode()


def test_write_text_failures(ws: Workspace) -> None:
    os.mkfifo(ws.root / "pipe")
    write = ws.files.write_text
    assert failure(write, {"filePath": "notes", "content": "x"}) == "not_file"
    assert failure(write, {"filePath": "/workspace", "content": "x"}) == "not_file"
    assert failure(write, {"filePath": "pipe", "content": "x"}) == "not_file"
    assert failure(write, {"filePath": "notes/a.md/x.md", "content": "x"}) == "not_file"
    assert failure(write, {"filePath": "notes/a.md/deep/x.md", "content": "x"}) == "not_file"
    assert (ws.root / "notes").is_dir()
    assert (ws.root / "notes" / "a.md").read_text() == "alpha\n"
    assert stat.S_ISFIFO((ws.root / "pipe").lstat().st_mode)


def test_write_text_through_a_symlink_updates_the_inside_target(ws: Workspace) -> None:
    (ws.root / "link.md").symlink_to("notes/a.md")
    (ws.root / "abs.md").symlink_to("/workspace/other/b.md")
    (ws.root / "fresh.md").symlink_to("notes/fresh.md")

    assert run(ws.files.write_text, {"filePath": "link.md", "content": "one"}) == {
        "filePath": "link.md",
        "byteLength": 3,
    }
    run(ws.files.write_text, {"filePath": "abs.md", "content": "two"})
    run(ws.files.write_text, {"filePath": "fresh.md", "content": "three"})

    assert (ws.root / "notes" / "a.md").read_text() == "one"
    assert (ws.root / "other" / "b.md").read_text() == "two"
    assert (ws.root / "notes" / "fresh.md").read_text() == "three"
    assert os.readlink(ws.root / "link.md") == "notes/a.md"
    assert os.readlink(ws.root / "abs.md") == "/workspace/other/b.md"


def test_write_text_never_writes_through_a_hard_link_to_outside(ws: Workspace) -> None:
    os.link(ws.outside / "secret.txt", ws.root / "hard.txt")
    run(ws.files.write_text, {"filePath": "hard.txt", "content": "mine"})
    assert (ws.root / "hard.txt").read_text() == "mine"
    assert (ws.outside / "secret.txt").read_bytes() == SECRET


# remove_file


def test_remove_file(ws: Workspace) -> None:
    assert run(ws.files.remove_file, {"filePath": "/workspace/notes/a.md"}) == {
        "filePath": "/workspace/notes/a.md"
    }
    assert not (ws.root / "notes" / "a.md").exists()
    assert (ws.root / "notes").is_dir()


def test_remove_file_failures(ws: Workspace) -> None:
    remove = ws.files.remove_file
    assert failure(remove, {"filePath": "notes/a.md.bak"}) == "not_found"
    assert failure(remove, {"filePath": "missing/a.md"}) == "not_found"
    assert failure(remove, {"filePath": "notes"}) == "not_file"
    assert failure(remove, {"filePath": "/workspace"}) == "not_file"
    assert failure(remove, {"filePath": "notes/a.md/x"}) == "not_file"
    assert (ws.root / "notes" / "a.md").read_text() == "alpha\n"


def test_remove_file_removes_a_symlink_not_its_target(ws: Workspace) -> None:
    (ws.root / "to-file").symlink_to("notes/a.md")
    (ws.root / "to-dir").symlink_to("notes")
    (ws.root / "dangling").symlink_to("nowhere")
    (ws.root / "to-outside").symlink_to(ws.outside / "secret.txt")
    before = ws.outside_state()

    for name in ("to-file", "to-dir", "dangling", "to-outside"):
        assert run(ws.files.remove_file, {"filePath": name}) == {"filePath": name}
        assert not os.path.lexists(ws.root / name)

    assert (ws.root / "notes" / "a.md").read_text() == "alpha\n"
    assert ws.outside_state() == before


def test_remove_file_through_a_symlinked_parent_inside(ws: Workspace) -> None:
    (ws.root / "docs").symlink_to("notes")
    run(ws.files.remove_file, {"filePath": "docs/a.md"})
    assert not (ws.root / "notes" / "a.md").exists()
    assert (ws.root / "docs").is_symlink()


# read_directory


def test_read_directory_sorts_and_reports_kinds(
    ws: Workspace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    box = ws.root / "box"
    box.mkdir()
    (box / "b.txt").write_text("b")
    (box / "B.txt").write_text("B")
    (box / "sub").mkdir()
    os.mkfifo(box / "fifo")
    monkeypatch.chdir(box)  # AF_UNIX paths are short; bind relative to the directory
    server = socket.socket(socket.AF_UNIX)
    try:
        server.bind("sock")
    finally:
        server.close()
    (box / "to-file").symlink_to("b.txt")
    (box / "to-dir").symlink_to("/workspace/notes")
    (box / "to-up").symlink_to("..")
    (box / "dangling").symlink_to("nowhere")
    (box / "to-outside-file").symlink_to(ws.outside / "secret.txt")
    (box / "to-outside-dir").symlink_to("../../outside")
    (box / "loop").symlink_to("loop")

    result = run(ws.files.read_directory, {"dirPath": "box"})

    assert result == {
        "dirPath": "box",
        "entries": [
            {"name": "B.txt", "kind": "file"},
            {"name": "b.txt", "kind": "file"},
            {"name": "dangling", "kind": "other"},
            {"name": "fifo", "kind": "other"},
            {"name": "loop", "kind": "other"},
            {"name": "sock", "kind": "other"},
            {"name": "sub", "kind": "directory"},
            {"name": "to-dir", "kind": "directory"},
            {"name": "to-file", "kind": "file"},
            {"name": "to-outside-dir", "kind": "other"},
            {"name": "to-outside-file", "kind": "other"},
            {"name": "to-up", "kind": "directory"},
        ],
        "offset": 1,
        "totalEntries": 12,
        "truncated": False,
    }


def test_read_directory_of_the_root_and_through_links(ws: Workspace) -> None:
    (ws.root / "docs").symlink_to("notes")
    expected_root = [
        {"name": "docs", "kind": "directory"},
        {"name": "notes", "kind": "directory"},
        {"name": "other", "kind": "directory"},
    ]
    for dir_path in ("/workspace", ".", "/workspace/"):
        result = run(ws.files.read_directory, {"dirPath": dir_path})
        assert result["entries"] == expected_root
        assert result["dirPath"] == dir_path
    assert run(ws.files.read_directory, {"dirPath": "docs"})["entries"] == [
        {"name": "a.md", "kind": "file"}
    ]


def test_read_directory_names_sort_by_utf16_and_undecodable_bytes_are_replaced(
    ws: Workspace,
) -> None:
    box = ws.root / "box"
    box.mkdir()
    for name in ("\uff61", "\U0001f600", "z"):
        (box / name).write_text("")
    os.close(os.open(os.fsencode(box) + b"/y\xff", os.O_CREAT | os.O_WRONLY, 0o644))

    entries = run(ws.files.read_directory, {"dirPath": "box"})["entries"]

    assert [entry["name"] for entry in entries] == ["y\ufffd", "z", "\U0001f600", "\uff61"]


def test_read_directory_pages(ws: Workspace) -> None:
    big = ws.root / "big"
    big.mkdir()
    names = [f"f{index:05d}" for index in range(MAX_DIRECTORY_ENTRIES + 1)]
    for name in names:
        (big / name).touch()
    listing = ws.files.read_directory

    first = run(listing, {"dirPath": "big"})
    assert len(first["entries"]) == 2000
    assert first["entries"][0] == {"name": "f00000", "kind": "file"}
    assert first["entries"][-1] == {"name": "f01999", "kind": "file"}
    assert (first["offset"], first["totalEntries"], first["truncated"]) == (1, 2001, True)

    last = run(listing, {"dirPath": "big", "offset": 2001})
    assert last["entries"] == [{"name": "f02000", "kind": "file"}]
    assert (last["offset"], last["totalEntries"], last["truncated"]) == (2001, 2001, False)

    capped = run(listing, {"dirPath": "big", "offset": 2, "limit": 5000})
    assert [e["name"] for e in capped["entries"]] == names[1:2001]
    assert (capped["totalEntries"], capped["truncated"]) == (2001, False)

    middle = run(listing, {"dirPath": "big", "offset": 1999, "limit": 2})
    assert [e["name"] for e in middle["entries"]] == ["f01998", "f01999"]
    assert (middle["offset"], middle["truncated"]) == (1999, True)

    past = run(listing, {"dirPath": "big", "offset": 5000, "limit": 1.0})
    assert past == {
        "dirPath": "big",
        "entries": [],
        "offset": 5000,
        "totalEntries": 2001,
        "truncated": False,
    }


@pytest.mark.parametrize("value", [0, -1, 1.5, "1", True, None, float("nan"), [1]])
def test_read_directory_offset_and_limit_are_checked_before_reading(
    ws: Workspace, value: object
) -> None:
    listing = ws.files.read_directory
    for member in ("offset", "limit"):
        assert failure(listing, {"dirPath": "notes", member: value}) == "invalid_path"
        assert failure(listing, {"dirPath": "missing", member: value}) == "invalid_path"
        assert failure(listing, {"dirPath": "notes/a.md", member: value}) == "invalid_path"


def test_read_directory_failures(ws: Workspace) -> None:
    os.mkfifo(ws.root / "pipe")
    (ws.root / "to-file").symlink_to("notes/a.md")
    (ws.root / "dangling").symlink_to("nowhere")
    listing = ws.files.read_directory
    assert failure(listing, {"dirPath": "missing"}) == "not_found"
    assert failure(listing, {"dirPath": "missing/deeper"}) == "not_found"
    assert failure(listing, {"dirPath": "dangling"}) == "not_found"
    assert failure(listing, {"dirPath": "notes/a.md"}) == "not_file"
    assert failure(listing, {"dirPath": "to-file"}) == "not_file"
    assert failure(listing, {"dirPath": "pipe"}) == "not_file"
    assert failure(listing, {"dirPath": "notes/a.md/x"}) == "not_file"


# symlink escapes


ESCAPES = {
    "absolute host path to a file": ("abs-file", "{outside}/secret.txt"),
    "absolute host path to a directory": ("abs-dir", "{outside}"),
    "relative ../ to a file": ("rel-file", "../outside/secret.txt"),
    "relative ../../ from a subdirectory": ("notes/deep", "../../outside/secret.txt"),
    "relative ../ to a directory": ("rel-dir", "../outside"),
    "absolute guest path climbing out": ("guest-up", "/workspace/../outside"),
    "absolute guest path of another root": ("guest-other", "/workspaces/x"),
}


@pytest.fixture
def escapes(ws: Workspace) -> Iterator[Workspace]:
    """Every kind of escaping link, plus a chain that ends outside; the outside must not change."""
    for link, target in ESCAPES.values():
        (ws.root / link).symlink_to(target.format(outside=ws.outside))
    (ws.root / "chain1").symlink_to("chain2")
    (ws.root / "chain2").symlink_to("notes/chain3")
    (ws.root / "notes" / "chain3").symlink_to("../abs-dir")
    before = ws.outside_state()
    yield ws
    assert ws.outside_state() == before
    assert sorted(p.name for p in ws.outside.iterdir()) == ["dir", "secret.txt"]


ESCAPE_PATHS = [
    "abs-file",
    "abs-dir/secret.txt",
    "abs-dir/dir/inner.txt",
    "rel-file",
    "notes/deep",
    "rel-dir/secret.txt",
    "rel-dir/dir/new.txt",
    "guest-up/secret.txt",
    "guest-other",
    "chain1/secret.txt",
    "chain1/dir/inner.txt",
    "/workspace/chain1/new/deeper.txt",
]


@pytest.mark.parametrize("file_path", ESCAPE_PATHS)
def test_escaping_links_cannot_be_read_written_removed_or_resolved(
    escapes: Workspace, file_path: str
) -> None:
    files = escapes.files
    assert failure(files.resolve_path, {"filePath": file_path}) == "invalid_path"
    assert failure(files.read_text, {"filePath": file_path}) == "invalid_path"
    assert failure(files.write_text, {"filePath": file_path, "content": "pwned"}) == "invalid_path"
    if not (escapes.root / file_path.removeprefix("/workspace/")).is_symlink():
        # A final link is removed as a link (tested separately); anything through one is refused.
        assert failure(files.remove_file, {"filePath": file_path}) == "invalid_path"


@pytest.mark.parametrize("dir_path", ["abs-dir", "abs-dir/dir", "rel-dir", "chain1", "guest-up"])
def test_escaping_links_cannot_be_listed(escapes: Workspace, dir_path: str) -> None:
    assert failure(escapes.files.read_directory, {"dirPath": dir_path}) == "invalid_path"
    assert failure(escapes.files.resolve_path, {"filePath": dir_path}) == "invalid_path"


def test_escaping_links_are_removed_as_links(escapes: Workspace) -> None:
    for name in ("abs-file", "abs-dir", "rel-dir", "chain1"):
        run(escapes.files.remove_file, {"filePath": name})
        assert not os.path.lexists(escapes.root / name)


def test_escaping_links_list_as_other(escapes: Workspace) -> None:
    entries = run(escapes.files.read_directory, {"dirPath": "/workspace"})["entries"]
    kinds = {entry["name"]: entry["kind"] for entry in entries}
    assert kinds == {
        "abs-dir": "other",
        "abs-file": "other",
        "chain1": "other",
        "chain2": "other",
        "guest-other": "other",
        "guest-up": "other",
        "notes": "directory",
        "other": "directory",
        "rel-dir": "other",
        "rel-file": "other",
    }


def test_a_symlink_to_a_file_inside_is_followed(ws: Workspace) -> None:
    (ws.root / "other" / "to-a").symlink_to("../notes/a.md")
    (ws.root / "abs-a").symlink_to("/workspace/notes/a.md")
    for path in ("other/to-a", "abs-a"):
        assert run(ws.files.read_text, {"filePath": path}) == {
            "filePath": path,
            "content": "alpha\n",
            "byteLength": 6,
        }
        assert run(ws.files.resolve_path, {"filePath": path})["canonicalPath"] == (
            "/workspace/notes/a.md"
        )


def chain(root: Path, length: int) -> None:
    """link0 -> link1 -> ... -> link{length-1} -> notes/a.md: `length` links from link0."""
    for index in range(length):
        target = f"link{index + 1}" if index + 1 < length else "notes/a.md"
        (root / f"link{index}").symlink_to(target)


def test_forty_links_are_followed_and_the_forty_first_is_invalid(ws: Workspace) -> None:
    chain(ws.root, 41)
    assert run(ws.files.read_text, {"filePath": "link1"})["content"] == "alpha\n"
    assert run(ws.files.resolve_path, {"filePath": "link1"})["canonicalPath"] == (
        "/workspace/notes/a.md"
    )
    assert failure(ws.files.read_text, {"filePath": "link0"}) == "invalid_path"
    assert failure(ws.files.resolve_path, {"filePath": "link0"}) == "invalid_path"
    assert failure(ws.files.write_text, {"filePath": "link0", "content": "x"}) == "invalid_path"
    assert failure(ws.files.read_directory, {"dirPath": "link0/x"}) == "invalid_path"
    assert (ws.root / "notes" / "a.md").read_text() == "alpha\n"


def test_a_link_loop_is_invalid(ws: Workspace) -> None:
    (ws.root / "ping").symlink_to("pong")
    (ws.root / "pong").symlink_to("ping")
    (ws.root / "self").symlink_to("self/more")
    for path in ("ping", "self", "pong/x"):
        assert failure(ws.files.resolve_path, {"filePath": path}) == "invalid_path"
        assert failure(ws.files.read_text, {"filePath": path}) == "invalid_path"
        assert failure(ws.files.write_text, {"filePath": path, "content": "x"}) == "invalid_path"
        assert failure(ws.files.read_directory, {"dirPath": path}) == "invalid_path"
    assert failure(ws.files.remove_file, {"filePath": "pong/x"}) == "invalid_path"
    assert run(ws.files.remove_file, {"filePath": "ping"}) == {"filePath": "ping"}


def test_dot_dot_in_links_climbs_real_directories_but_never_above_the_root(
    ws: Workspace,
) -> None:
    depth = 20  # deeper than the walk keeps descriptors for
    deep = ws.root.joinpath(*[f"d{index}" for index in range(depth)])
    deep.mkdir(parents=True)
    (ws.root / "top.txt").write_text("top")
    (deep / "up").symlink_to("../" * depth + "top.txt")
    (deep / "mid").symlink_to("../" * 17 + "d3/d4")  # back above the kept descriptors
    (deep / "over").symlink_to("../" * (depth + 1) + "root/top.txt")
    deep_guest = "/".join(f"d{index}" for index in range(depth))

    assert run(ws.files.read_text, {"filePath": f"{deep_guest}/up"})["content"] == "top"
    assert run(ws.files.resolve_path, {"filePath": f"{deep_guest}/mid/x"}) == {
        "canonicalPath": "/workspace/d0/d1/d2/d3/d4/x",
        "resource": "d0/d1/d2/d3/d4/x",
    }
    assert run(ws.files.write_text, {"filePath": f"{deep_guest}/mid/x", "content": "x"}) == {
        "filePath": f"{deep_guest}/mid/x",
        "byteLength": 1,
    }
    assert (ws.root / "d0" / "d1" / "d2" / "d3" / "d4" / "x").read_text() == "x"
    assert failure(ws.files.read_text, {"filePath": f"{deep_guest}/over"}) == "invalid_path"


# the tree changing under an operation


def swap_after_first_walk(monkeypatch: pytest.MonkeyPatch, swap: Callable[[], None]) -> None:
    """Runs `swap` right after the first walk, between resolution and the operation."""
    original = Cursor.walk
    swapped: list[bool] = []

    def walk(self: Cursor, parts: list[str], **options: bool) -> Target:
        target = original(self, parts, **options)
        if not swapped:
            swapped.append(True)
            swap()
        return target

    monkeypatch.setattr(Cursor, "walk", walk)


@pytest.mark.parametrize("operation", ["read", "write", "remove", "list"])
def test_a_directory_swapped_for_an_escaping_link_after_the_walk(
    ws: Workspace, monkeypatch: pytest.MonkeyPatch, operation: str
) -> None:
    (ws.root / "notes" / "inner").mkdir()
    (ws.root / "notes" / "inner" / "c.md").write_text("gamma")
    before = ws.outside_state()

    def swap() -> None:
        (ws.root / "notes").rename(ws.root / "moved")
        (ws.root / "notes").symlink_to(ws.outside)

    swap_after_first_walk(monkeypatch, swap)
    files = ws.files
    if operation == "read":
        assert run(files.read_text, {"filePath": "notes/a.md"})["content"] == "alpha\n"
    elif operation == "write":
        run(files.write_text, {"filePath": "notes/secret.txt", "content": "pwned"})
        assert (ws.root / "moved" / "secret.txt").read_text() == "pwned"
    elif operation == "remove":
        run(files.remove_file, {"filePath": "notes/a.md"})
        assert not (ws.root / "moved" / "a.md").exists()
    else:
        entries = run(files.read_directory, {"dirPath": "notes/inner"})["entries"]
        assert entries == [{"name": "c.md", "kind": "file"}]
    assert ws.outside_state() == before


def test_a_listed_directory_swapped_for_an_escaping_link_after_the_walk(
    ws: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    def swap() -> None:
        (ws.root / "notes").rename(ws.root / "moved")
        (ws.root / "notes").symlink_to(ws.outside)

    swap_after_first_walk(monkeypatch, swap)
    # The open refuses the link; the retried walk sees it and refuses the escape.
    assert failure(ws.files.read_directory, {"dirPath": "notes"}) == "invalid_path"


@pytest.mark.parametrize("operation", ["read", "write", "remove"])
def test_a_file_swapped_for_an_escaping_link_after_the_walk(
    ws: Workspace, monkeypatch: pytest.MonkeyPatch, operation: str
) -> None:
    before = ws.outside_state()
    link = ws.root / "notes" / "a.md"

    def swap() -> None:
        link.unlink()
        link.symlink_to(ws.outside / "secret.txt")

    swap_after_first_walk(monkeypatch, swap)
    files = ws.files
    if operation == "read":
        # The open refuses the link; the retried walk sees it and refuses the escape.
        assert failure(files.read_text, {"filePath": "notes/a.md"}) == "invalid_path"
    elif operation == "write":
        run(files.write_text, {"filePath": "notes/a.md", "content": "pwned"})
        assert not link.is_symlink()
        assert link.read_text() == "pwned"
    else:
        run(files.remove_file, {"filePath": "notes/a.md"})
        assert not os.path.lexists(link)
    assert ws.outside_state() == before


def test_a_tree_that_keeps_changing_fails_as_io(
    ws: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    def walk(self: Cursor, parts: list[str], **options: bool) -> Target:
        raise Raced

    monkeypatch.setattr(Cursor, "walk", walk)
    assert failure(ws.files.read_text, {"filePath": "notes/a.md"}) == "io"


# resources


def test_no_descriptor_outlives_a_call(ws: Workspace) -> None:
    deep = ws.root.joinpath(*[f"d{index}" for index in range(20)])
    deep.mkdir(parents=True)
    (deep / "up").symlink_to("../" * 20 + "notes/a.md")
    (ws.root / "out").symlink_to(ws.outside)
    deep_guest = "/".join(f"d{index}" for index in range(20))
    before = len(os.listdir("/proc/self/fd"))

    async def calls() -> None:
        files = ws.files
        await files.read_text({"filePath": f"{deep_guest}/up"})
        await files.write_text({"filePath": f"{deep_guest}/new/deeper/x.md", "content": "x"})
        await files.read_directory({"dirPath": deep_guest})
        await files.resolve_path({"filePath": "x", "cwd": deep_guest})
        await files.remove_file({"filePath": f"{deep_guest}/new/deeper/x.md"})
        for request in ({"filePath": "out/secret.txt"}, {"filePath": "missing/x"}):
            with pytest.raises(CapabilityError):
                await files.read_text(request)

    asyncio.run(calls())
    assert len(os.listdir("/proc/self/fd")) == before


def test_concurrent_calls(ws: Workspace) -> None:
    async def calls() -> list[dict[str, Any]]:
        files = ws.files
        await asyncio.gather(
            *(
                files.write_text({"filePath": f"many/{index}.txt", "content": str(index)})
                for index in range(50)
            )
        )
        return await asyncio.gather(
            *(files.read_text({"filePath": f"many/{index}.txt"}) for index in range(50))
        )

    results = asyncio.run(calls())
    assert [result["content"] for result in results] == [str(index) for index in range(50)]
