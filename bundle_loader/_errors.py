"""The one exception type of bundle_loader and its stable codes."""

from __future__ import annotations

from typing import Final, Literal, get_args

ErrorCode = Literal[
    "invalid_url",
    "request_failed",
    "timed_out",
    "http_status",
    "too_large",
    "integrity_mismatch",
    "invalid_sha256",
    "not_stored",
    "store_failed",
    "invalid_key",
    "signature_invalid",
    "untrusted_key",
    "signature_missing",
]

ERROR_CODES: Final[frozenset[str]] = frozenset(get_args(ErrorCode))


class BundleLoaderError(Exception):
    """A bundle could not be checked, fetched, verified or stored.

    ``code`` is one of a fixed set of stable, machine-readable codes:
    ``invalid_url``, ``request_failed``, ``timed_out``, ``http_status``,
    ``too_large``, ``integrity_mismatch``, ``invalid_sha256``, ``not_stored``,
    ``store_failed``, and for signatures ``invalid_key``, ``signature_invalid``,
    ``untrusted_key`` and ``signature_missing``. ``message`` is one line that
    is safe to show to a user or a model: it never carries a host path, OS
    error text, a response body, key material or URL credentials. ``str(err)``
    is the message. The foreign error that caused it, if any, is kept as
    ``__cause__`` for logs.
    """

    code: ErrorCode
    message: str

    def __init__(self, code: ErrorCode, message: str) -> None:
        if code not in ERROR_CODES:
            raise ValueError(f"unknown bundle_loader error code: {code!r}")
        super().__init__(message)
        self.code = code
        self.message = message

    def __str__(self) -> str:
        return self.message

    def __repr__(self) -> str:
        return f"{type(self).__name__}(code={self.code!r}, message={self.message!r})"

    def __reduce__(self) -> tuple[type[BundleLoaderError], tuple[str, str]]:
        return (type(self), (self.code, self.message))
