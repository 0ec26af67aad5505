"""Host capabilities: workspace files, a sandboxed shell, bounded web fetch.

Host-side implementations with the contract's limits and safe codes. They know
nothing of plugins or isolates: worker_host exposes them to guests. Every
contract failure is a `CapabilityError` carrying only a tag and a safe code.
"""

from ._errors import CapabilityError
from ._fetch import FetchFailed, PlainFetch
from ._in_memory import InMemoryWorkspaceFiles
from ._limits import (
    DEFAULT_WEB_FETCH_TIMEOUT_MS,
    MAX_DIRECTORY_ENTRIES,
    MAX_FILE_READ_BYTES,
    MAX_SHELL_OUTPUT_BYTES,
    MAX_SHELL_TIMEOUT_MS,
    MAX_WEB_FETCH_RESPONSE_BYTES,
    MAX_WEB_FETCH_TIMEOUT_MS,
)
from ._network import NetworkPolicy, classify_address
from ._shell import DEFAULT_SHELL_ENV, ShellDisabled, ShellPolicy, WorkspaceShell
from ._web_fetch import WebFetch
from ._workspace_files import WorkspaceFiles

__all__ = [
    "DEFAULT_SHELL_ENV",
    "DEFAULT_WEB_FETCH_TIMEOUT_MS",
    "MAX_DIRECTORY_ENTRIES",
    "MAX_FILE_READ_BYTES",
    "MAX_SHELL_OUTPUT_BYTES",
    "MAX_SHELL_TIMEOUT_MS",
    "MAX_WEB_FETCH_RESPONSE_BYTES",
    "MAX_WEB_FETCH_TIMEOUT_MS",
    "CapabilityError",
    "FetchFailed",
    "InMemoryWorkspaceFiles",
    "NetworkPolicy",
    "PlainFetch",
    "ShellDisabled",
    "ShellPolicy",
    "WebFetch",
    "WorkspaceFiles",
    "WorkspaceShell",
    "classify_address",
]
