"""Fixtures shared by the whole test suite.

- ``tls_ca`` (session): a throwaway CA; ``tls_ca.ca_file`` is its PEM file.
- ``https_server``: a ``LoopbackServer`` speaking HTTPS with a certificate from
  ``tls_ca`` for localhost, 127.0.0.1 and ::1.
- ``http_server``: the same server over plain HTTP.

Both servers are closed at teardown. See ``tests/support/https_server.py``.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

# Test directories are named after the packages they test (tests/bundle_loader,
# ...). In pytest's default "prepend" import mode tests/ is on sys.path, and
# there such a directory would be imported as an empty namespace package in
# place of the real one: the editable install's finder only runs after the
# path search. A regular package anywhere on sys.path beats a namespace
# portion, so having the repository root on sys.path restores the real
# packages (and makes ``tests.support`` importable in any import mode).
_REPO_ROOT = str(Path(__file__).resolve().parent.parent)
if _REPO_ROOT not in sys.path:
    sys.path.append(_REPO_ROOT)

from tests.support.https_server import LoopbackServer, ThrowawayCA  # noqa: E402


@pytest.fixture(scope="session")
def tls_ca(tmp_path_factory: pytest.TempPathFactory) -> ThrowawayCA:
    return ThrowawayCA(tmp_path_factory.mktemp("tls-ca"))


@pytest.fixture
def https_server(tls_ca: ThrowawayCA) -> Iterator[LoopbackServer]:
    with LoopbackServer(tls=tls_ca.server_context()) as server:
        yield server


@pytest.fixture
def http_server() -> Iterator[LoopbackServer]:
    with LoopbackServer() as server:
        yield server
