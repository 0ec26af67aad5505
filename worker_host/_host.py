"""The embedding API: an async `Host` and its `Session`s.

The CLI and the HTTP server are thin shells over this. A host owns the data
directory (SQLite state, the content-addressed bundle store, the compiled
guest cache) and one guest runtime; sessions hold revisions of pinned plugins.
"""

from __future__ import annotations

import json
import os
import re
import uuid
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bundle_loader import (
    BundleLoaderError,
    BundleStore,
    FetchLimits,
    TrustPolicy,
    check_bundle_url,
    fetch_bundle,
    fetch_signature,
    normalize_sha256,
    verify_signature,
)

from ._activation import Activation, PluginCode, PluginRunner
from ._call_scope import CallScope, CapabilityPolicy
from ._errors import WorkerHostError
from ._limits import IsolateLimits
from ._manifest import Manifest, load_manifest, valid_plugin_id
from ._runtime import shared_runtime
from ._storage import Pin, Revision, SqliteStore
from ._tools import CallContext, ToolResult, call_tool

SESSION_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
DATA_DIR_VARIABLE = "WORKER_HOST_DATA_DIR"


def default_data_dir() -> Path:
    """`$WORKER_HOST_DATA_DIR`, else the per-user data directory."""
    configured = os.environ.get(DATA_DIR_VARIABLE)
    if configured:
        return Path(configured)
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "worker-host"


@dataclass(frozen=True)
class HostConfig:
    """Operator settings. Every field has a safe default.

    - `data_dir`: state, bundles and the compiled-guest cache.
    - `ca_bundle`: a PEM file of CAs to trust for bundle fetches instead of the
      defaults (`SSL_CERT_FILE` is honoured when this is unset).
    - `allow_http_loopback`: accept plain `http` bundle URLs on loopback hosts,
      for development only.
    - `trust`: trusted signing keys. When set, a bundle is pinned only with a
      valid detached signature (`URL.sig`, or one given) by one of them, and
      the signature is re-checked against the pinned digest every time the
      bundle is activated or called.
    - `capabilities`: what plugins may reach (network policy, shell, files);
      see `CapabilityPolicy`. Each session's workspace is
      `data_dir/workspaces/<session id>`, seen by plugins as `/workspace`.
    """

    data_dir: Path = field(default_factory=default_data_dir)
    ca_bundle: Path | None = None
    allow_http_loopback: bool = False
    fetch_limits: FetchLimits = field(default_factory=FetchLimits)
    isolate_limits: IsolateLimits = field(default_factory=IsolateLimits)
    capabilities: CapabilityPolicy = field(default_factory=CapabilityPolicy)
    trust: TrustPolicy | None = None


@dataclass(frozen=True)
class PluginInfo:
    """A pin as clients see it."""

    plugin_id: str
    url: str
    sha256: str
    options: dict[str, Any]
    fingerprint: str
    shape: str
    signer: str | None = None


@dataclass(frozen=True)
class ToolInfo:
    """A model-facing tool descriptor, with the plugin that declares it."""

    name: str
    description: str
    input_schema: dict[str, Any]
    plugin_id: str
    direct_only: bool = False

    def to_json(self) -> dict[str, Any]:
        value: dict[str, Any] = {
            "name": self.name,
            "description": self.description,
            "inputSchema": self.input_schema,
            "pluginId": self.plugin_id,
        }
        if self.direct_only:
            value["directOnly"] = True
        return value


@dataclass(frozen=True)
class RefreshResult:
    """What `refresh_plugin` did: `changed` is False when the digest was the same."""

    changed: bool
    previous_sha256: str
    plugin: PluginInfo


async def fetch(
    config: HostConfig, url: str, expected_sha256: str | None = None
) -> tuple[bytes, str]:
    """Fetches a bundle under the host's URL, TLS and size rules.

    Returns the bytes and their SHA-256. Raises `WorkerHostError` with the
    fetch codes: `invalid_url`, `request_failed`, `timed_out`, `http_status`,
    `too_large`, `integrity_mismatch`.
    """
    try:
        check_bundle_url(url, allow_http_loopback=config.allow_http_loopback)
        fetched = await fetch_bundle(
            url,
            limits=config.fetch_limits,
            allow_http_loopback=config.allow_http_loopback,
            ca_bundle=config.ca_bundle,
            expected_sha256=expected_sha256,
        )
    except BundleLoaderError as exc:
        raise WorkerHostError(exc.code, exc.message) from exc
    return fetched.data, fetched.sha256


