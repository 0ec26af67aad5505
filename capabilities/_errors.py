"""The one failure type of host capabilities: a contract tag and a safe code."""

from __future__ import annotations

from typing import Any, Literal

CapabilityTag = Literal["WorkspaceFileError", "WorkspaceShellError", "WebFetchError"]


class CapabilityError(Exception):
    """A capability failure as the guest receives it: only `tag` and `code`.

    `tag` is the contract's `_tag` (`WorkspaceFileError`, `WorkspaceShellError`,
    `WebFetchError`) and `code` one of its safe codes. The message is the
    contract's (`Workspace file failed: not_found`, ...): never a raw path, OS
    error or response body.
    """

    _PREFIXES = {
        "WorkspaceFileError": "Workspace file failed: ",
        "WorkspaceShellError": "Workspace shell failed: ",
        "WebFetchError": "Web fetch failed: ",
    }

    def __init__(self, tag: CapabilityTag, code: str) -> None:
        super().__init__(self._PREFIXES[tag] + code)
        self.tag = tag
        self.code = code

    def to_guest(self) -> dict[str, Any]:
        """The shape the guest prelude rebuilds into the contract's error class."""
        return {"_tag": self.tag, "code": self.code}


def file_error(code: str) -> CapabilityError:
    return CapabilityError("WorkspaceFileError", code)


def shell_error(code: str) -> CapabilityError:
    return CapabilityError("WorkspaceShellError", code)


def web_fetch_error(code: str) -> CapabilityError:
    return CapabilityError("WebFetchError", code)
