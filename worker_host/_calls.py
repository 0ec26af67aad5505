"""Drives one guest operation from asyncio: run until blocked, perform, resume.

Guest code runs on a worker thread. When the guest's job queue drains with host
requests pending, control returns here; the requests run concurrently on the
event loop and the guest is resumed with whatever has happened since: results
of finished requests, and callbacks a running request wants delivered into the
guest (a shell command's `onOutput`). The call ends when the guest's operation
settles, when it stalls (awaits something the host will never deliver), or
when the call's wall-clock budget runs out.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import Any, Protocol

from ._errors import IsolateFault, WorkerHostError
from ._isolate import GuestAnswer, HostRequest, Isolate
from ._limits import IsolateLimits

plugin_log = logging.getLogger("worker_host.plugin")

QUESTION_DISMISSED = {"_tag": "QuestionDismissedError"}

# A guest request of this kind is the guest saying a callback finished.
CALLBACK_DONE = "callback.done"

Deliver = Callable[[Any], Awaitable[None]]


class GuestFailure(Exception):
    """A failure to deliver into the guest as a rejected promise.

    `failure` is the tagged shape the prelude rebuilds, such as
    ``{"_tag": "WorkspaceFileError", "code": "not_found"}``.
    """

    def __init__(self, failure: dict[str, Any]) -> None:
        super().__init__(failure.get("_tag", "failure"))
        self.failure = failure


class CallbackFailed(Exception):
    """A callback the host delivered into the guest threw or rejected."""


class HostOperations(Protocol):
    """What the host does for a guest's requests during one call."""

    async def perform(self, request: HostRequest, deliver: Deliver) -> Any:
        """Returns the JSON result, or raises `GuestFailure`.

        `deliver(value)` runs the callback the guest attached to this request
        with `value` and waits for it; it raises `CallbackFailed` when the
        callback threw.
        """
        ...


class NoCapabilities:
    """Timers only. Every capability answers as a host without it; questions
    are dismissed (no client can answer) and activity reports are dropped."""

    async def perform(self, request: HostRequest, deliver: Deliver) -> Any:
        if request.kind == "timer":
            await asyncio.sleep(timer_seconds(request.input))
            return None
        if request.kind == "askQuestion":
            raise GuestFailure(QUESTION_DISMISSED)
        if request.kind == "reportActivity":
            return None
        raise no_capability(request.kind)


def no_capability(kind: str) -> GuestFailure:
    """The contract's failure for a capability this host does not provide."""
    name = kind.split(".", 1)[0]
    return GuestFailure(
        {"_tag": "PluginError", "message": f"This host provides no {name} capability."}
    )


def timer_seconds(value: Any) -> float:
    ms = value.get("ms") if isinstance(value, dict) else None
    return max(0.0, float(ms)) / 1000 if isinstance(ms, int | float) else 0.0


@dataclass
class _Callback:
    request_id: int
    value: Any
    done: asyncio.Future[None]
    callback_id: int = 0


