"""Edge cases a security review found: non-UTF-8 links, bodiless answers."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from capabilities import CapabilityError, NetworkPolicy, PlainFetch, WorkspaceFiles
from tests.support.https_server import LoopbackServer


def test_a_link_whose_target_is_not_utf8_is_invalid_path(tmp_path: Path) -> None:
    os.symlink(b"\xff\xfe/x", os.fsencode(tmp_path / "odd"))
    with pytest.raises(CapabilityError) as caught:
        asyncio.run(WorkspaceFiles(tmp_path).resolve_path({"filePath": "odd/more"}))
    assert caught.value.code == "invalid_path"


def test_head_answers_have_no_body_whatever_their_length(http_server: LoopbackServer) -> None:
    http_server.serve("/big", b"x" * 100, content_type="text/plain")
    fetch = PlainFetch(NetworkPolicy(allow_loopback=True), max_response_bytes=10)
    answer = asyncio.run(fetch.fetch({"url": http_server.url("/big"), "method": "HEAD"}))
    assert (answer["status"], answer["body"]) == (200, "")
