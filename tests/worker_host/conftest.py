"""Fixtures for the worker_host tests.

- ``guest_runtime`` (session): one compiled guest for the whole run (compiling
  takes a noticeable fraction of a second), cached in a temporary directory.
- ``plugin_runner``: a `PluginRunner` with default limits except a short CPU budget,
  so a test that loops by mistake fails fast.
"""

from __future__ import annotations

import pytest

from worker_host import GuestRuntime, IsolateLimits, PluginRunner


@pytest.fixture(scope="session")
def guest_runtime(tmp_path_factory: pytest.TempPathFactory) -> GuestRuntime:
    return GuestRuntime(tmp_path_factory.mktemp("guest-cache"))


@pytest.fixture
def plugin_runner(guest_runtime: GuestRuntime) -> PluginRunner:
    return PluginRunner(guest_runtime, IsolateLimits(cpu_time_ms=1_000, wall_time_ms=5_000))
