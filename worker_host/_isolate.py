"""One isolate: a fresh Wasm instance of the guest running one bundle for one call.

The methods here are synchronous and run guest code on the calling thread
(wasmtime releases the GIL while it does); `_calls` drives them from asyncio.
An isolate that trapped or ran out of memory is discarded: every later use
raises `IsolateFault`.
"""

from __future__ import annotations

import json
import math
import os
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Literal

import wasmtime

from ._errors import IsolateFault
from ._limits import IsolateLimits
from ._runtime import EPOCH_TICK_SECONDS, GuestRuntime, export_func, export_memory

_WH_OK, _WH_ERROR, _WH_OOM = 0, 1, 2

STACK_OVERFLOW = ("stack_overflow", "The plugin overflowed its stack.")
_TRAP_FAULTS = {
    wasmtime.TrapCode.INTERRUPT: (
        "cpu_time_exceeded",
        "The plugin ran past its CPU time limit.",
    ),
    wasmtime.TrapCode.STACK_OVERFLOW: STACK_OVERFLOW,
}
_OUT_OF_MEMORY = ("memory_limit_exceeded", "The plugin ran past its memory limit.")

Status = Literal["done", "failed", "blocked", "stalled"]


@dataclass(frozen=True)
class HostRequest:
    """One operation the guest asked the host to perform (a timer, a capability)."""

    id: int
    kind: str
    input: Any


@dataclass(frozen=True)
class GuestAnswer:
    """The state of the isolate's current operation after the guest yielded."""

    status: Status
    value: Any = None
    error: dict[str, Any] | None = None
    requests: tuple[HostRequest, ...] = ()
    logs: tuple[dict[str, str], ...] = field(default=())
    late: tuple[str, ...] = ()


