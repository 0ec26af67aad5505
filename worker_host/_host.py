"""The embedding API: an async `Host` and its `Session`s.

The CLI and the HTTP server are thin shells over this. A host owns the data
directory (SQLite state, the content-addressed bundle store, the compiled
guest cache) and one guest runtime; sessions hold revisions of pinned plugins.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import ssl
import uuid
from collections.abc import Callable
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
    verify_signature,
)
from capabilities import NetworkPolicy

from ._activation import Activation, PluginRunner
from ._call_scope import CallScope, CapabilityPolicy
from ._errors import WorkerHostError
from ._limits import IsolateLimits
from ._manifest import valid_plugin_id
from ._permissions import PermissionRule
from ._revisions import PluginFailure, activate_pins, check_catalog, retire, roll_back
from ._runtime import shared_runtime
from ._session import (
    Session,
    _checked_options,
    _normalized_digest,
    host_activation,
)
from ._storage import HOST_SCOPE, Pin, Revision, SqliteStore

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
class HostPlugin:
    """A plugin the operator configures for every session (the host revision)."""

    plugin_id: str
    url: str
    sha256: str | None = None
    options: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class HostConfig:
    """Operator settings. Every field has a safe default.

    - `data_dir`: state, bundles and the compiled-guest cache.
    - `ca_bundle`: a PEM file of CAs to trust for bundle fetches instead of the
      defaults (`SSL_CERT_FILE` is honoured when this is unset).
    - `allow_http_loopback`: accept plain `http` bundle URLs on loopback hosts,
      for development only.
    - `bundle_network`: where bundle and signature fetches may connect,
      checked on every hop against DNS rebinding. By default private,
      link-local (cloud metadata) and other non-public addresses are refused
      and loopback is allowed, for development; a hosted service whose
      sessions add bundles should refuse loopback too.
    - `trust`: trusted signing keys. When set, a bundle is pinned only with a
      valid detached signature (`URL.sig`, or one given) by one of them, and
      the signature is re-checked against the pinned digest every time the
      bundle is activated or called.
    - `host_plugins`: plugins active in every session (the host revision),
      activated when the host starts; see `Host.start`.
    - `permissions`: host-scope permission rules, before each session's own.
    - `approval_wait_ms`: how long a Turn waits for an answer to a permission
      request (None: no limit); past it the Turn ends with
      `approval_wait_limit_reached`.
    - `default_agent`: replaces a host plugin's `agents.setDefault`.
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
    bundle_network: NetworkPolicy = field(
        default_factory=lambda: NetworkPolicy(allow_loopback=True))
    trust: TrustPolicy | None = None
    host_plugins: tuple[HostPlugin, ...] = ()
    permissions: tuple[PermissionRule, ...] = ()
    case_sensitive_permissions: bool = True
    approval_wait_ms: int | None = None
    default_agent: str | None = None


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
            transport=_policy_transport(config.bundle_network),
        )
    except BundleLoaderError as exc:
        raise WorkerHostError(exc.code, exc.message) from exc
    return fetched.data, fetched.sha256


def _policy_transport(policy: NetworkPolicy) -> Callable[[ssl.SSLContext], Any]:
    """Connections for bundle fetches through `policy`, with the fetch's own trust."""
    return lambda context: policy.transport(tls_context=context)


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
        try:
            await self.start()
        except BaseException:
            self.close()
            raise
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
        return Session(self, session_id, workdir, self._workspace(session_id))

    async def start(self) -> None:
        """Activates the host revision when the configured host plugins changed.

        `async with Host(...)` calls it. Host plugins are fetched (and their
        signatures checked) like session plugins; one whose setup throws a
        `PluginError` with a `publicMessage`, or whose tool declaration is
        rejected, is skipped and reported by `host_failures`; any other
        failure raises and leaves the previous host revision active.
        """
        self._check_open()
        wanted = hashlib.sha256(json.dumps(
            [[p.plugin_id, p.url, p.sha256, p.options] for p in self.config.host_plugins]
            + [self.config.default_agent], sort_keys=True).encode()).hexdigest()
        self._store.create_session(HOST_SCOPE, ".")
        state = self._store.host_state()
        if state is not None and state[0] == wanted:
            return
        current = self._store.current_revision(HOST_SCOPE)
        pins = []
        for plugin in self.config.host_plugins:
            if not valid_plugin_id(plugin.plugin_id):
                raise WorkerHostError("invalid_plugin_id",
                                      f"{plugin.plugin_id!r} is not a plugin id.")
            _, digest = await self._fetch(plugin.url, _normalized_digest(plugin.sha256))
            signature, signer = await self._signature(plugin.url, digest, None)
            pins.append(Pin(plugin.plugin_id, plugin.url, digest, _checked_options(plugin.options),
                            "", "", signature, signer))
        revision_id = str(uuid.uuid4())
        activation = Activation("host", revision_id, current.version + 1)
        activated, failures = await activate_pins(self._runner, "host", activation, pins,
                                                  self._pinned_bundle, self._host_scope())
        try:
            check_catalog(activated, [], self.config.default_agent)
            self._store.commit_revision(HOST_SCOPE, current.version, revision_id, activated)
        except WorkerHostError:
            await roll_back(self._runner, activated, activation, self._pinned_bundle,
                            self._host_scope())
            raise
        self._store.set_host_state(wanted, [f.__dict__ for f in failures])
        await retire(self._runner, current, host_activation(current), self._pinned_bundle,
                     self._host_scope())

    def host_failures(self) -> list[PluginFailure]:
        """Host plugins skipped at activation, with their safe reasons."""
        state = self._store.host_state()
        return [PluginFailure(**failure) for failure in state[1]] if state else []

    def _host_revision(self) -> Revision:
        try:
            return self._store.current_revision(HOST_SCOPE)
        except WorkerHostError:
            return Revision(HOST_SCOPE, 0, "")

    def _host_scope(self) -> CallScope:
        """Host plugins' capabilities, over the host scope's own workspace."""
        return CallScope.for_workspace(self._workspace(HOST_SCOPE), self.config.capabilities)

    def _workspace(self, scope: str) -> Path:
        """A scope's workspace directory (`/workspace` to its plugins), made if missing."""
        workspace = self.config.data_dir / "workspaces" / scope
        try:
            workspace.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise WorkerHostError("store_failed", "A workspace could not be created.") from exc
        return workspace

    def session_ids(self) -> list[str]:
        """Every session's id, sorted."""
        self._check_open()
        return [session for session in self._store.session_ids() if session != HOST_SCOPE]

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
                transport=_policy_transport(self.config.bundle_network),
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
