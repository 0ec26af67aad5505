"""Operator settings for tests that are not about permissions.

With no rule matching, a call asks and, with no client, is denied (the
contract's rule). Tests about something else run under one allow-all rule,
as the contract's own basic example configures.
"""

from __future__ import annotations

import json
from pathlib import Path

from worker_host._permissions import PermissionRule

ALLOW_ALL = (PermissionRule("*", "*", "allow"),)


def allow_all_config(directory: Path) -> Path:
    """Writes an operator config file with the allow-all rule; returns its path."""
    path = directory / "allow-all.json"
    path.write_text(json.dumps({"permissions": [{"action": "*", "resource": "*",
                                                 "effect": "allow"}]}))
    return path
