"""Typed limits for isolates, with defaults and the bounds the engine allows."""

from __future__ import annotations

from dataclasses import dataclass

from ._errors import WorkerHostError

# wasmtime refuses (by aborting the process) a wasm stack larger than its async
# stack size of 2 MiB, so the native stack is fixed just below that and not
# configurable. The JS stack limit must leave room for the interpreter's native
# frames beneath it.
NATIVE_WASM_STACK_BYTES = 2 * 1024 * 1024 - 128 * 1024
MAX_JS_STACK_BYTES = 768 * 1024
MiB = 1024 * 1024


@dataclass(frozen=True)
class IsolateLimits:
    """Per-call limits for one isolate.

    - `cpu_time_ms`: guest execution time of one call (setup, a tool function,
      a hook), summed over every time the host resumes it. Past it the call
      fails with `cpu_time_exceeded`.
    - `wall_time_ms`: the whole call including time spent waiting on host
      operations (timers, capabilities), but not on a person answering an
      `askQuestion` (which has no time limit). Past it: `timed_out`.
    - `memory_bytes`: the isolate's linear memory. An allocation past it fails
      the call with `memory_limit_exceeded`.
    - `js_stack_bytes`: deep recursion past it throws a catchable
      `RangeError` inside the guest (at most 768 KiB).
    - `max_output_bytes`: the largest JSON answer the host reads back.
    - `max_concurrent_operations`: host operations (capability calls, timers)
      one call may have in flight; more wait their turn.
    - `max_operations`: host operations one call may make in all; past it
      each further one rejects with a `PluginError` in the guest.
    """

    cpu_time_ms: int = 5_000
    wall_time_ms: int = 60_000
    memory_bytes: int = 128 * MiB
    js_stack_bytes: int = 512 * 1024
    max_output_bytes: int = 8 * MiB
    max_concurrent_operations: int = 16
    max_operations: int = 10_000

    def __post_init__(self) -> None:
        for name, value in vars(self).items():
            _require(isinstance(value, int) and not isinstance(value, bool),
                     f"{name} must be a whole number")
        _require(self.cpu_time_ms >= 1, "cpu_time_ms must be at least 1")
        _require(self.wall_time_ms >= self.cpu_time_ms, "wall_time_ms must be >= cpu_time_ms")
        _require(self.memory_bytes >= 16 * MiB, "memory_bytes must be at least 16 MiB")
        _require(self.memory_bytes <= 4096 * MiB, "memory_bytes must be at most 4 GiB")
        _require(
            64 * 1024 <= self.js_stack_bytes <= MAX_JS_STACK_BYTES,
            "js_stack_bytes must be between 64 KiB and 768 KiB",
        )
        _require(self.max_output_bytes >= 1024, "max_output_bytes must be at least 1 KiB")
        _require(self.max_concurrent_operations >= 1, "max_concurrent_operations must be >= 1")
        _require(self.max_operations >= 1, "max_operations must be at least 1")


def _require(condition: bool, message: str) -> None:
    if not condition:
        raise WorkerHostError("invalid_config", f"Invalid isolate limits: {message}.")