class Isolate:
    """A fresh guest instance with the prelude loaded; see the module docstring.

    Raises `IsolateFault` with `cpu_time_exceeded`, `memory_limit_exceeded`,
    `stack_overflow`, `output_too_large`, `guest_trapped` or `guest_protocol`.
    """

    def __init__(self, runtime: GuestRuntime, limits: IsolateLimits) -> None:
        runtime.ensure_ticker()
        self._limits = limits
        self._cpu_used = 0.0
        self._closed = False
        # Held while guest code runs, so close() from another thread waits for
        # the current entry (bounded by the CPU deadline) instead of racing it.
        self._lock = threading.RLock()
        self._store = wasmtime.Store(runtime.engine)
        self._store.set_wasi(wasmtime.WasiConfig())
        self._store.set_limits(memory_size=limits.memory_bytes)
        instance = runtime.instance_pre.instantiate(self._store)
        exports = instance.exports(self._store)
        self._memory = export_memory(exports)
        self._alloc = export_func(exports, "wh_alloc")
        self._result_ptr = export_func(exports, "wh_result_ptr")
        self._result_len = export_func(exports, "wh_result_len")
        self._load = export_func(exports, "wh_load")
        self._call = export_func(exports, "wh_call")
        # The module is a snapshot taken after the runtime and prelude started:
        # only the per-isolate settings remain (stack limit, random seed).
        self._enter(export_func(exports, "wh_set_max_stack"), limits.js_stack_bytes)
        seed = [int.from_bytes(os.urandom(4), "little") for _ in range(4)]
        self.call({"op": "seed", "seed": seed})

    def load(self, source: bytes) -> GuestAnswer:
        """Compiles and evaluates the bundle as an ES module.

        A bundle that does not compile answers `failed` with the syntax error
        as the (log-only) message.
        """
        pointer, length = self._write(source)
        status = self._enter(self._load, pointer, length)
        if status == _WH_ERROR:
            return GuestAnswer("failed", error={"_tag": "Thrown", "message": self._read_text()})
        return self._answer(status)

    def call(self, request: dict[str, Any]) -> GuestAnswer:
        """Sends one request (setup, invoke or resume) and runs until the guest yields."""
        # ASCII escapes keep lone surrogates (valid in JSON and JS) encodable.
        pointer, length = self._write(json.dumps(request).encode())
        return self._answer(self._enter(self._call, pointer, length))

    def close(self) -> None:
        """Releases the instance. Safe to call twice."""
        self._discard()

    def __enter__(self) -> Isolate:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- internals ----------------------------------------------------------

    def _discard(self) -> None:
        with self._lock:
            if not self._closed:
                self._closed = True
                self._store.close()

    def _check_open(self) -> None:
        if self._closed:
            raise IsolateFault("isolate_closed", "The isolate was already discarded.")

    def _enter(self, func: wasmtime.Func, *args: int) -> int:
        """Runs guest code with the CPU time left on this isolate's budget."""
        with self._lock:
            return self._enter_locked(func, *args)

    def _enter_locked(self, func: wasmtime.Func, *args: int) -> int:
        self._check_open()
        remaining = self._limits.cpu_time_ms / 1000 - self._cpu_used
        if remaining <= 0:
            self._discard()
            raise IsolateFault(*_TRAP_FAULTS[wasmtime.TrapCode.INTERRUPT])
        self._store.set_epoch_deadline(math.ceil(remaining / EPOCH_TICK_SECONDS) + 1)
        started = time.perf_counter()
        try:
            result = func(self._store, *args)
        except wasmtime.Trap as exc:
            self._discard()
            trap = exc.trap_code
            code, message = (_TRAP_FAULTS.get(trap) if trap is not None else None) or (
                "guest_trapped",
                "The plugin's isolate trapped.",
            )
            raise IsolateFault(code, message) from exc
        except wasmtime.WasmtimeError as exc:
            self._discard()
            raise IsolateFault("guest_trapped", "The plugin's isolate trapped.") from exc
        finally:
            self._cpu_used += time.perf_counter() - started
        return int(result) if result is not None else _WH_OK

    def _write(self, data: bytes) -> tuple[int, int]:
        pointer = self._enter(self._alloc, len(data))
        if pointer == 0:
            self._discard()
            raise IsolateFault(*_OUT_OF_MEMORY)
        self._memory.write(self._store, data, pointer)
        return pointer, len(data)

    def _read_text(self) -> str:
        pointer = self._enter(self._result_ptr)
        length = self._enter(self._result_len)
        if length > self._limits.max_output_bytes:
            self._discard()
            raise IsolateFault("output_too_large", "The plugin's answer was too large.")
        data = self._memory.read(self._store, pointer, pointer + length)
        return bytes(data).decode("utf-8", errors="replace")

    def _answer(self, status: int) -> GuestAnswer:
        if status == _WH_OOM:
            self._discard()
            raise IsolateFault(*_OUT_OF_MEMORY)
        if status != _WH_OK:
            self._discard()
            raise IsolateFault("guest_protocol", "The guest runtime failed.")
        try:
            raw = json.loads(self._read_text())
            return _parse_answer(raw)
        except (ValueError, KeyError, TypeError, RecursionError) as exc:
            self._discard()
            raise IsolateFault("guest_protocol", "The guest answered malformed data.") from exc


def _parse_answer(raw: Any) -> GuestAnswer:
    status = raw["status"]
    logs = tuple(
        {"level": str(entry["level"]), "line": str(entry["line"])} for entry in raw.get("logs", ())
    )
    late = tuple(str(kind) for kind in raw.get("late", ()))
    if status == "done":
        return GuestAnswer("done", value=raw["value"], logs=logs, late=late)
    if status == "failed":
        error = raw["error"]
        if not isinstance(error, dict):
            raise TypeError("error must be an object")
        return GuestAnswer("failed", error=error, logs=logs, late=late)
    if status == "blocked":
        requests = tuple(
            HostRequest(int(op["id"]), str(op["kind"]), op.get("input")) for op in raw["ops"]
        )
        return GuestAnswer("blocked", requests=requests, logs=logs, late=late)
    if status == "stalled":
        return GuestAnswer("stalled", logs=logs, late=late)
    raise ValueError(f"unknown status {status!r}")
