"""Drives one guest operation from asyncio: run until blocked, perform, resume.

Guest code runs on a worker thread. When the guest's job queue drains with host
requests pending, control returns here; the requests run concurrently on the
event loop and the guest is resumed as soon as any of them completes. The call
ends when the guest's operation settles, when it stalls (awaits something the
host will never deliver), or when the call's wall-clock budget runs out.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from concurrent.futures import Executor
from typing import Any, Protocol

from ._errors import IsolateFault, WorkerHostError
from ._isolate import GuestAnswer, HostRequest, Isolate

plugin_log = logging.getLogger("worker_host.plugin")


class GuestFailure(Exception):
    """A failure to deliver into the guest as a rejected promise.

    `failure` is the tagged shape the prelude rebuilds, such as
    ``{"_tag": "WorkspaceFileError", "code": "not_found"}``.
    """

    def __init__(self, failure: dict[str, Any]) -> None:
        super().__init__(failure.get("_tag", "failure"))
        self.failure = failure


class HostOperations(Protocol):
    """What the host does for a guest's requests during one call."""

    async def perform(self, request: HostRequest) -> Any:
        """Returns the JSON result, or raises `GuestFailure`."""
        ...


class NoCapabilities:
    """Timers only; every capability answers as a host without it."""

    async def perform(self, request: HostRequest) -> Any:
        if request.kind == "timer":
            await asyncio.sleep(_timer_seconds(request.input))
            return None
        name = request.kind.split(".", 1)[0]
        raise GuestFailure(
            {"_tag": "PluginError", "message": f"This host provides no {name} capability."}
        )


def _timer_seconds(value: Any) -> float:
    ms = value.get("ms") if isinstance(value, dict) else None
    return max(0.0, float(ms)) / 1000 if isinstance(ms, int | float) else 0.0


async def drive(
    isolate: Isolate,
    first_step: Callable[[], GuestAnswer],
    operations: HostOperations,
    *,
    executor: Executor | None,
    wall_time_seconds: float,
    log_name: str,
) -> GuestAnswer:
    """Runs `first_step` and every resumption until the operation settles.

    Returns the settled answer (`done` or `failed`). Raises `IsolateFault`
    (`stalled`, or any fault of the isolate) and `WorkerHostError` with
    `timed_out` when the wall-clock budget runs out.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wall_time_seconds
    in_flight: dict[asyncio.Task[Any], int] = {}
    try:
        # Guest steps are not cut short here: the CPU deadline bounds each one,
        # and abandoning a thread inside the guest would race the isolate.
        answer = await loop.run_in_executor(executor, first_step)
        while True:
            _forward_logs(answer, log_name)
            if answer.status in ("done", "failed"):
                return answer
            for request in answer.requests:
                in_flight[asyncio.ensure_future(operations.perform(request))] = request.id
            if answer.status == "stalled" or not in_flight:
                raise IsolateFault(
                    "stalled",
                    "The plugin's call never settled: it awaited something that never happens.",
                )
            remaining = deadline - loop.time()
            done: set[asyncio.Task[Any]] = set()
            if remaining > 0:
                done, _ = await asyncio.wait(
                    in_flight, timeout=remaining, return_when=asyncio.FIRST_COMPLETED
                )
            if not done:
                raise WorkerHostError("timed_out", "The plugin's call ran past its time limit.")
            results = [_result_of(task, in_flight.pop(task)) for task in done]
            request = {"op": "resume", "results": results}
            answer = await loop.run_in_executor(executor, isolate.call, request)
    finally:
        for task in in_flight:
            task.cancel()


def _result_of(task: asyncio.Task[Any], request_id: int) -> dict[str, Any]:
    exc = task.exception()
    if exc is None:
        return {"id": request_id, "ok": True, "value": task.result()}
    if isinstance(exc, GuestFailure):
        return {"id": request_id, "ok": False, "error": exc.failure}
    plugin_log.error("host operation failed", exc_info=exc)
    return {"id": request_id, "ok": False, "error": {"_tag": "PluginError", "message": "failed"}}


def _forward_logs(answer: GuestAnswer, log_name: str) -> None:
    for entry in answer.logs:
        level = logging.getLevelName(entry["level"].upper())
        plugin_log.log(level if isinstance(level, int) else logging.INFO, "[%s] %s", log_name,
                       entry["line"])