class Host:
    """The worker host. Use as ``async with Host(config) as host:`` (or plain
    ``with`` outside asyncio).

    Raises `WorkerHostError` from every method with a stable code; see each
    method. `close()` is safe twice; a closed host refuses further use.
    """

    def __init__(self, config: HostConfig | None = None) -> None:
        self.config = config or HostConfig()
        data_dir = self.config.data_dir
        self._store = SqliteStore(data_dir / "state.sqlite3")
        self._bundles = BundleStore(data_dir / "bundles")
        self._executor = ThreadPoolExecutor(thread_name_prefix="worker-host-isolate")
        self._runner = PluginRunner(
            shared_runtime(data_dir / "cache"), self.config.isolate_limits, self._executor
        )
        self._closed = False

    def __enter__(self) -> Host:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> Host:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Releases the database and worker threads. Safe to call twice."""
        if not self._closed:
            self._closed = True
            self._store.close()
            self._executor.shutdown(wait=True)

    def _check_open(self) -> None:
        if self._closed:
            raise WorkerHostError("host_closed", "The host was closed.")

    def session(self, session_id: str, *, create: bool = False) -> Session:
        """The session named `session_id`.

        With `create`, makes it when missing. Raises `invalid_session_id`
        (1-128 letters, digits, `.`, `_`, `-`, starting with a letter or digit)
        or `session_not_found`.
        """
        self._check_open()
        if SESSION_ID.fullmatch(session_id) is None:
            raise WorkerHostError(
                "invalid_session_id",
                "A session id is 1 to 128 letters, digits, '.', '_' or '-', "
                "starting with a letter or digit.",
            )
        if create:
            self._store.create_session(session_id, ".")
        workdir = self._store.session_workdir(session_id)
        if workdir is None:
            raise WorkerHostError("session_not_found", f"No session named {session_id!r}.")
        workspace = self.config.data_dir / "workspaces" / session_id
        try:
            workspace.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise WorkerHostError(
                "store_failed", "The session's workspace could not be created."
            ) from exc
        return Session(self, session_id, workdir, workspace)

    def session_ids(self) -> list[str]:
        """Every session's id, sorted."""
        self._check_open()
        return self._store.session_ids()

    async def _fetch(self, url: str, expected_sha256: str | None) -> tuple[bytes, str]:
        data, digest = await fetch(self.config, url, expected_sha256)
        try:
            self._bundles.put(data)
        except BundleLoaderError as exc:
            raise WorkerHostError(exc.code, exc.message) from exc
        return data, digest

    async def _signature(
        self, url: str, sha256: str, given: bytes | None
    ) -> tuple[str | None, str | None]:
        """The signature file and signer for a fetched bundle, under the trust policy.

        Without a policy there is nothing to check (and `given` is refused:
        `no_trust_policy`). Raises `signature_missing`, `signature_invalid`,
        `untrusted_key`, and the fetch codes of `URL.sig`.
        """
        trust = self.config.trust
        if trust is None:
            if given is not None:
                raise WorkerHostError(
                    "no_trust_policy",
                    "A signature was given but this host trusts no signing keys.",
                )
            return None, None
        try:
            signature = given if given is not None else await fetch_signature(
                url,
                limits=self.config.fetch_limits,
                allow_http_loopback=self.config.allow_http_loopback,
                ca_bundle=self.config.ca_bundle,
            )
            signer = verify_signature(signature, sha256, trust)
        except BundleLoaderError as exc:
            raise WorkerHostError(exc.code, exc.message) from exc
        return signature.decode(), signer

    def _pinned_bundle(self, pin: Pin) -> bytes:
        """A pin's bundle from the store (re-hashed), its signature re-checked."""
        try:
            data = self._bundles.get(pin.sha256)
            if self.config.trust is not None:
                if pin.signature is None:
                    raise WorkerHostError(
                        "signature_missing",
                        f"Plugin {pin.plugin_id} was pinned without a signature, and this host "
                        "requires one; refresh it.",
                    )
                verify_signature(pin.signature.encode(), pin.sha256, self.config.trust)
        except BundleLoaderError as exc:
            raise WorkerHostError(exc.code, exc.message) from exc
        return data


