"""Fixtures shared by the whole test suite.

- ``tls_ca`` (session): a throwaway CA; ``tls_ca.ca_file`` is its PEM file.
- ``https_server``: a ``LoopbackServer`` speaking HTTPS with a certificate from
  ``tls_ca`` for localhost, 127.0.0.1 and ::1.
- ``http_server``: the same server over plain HTTP.

Both servers are closed at teardown. See ``tests/support/https_server.py``.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.https_server import LoopbackServer, ThrowawayCA


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