class _Call:
    """The host side of one guest operation: requests in flight and callbacks."""

    def __init__(self, operations: HostOperations, limits: IsolateLimits) -> None:
        self.operations = operations
        self.slots = asyncio.Semaphore(limits.max_concurrent_operations)
        self.budget = limits.max_operations
        self.events: asyncio.Queue[dict[str, Any] | _Callback] = asyncio.Queue()
        self.tasks: set[asyncio.Task[None]] = set()
        self.waiting: dict[int, _Callback] = {}
        self.next_callback = 1
        # Questions wait for a person with no time limit (the contract's
        # askQuestion); the call's wall-clock budget pauses meanwhile.
        self.asking = 0

    def start(self, request: HostRequest) -> None:
        if request.kind == CALLBACK_DONE:
            self._finish_callback(request.input)
            return

        async def deliver(value: Any) -> None:
            callback = _Callback(request.id, value, asyncio.get_running_loop().create_future())
            await self.events.put(callback)
            await callback.done

        asking = request.kind == "askQuestion"
        self.asking += asking
        self.budget -= 1
        over_budget = self.budget < 0

        async def run() -> None:
            try:
                if over_budget:
                    raise GuestFailure({"_tag": "PluginError",
                                        "message": "Too many host operations in one call."})
                async with self.slots:
                    value = await self.operations.perform(request, deliver)
                result = {"id": request.id, "ok": True, "value": value}
            except GuestFailure as failure:
                result = {"id": request.id, "ok": False, "error": failure.failure}
            except Exception:
                plugin_log.exception("host operation %s failed", request.kind)
                result = {"id": request.id, "ok": False,
                          "error": {"_tag": "PluginError", "message": "The host failed."}}
            finally:
                self.asking -= asking
            await self.events.put(result)

        task = asyncio.ensure_future(run())
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    def _finish_callback(self, payload: Any) -> None:
        if not isinstance(payload, dict):
            return
        callback = self.waiting.pop(payload.get("callbackId"), None)  # type: ignore[arg-type]
        if callback is None or callback.done.done():
            return
        if payload.get("ok") is True:
            callback.done.set_result(None)
        else:
            callback.done.set_exception(CallbackFailed())

    @property
    def busy(self) -> bool:
        return bool(self.tasks) or bool(self.waiting) or not self.events.empty()

    async def next_resume(self, timeout: float | None) -> dict[str, Any] | None:
        """Waits (with no limit when `timeout` is None) for the first event and
        takes every other ready one; None on timeout."""
        try:
            first = (await asyncio.wait_for(self.events.get(), timeout)
                     if timeout is None or timeout > 0 else None)
        except TimeoutError:
            first = None
        if first is None:
            return None
        events = [first]
        while not self.events.empty():
            events.append(self.events.get_nowait())
        results: list[dict[str, Any]] = []
        callbacks: list[dict[str, Any]] = []
        for event in events:
            if isinstance(event, _Callback):
                event.callback_id = self.next_callback
                self.next_callback += 1
                self.waiting[event.callback_id] = event
                callbacks.append({"callbackId": event.callback_id, "id": event.request_id,
                                  "value": event.value})
            else:
                results.append(event)
        return {"op": "resume", "results": results, "callbacks": callbacks}

    async def close(self) -> None:
        """Cancels what is still in flight and waits for it to wind down, so a
        cancelled operation's own cleanup (killing a shell command) finishes
        before the call returns."""
        for callback in self.waiting.values():
            if not callback.done.done():
                callback.done.cancel()
        tasks = list(self.tasks)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)


async def drive(
    isolate: Isolate,
    first_step: Callable[[], GuestAnswer],
    operations: HostOperations,
    *,
    executor: Executor | None,
    deadline: float,
    log_name: str,
    limits: IsolateLimits,
) -> GuestAnswer:
    """Runs `first_step` and every resumption until the operation settles.

    `deadline` is the event loop's time at which the whole call's wall-clock
    budget ends; `limits` bounds the host operations the call may make.
    Returns the settled answer (`done` or `failed`). Raises `IsolateFault`
    (`stalled`, or any fault of the isolate) and
    `WorkerHostError` with `timed_out` when the budget runs out while the
    guest waits.
    """
    loop = asyncio.get_running_loop()
    call = _Call(operations, limits)
    try:
        # Guest steps are not cut short here: the CPU deadline bounds each one,
        # and abandoning a thread inside the guest would race the isolate.
        answer = await loop.run_in_executor(executor, first_step)
        while True:
            _report(answer, log_name)
            if answer.status in ("done", "failed"):
                return answer
            for request in answer.requests:
                call.start(request)
            if answer.status == "stalled" or not call.busy:
                raise IsolateFault(
                    "stalled",
                    "The plugin's call never settled: it awaited something that never happens.",
                )
            waited_from = loop.time()
            person = call.asking > 0
            resume = await call.next_resume(None if person else deadline - loop.time())
            if person:
                deadline += loop.time() - waited_from
            if resume is None:
                raise WorkerHostError("timed_out", "The plugin's call ran past its time limit.")
            answer = await loop.run_in_executor(executor, isolate.call, resume)
    finally:
        await call.close()


def _report(answer: GuestAnswer, log_name: str) -> None:
    for entry in answer.logs:
        level = logging.getLevelName(entry["level"].upper())
        plugin_log.log(level if isinstance(level, int) else logging.INFO, "[%s] %s", log_name,
                       entry["line"])
    for kind in answer.late:
        plugin_log.warning("[%s] used %s after its call returned; refused", log_name, kind)