class Session:
    """One session's plugins and tools. Obtain it from `Host.session`."""

    def __init__(self, host: Host, session_id: str, workdir: str, workspace: Path) -> None:
        self._host = host
        self.id = session_id
        self.workdir = workdir
        self.workspace = workspace
        """The session's workspace directory on the host (`/workspace` to plugins)."""

    def _scope(self) -> CallScope:
        return CallScope.for_workspace(self.workspace, self._host.config.capabilities)

    def revision(self) -> Revision:
        """The active revision (version 0 has no pins)."""
        self._host._check_open()
        return self._host._store.current_revision(self.id)

    def plugins(self) -> list[PluginInfo]:
        """The active revision's pins, in plugin order."""
        return [_plugin_info(pin) for pin in self.revision().pins]

    def tools(self) -> list[ToolInfo]:
        """The model-facing tool descriptors of the active revision."""
        return [
            ToolInfo(tool.id, tool.description, tool.input_schema, pin.plugin_id, tool.direct_only)
            for pin in self.revision().pins
            for tool in _manifest(pin).tools
        ]

    async def add_plugin(
        self,
        url: str,
        plugin_id: str,
        *,
        sha256: str | None = None,
        options: dict[str, Any] | None = None,
        signature: bytes | None = None,
    ) -> PluginInfo:
        """Fetches, pins and activates a bundle in a new revision.

        With a trust policy, the bundle must carry a valid signature by a
        trusted key (`signature`, else fetched from `URL.sig`) before anything
        is activated. Raises `WorkerHostError`: `invalid_plugin_id`,
        `plugin_exists`, `invalid_sha256`, `invalid_options`, the fetch codes
        (`invalid_url`, `request_failed`, `timed_out`, `http_status`,
        `too_large`, `integrity_mismatch`), the signature codes
        (`signature_missing`, `signature_invalid`, `untrusted_key`,
        `no_trust_policy`), and every activation code (`bundle_invalid`,
        `setup_failed`, `invalid_contribution`, `plugin_id_mismatch`, isolate
        faults). On any failure the active revision is unchanged.
        """
        if not valid_plugin_id(plugin_id):
            raise WorkerHostError(
                "invalid_plugin_id",
                f"{plugin_id!r} is not a plugin id: use at most 128 lowercase letters and digits "
                "joined by single '.', '_' or '-', starting with a letter.",
            )
        expected = _normalized_digest(sha256)
        options = _checked_options(options)
        current = self.revision()
        if current.pin(plugin_id) is not None:
            raise WorkerHostError(
                "plugin_exists",
                f"Plugin {plugin_id} is already added to session {self.id}; refresh it instead.",
            )
        _, digest = await self._host._fetch(url, expected)
        signature_text, signer = await self._host._signature(url, digest, signature)
        placeholder = Pin(plugin_id, url, digest, options, "", "", signature_text, signer)
        revision = await self._commit(current, [*current.pins, placeholder])
        return _plugin_info(_require_pin(revision, plugin_id))

    async def refresh_plugin(self, plugin_id: str) -> RefreshResult:
        """Refetches a pin's URL; only a new digest makes a new revision.

        Raises `plugin_not_found`, the fetch codes and the activation codes;
        on failure the active revision is unchanged.
        """
        current = self.revision()
        pin = current.pin(plugin_id)
        if pin is None:
            raise _plugin_not_found(plugin_id, self.id)
        _, digest = await self._host._fetch(pin.url, None)
        if digest == pin.sha256 and (self._host.config.trust is None or pin.signature):
            return RefreshResult(False, pin.sha256, _plugin_info(pin))
        signature_text, signer = await self._host._signature(pin.url, digest, None)
        replaced = Pin(plugin_id, pin.url, digest, pin.options, "", "", signature_text, signer)
        pins = [replaced if each.plugin_id == plugin_id else each for each in current.pins]
        revision = await self._commit(current, pins)
        return RefreshResult(True, pin.sha256, _plugin_info(_require_pin(revision, plugin_id)))

    async def remove_plugin(self, plugin_id: str) -> None:
        """Removes a pin in a new revision. Raises `plugin_not_found`."""
        current = self.revision()
        if current.pin(plugin_id) is None:
            raise _plugin_not_found(plugin_id, self.id)
        await self._commit(current, [pin for pin in current.pins if pin.plugin_id != plugin_id])

    async def _commit(self, current: Revision, pins: Sequence[Pin]) -> Revision:
        """Activates every pin under a new revision identity, then commits it.

        Any activation failure rejects the whole revision: nothing is written.
        """
        revision_id = str(uuid.uuid4())
        activation = Activation("session", revision_id, current.version + 1, self.id)
        activated = []
        for pin in pins:
            bundle = self._host._pinned_bundle(pin)
            code = PluginCode(pin.plugin_id, bundle, activation, pin.options)
            manifest = await self._host._runner.activate(code, self._scope())
            activated.append(
                Pin(pin.plugin_id, pin.url, pin.sha256, pin.options, manifest.fingerprint,
                    manifest.canonical, pin.signature, pin.signer)
            )
        return self._host._store.commit_revision(self.id, current.version, revision_id, activated)

    async def call_tool(
        self, name: str, tool_input: Any, *, turn_id: str | None = None
    ) -> ToolResult:
        """Calls one tool of the active revision and returns what the model sees.

        Raises `unknown_tool` when no plugin declares `name`, and
        `invalid_permissions`; every other failure is a failed `ToolResult`.
        """
        revision = self.revision()
        for pin in revision.pins:
            tool = _manifest(pin).tool(name)
            if tool is None:
                continue
            activation = Activation("session", revision.revision_id, revision.version, self.id)
            bundle = self._host._pinned_bundle(pin)
            code = PluginCode(pin.plugin_id, bundle, activation, pin.options)
            context = CallContext(
                session_id=self.id,
                turn_id=turn_id or str(uuid.uuid4()),
                tool_call_id=str(uuid.uuid4()),
                workdir=self.workdir,
            )
            return await call_tool(self._host._runner, code, pin.fingerprint, tool, tool_input,
                                   context, self._scope())
        raise WorkerHostError("unknown_tool", f"Session {self.id} has no tool named {name!r}.")


