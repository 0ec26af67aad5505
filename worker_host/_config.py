"""The operator's config file: one JSON document for everything an operator decides.

```json
{
  "dataDir": "state",
  "caBundle": "certs/private-ca.pem",
  "allowHttpLoopback": false,
  "trustedKeys": ["keys/release.pub"],
  "network": {"allowLoopback": false, "allowPrivate": false},
  "bundleNetwork": {"allowLoopback": true, "allowPrivate": false},
  "shell": {"enabled": true, "network": false},
  "workspaceFiles": true,
  "limits": {"cpuTimeMs": 5000, "wallTimeMs": 60000, "memoryBytes": 134217728,
             "jsStackBytes": 524288, "maxOutputBytes": 8388608},
  "fetch": {"maxBytes": 8388608, "timeoutSeconds": 30},
  "plugins": [{"pluginId": "example.notes", "url": "https://example.org/notes.mjs",
               "sha256": "...", "options": {"folder": "notes"}}],
  "permissions": [{"action": "*", "resource": "*", "effect": "ask"}],
  "permissionMatching": {"caseSensitive": true},
  "approval": {"timeoutMs": 30000},
  "defaultAgent": "reviewer"
}
```

Every member is optional; relative paths are relative to the file's folder.
Unknown members are refused, so a misspelt setting never silently does nothing.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from bundle_loader import BundleLoaderError, FetchLimits, TrustPolicy
from capabilities import NetworkPolicy, ShellPolicy

from ._call_scope import CapabilityPolicy
from ._errors import WorkerHostError
from ._host import HostConfig, HostPlugin
from ._limits import IsolateLimits
from ._permissions import PermissionRule

CONFIG_VARIABLE = "WORKER_HOST_CONFIG"

_LIMITS = {
    "cpuTimeMs": "cpu_time_ms",
    "wallTimeMs": "wall_time_ms",
    "memoryBytes": "memory_bytes",
    "jsStackBytes": "js_stack_bytes",
    "maxOutputBytes": "max_output_bytes",
    "maxConcurrentOperations": "max_concurrent_operations",
    "maxOperations": "max_operations",
}
_FETCH = {"maxBytes": "max_bytes", "timeoutSeconds": "timeout_seconds"}


def _invalid(message: str) -> WorkerHostError:
    return WorkerHostError("invalid_config", f"Invalid config: {message}.")


def _object(value: Any, where: str, allowed: set[str]) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _invalid(f"{where} must be an object")
    unknown = sorted(set(value) - allowed)
    if unknown:
        raise _invalid(f"unknown setting {where}.{unknown[0]}" if where != "the file"
                       else f"unknown setting {unknown[0]}")
    return value


def _typed(value: Any, where: str, kind: type | tuple[type, ...]) -> Any:
    if not isinstance(value, kind) or (isinstance(value, bool) and kind in (int, (int, float))):
        raise _invalid(f"{where} has the wrong type")
    return value


def read_trusted_keys(paths: list[Path]) -> TrustPolicy:
    """A trust policy from public key PEM files. Raises `invalid_config`, `invalid_key`."""
    pems = []
    for path in paths:
        try:
            pems.append(path.read_bytes())
        except OSError as exc:
            raise _invalid(f"cannot read the trusted key {path.name}") from exc
    try:
        return TrustPolicy.from_public_keys(pems)
    except BundleLoaderError as exc:
        raise WorkerHostError(exc.code, exc.message) from exc


def load_config(path: str | os.PathLike[str]) -> HostConfig:
    """Reads an operator config file into a `HostConfig`.

    Raises `WorkerHostError` `invalid_config` naming the setting at fault
    (unreadable file, not JSON, unknown member, wrong type, a limit out of
    range), or `invalid_key` for a trusted key that is not an Ed25519 public key.
    """
    file = Path(path)
    try:
        document = json.loads(file.read_text("utf-8"))
    except OSError as exc:
        raise _invalid(f"cannot read {file.name}") from exc
    except ValueError as exc:
        raise _invalid(f"{file.name} is not JSON") from exc
    top = _object(document, "the file", {
        "dataDir", "caBundle", "allowHttpLoopback", "trustedKeys", "network", "shell",
        "workspaceFiles", "limits", "fetch", "plugins", "permissions", "permissionMatching",
        "approval", "defaultAgent", "bundleNetwork",
    })
    folder = file.parent

    def resolve(name: str) -> Path:
        return folder / str(_typed(top[name], name, str))

    config = HostConfig()
    if "dataDir" in top:
        config = replace(config, data_dir=resolve("dataDir"))
    if "caBundle" in top:
        config = replace(config, ca_bundle=resolve("caBundle"))
    if "allowHttpLoopback" in top:
        config = replace(config, allow_http_loopback=_typed(top["allowHttpLoopback"],
                                                             "allowHttpLoopback", bool))
    if "trustedKeys" in top:
        names = _typed(top["trustedKeys"], "trustedKeys", list)
        paths = [folder / _typed(name, "trustedKeys[]", str) for name in names]
        config = replace(config, trust=read_trusted_keys(paths))
    network = _object(top.get("network", {}), "network", {"allowLoopback", "allowPrivate"})
    shell = _object(top.get("shell", {}), "shell", {"enabled", "network"})
    capabilities = CapabilityPolicy(
        network=NetworkPolicy(
            allow_loopback=_typed(network.get("allowLoopback", False), "network.allowLoopback",
                                  bool),
            allow_private=_typed(network.get("allowPrivate", False), "network.allowPrivate",
                                 bool),
            ca_bundle=config.ca_bundle,
        ),
        shell=ShellPolicy(
            enabled=_typed(shell.get("enabled", True), "shell.enabled", bool),
            network=_typed(shell.get("network", False), "shell.network", bool),
        ),
        workspace_files=_typed(top.get("workspaceFiles", True), "workspaceFiles", bool),
    )
    plugins = tuple(_host_plugin(entry) for entry in _typed(top.get("plugins", []), "plugins",
                                                              list))
    try:
        rules = tuple(PermissionRule.from_json(rule)
                      for rule in _typed(top.get("permissions", []), "permissions", list))
    except WorkerHostError as exc:
        raise _invalid(f"permissions: {exc.message.rstrip('.')}") from exc
    matching = _object(top.get("permissionMatching", {}), "permissionMatching",
                       {"caseSensitive"})
    approval = _object(top.get("approval", {}), "approval", {"timeoutMs"})
    wait = approval.get("timeoutMs")
    if wait is not None and (isinstance(wait, bool) or not isinstance(wait, int) or wait < 1):
        raise _invalid("approval.timeoutMs must be a positive integer")
    default_agent = top.get("defaultAgent")
    if default_agent is not None:
        _typed(default_agent, "defaultAgent", str)
    config = replace(
        config,
        host_plugins=plugins,
        permissions=rules,
        case_sensitive_permissions=_typed(matching.get("caseSensitive", True),
                                          "permissionMatching.caseSensitive", bool),
        approval_wait_ms=wait,
        default_agent=default_agent,
    )
    bundles = _object(top.get("bundleNetwork", {}), "bundleNetwork",
                      {"allowLoopback", "allowPrivate"})
    config = replace(config, bundle_network=NetworkPolicy(
        allow_loopback=_typed(bundles.get("allowLoopback", True), "bundleNetwork.allowLoopback",
                              bool),
        allow_private=_typed(bundles.get("allowPrivate", False), "bundleNetwork.allowPrivate",
                             bool),
    ))
    limits = _mapped(top, "limits", _LIMITS)
    fetch = _mapped(top, "fetch", _FETCH)
    try:
        config = replace(
            config,
            capabilities=capabilities,
            isolate_limits=IsolateLimits(**limits),
            fetch_limits=FetchLimits(**fetch),
        )
    except ValueError as exc:
        raise _invalid("a fetch limit is out of range") from exc
    return config


def _host_plugin(entry: Any) -> HostPlugin:
    value = _object(entry, "plugins[]", {"pluginId", "url", "sha256", "options"})
    for required in ("pluginId", "url"):
        if required not in value:
            raise _invalid(f"plugins[] needs {required}")
    options = _typed(value.get("options", {}), "plugins[].options", dict)
    sha256 = value.get("sha256")
    return HostPlugin(
        plugin_id=_typed(value["pluginId"], "plugins[].pluginId", str),
        url=_typed(value["url"], "plugins[].url", str),
        sha256=None if sha256 is None else _typed(sha256, "plugins[].sha256", str),
        options=options,
    )


def _mapped(top: Mapping[str, Any], name: str, fields: Mapping[str, str]) -> dict[str, Any]:
    section = _object(top.get(name, {}), name, set(fields))
    return {fields[key]: _typed(value, f"{name}.{key}", (int, float))
            for key, value in section.items()}
