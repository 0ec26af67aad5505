"""Typed limits for fetching a bundle."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class FetchLimits:
    """Bounds on one ``fetch_bundle`` call.

    ``max_bytes`` caps the body (a larger one fails with ``too_large``);
    ``timeout_seconds`` bounds the whole call, every redirect hop and the body
    included (``timed_out``); ``max_redirects`` bounds the hops followed
    (``request_failed``). Invalid values raise ``ValueError``.
    """

    max_bytes: int = 8 * 1024 * 1024
    timeout_seconds: float = 30.0
    max_redirects: int = 5

    def __post_init__(self) -> None:
        if self.max_bytes < 0:
            raise ValueError("max_bytes must not be negative")
        if not self.timeout_seconds > 0:
            raise ValueError("timeout_seconds must be positive")
        if self.max_redirects < 0:
            raise ValueError("max_redirects must not be negative")
