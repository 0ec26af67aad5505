"""worker-host: run untrusted agent plugins inside WebAssembly isolates.

The embedding API is an async `Host` with `Session`s; the `worker-host` CLI is
a thin shell over it. See README.md.
"""

from ._activation import Activation, PluginCode, PluginRunner, SetupFailed
from ._call_scope import CallScope, CapabilityPolicy
from ._errors import IsolateFault, WorkerHostError
from ._host import Host, HostConfig, HostPlugin, default_data_dir
from ._limits import IsolateLimits
from ._manifest import Manifest, ToolDescriptor
from ._permissions import PermissionRule
from ._revisions import PluginFailure, ToolsDelta
from ._runtime import GuestRuntime, shared_runtime
from ._session import PluginInfo, RefreshResult, Session, ToolInfo
from ._tools import ToolResult
from ._turns import Catalog, Client, PermissionAnswer, ToolCall, Turn, TurnFailed

__all__ = [
    "Activation",
    "CallScope",
    "CapabilityPolicy",
    "Catalog",
    "Client",
    "GuestRuntime",
    "Host",
    "HostConfig",
    "HostPlugin",
    "IsolateFault",
    "IsolateLimits",
    "Manifest",
    "PermissionAnswer",
    "PermissionRule",
    "PluginCode",
    "PluginFailure",
    "PluginInfo",
    "PluginRunner",
    "RefreshResult",
    "Session",
    "SetupFailed",
    "ToolCall",
    "ToolDescriptor",
    "ToolInfo",
    "ToolResult",
    "ToolsDelta",
    "Turn",
    "TurnFailed",
    "WorkerHostError",
    "default_data_dir",
    "shared_runtime",
]
