"""The pytest plugin worker-host registers: the `plugin_harness` fixture.

Installed through the `pytest11` entry point, so a plugin author's tests get
the fixture without importing anything. See `worker_host.testing`.
"""

from __future__ import annotations

import pytest

from .testing import PluginHarness


@pytest.fixture
def plugin_harness(tmp_path_factory: pytest.TempPathFactory) -> PluginHarness:
    """A `PluginHarness` with an empty in-memory workspace.

    The compiled guest is cached for the whole test session.
    """
    return PluginHarness(tmp_path_factory.getbasetemp() / "worker-host-guest-cache")