def _manifest(pin: Pin) -> Manifest:
    return load_manifest(pin.manifest)


def _plugin_info(pin: Pin) -> PluginInfo:
    return PluginInfo(pin.plugin_id, pin.url, pin.sha256, pin.options, pin.fingerprint,
                      _manifest(pin).shape, pin.signer)


def _require_pin(revision: Revision, plugin_id: str) -> Pin:
    pin = revision.pin(plugin_id)
    assert pin is not None, "a committed revision holds the pin it was built with"
    return pin


def _plugin_not_found(plugin_id: str, session_id: str) -> WorkerHostError:
    return WorkerHostError(
        "plugin_not_found", f"Session {session_id} has no plugin {plugin_id!r}."
    )


def _normalized_digest(sha256: str | None) -> str | None:
    if sha256 is None:
        return None
    try:
        return normalize_sha256(sha256)
    except BundleLoaderError as exc:
        raise WorkerHostError(exc.code, exc.message) from exc


def _checked_options(options: dict[str, Any] | None) -> dict[str, Any]:
    if options is None:
        return {}
    if not isinstance(options, dict):
        raise WorkerHostError("invalid_options", "Plugin options must be a JSON object.")
    try:
        copied: dict[str, Any] = json.loads(json.dumps(options, allow_nan=False))
    except (TypeError, ValueError) as exc:
        raise WorkerHostError("invalid_options", "Plugin options must be plain JSON.") from exc
    return copied
