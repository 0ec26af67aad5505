"""The one error root of worker-host.

Every failure a client, model or operator can see is a `WorkerHostError` with
a stable `code` and a one-line `message` that is safe to show: never a raw host
path, OS error, secret or response body. Foreign exceptions are translated at
the boundary where they arise, with ``raise ... from exc``.
"""

from __future__ import annotations


class WorkerHostError(Exception):
    """A failure with a stable, safe `code` and a one-line `message`."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message

    def __str__(self) -> str:
        return self.message

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.code!r}, {self.message!r})"


class IsolateFault(WorkerHostError):
    """A guest ran past a limit or trapped; its isolate has been discarded.

    Codes: `cpu_time_exceeded`, `memory_limit_exceeded`, `stack_overflow`,
    `output_too_large`, `guest_trapped`, `stalled`, `guest_protocol`.
    """
