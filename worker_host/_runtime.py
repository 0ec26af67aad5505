"""The process-wide guest runtime: one wasmtime engine, the compiled QuickJS-NG
guest module pre-initialised from a memory snapshot (cached on disk), and the
epoch ticker that bounds CPU time.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import threading
import time
from importlib import metadata, resources
from pathlib import Path

import wasmtime
from wasmtime._instance import InstanceExports  # the type Instance.exports returns

from ._limits import NATIVE_WASM_STACK_BYTES, IsolateLimits
from ._snapshot import snapshot_module

# Epoch interruption: a daemon thread advances the engine's epoch every tick and
# each store traps once its deadline (in ticks) passes, so the host never polls
# from Python while guest code runs.
EPOCH_TICK_SECONDS = 0.005

_GUEST_PACKAGE = "worker_host._guest"
_GUEST_MODULE = "quickjs-guest.wasm"
# Evaluated as one script, in this order, before any bundle.
_PRELUDE_PARTS = ("web.js", "prelude.js")


def guest_record() -> dict[str, object]:
    """The build record of the committed guest (versions and input digests)."""
    text = resources.files(_GUEST_PACKAGE).joinpath("guest.json").read_text("utf-8")
    record: dict[str, object] = json.loads(text)
    return record


class GuestRuntime:
    """Compiles (or loads from the cache) the guest once and makes isolates cheap.

    The module isolates instantiate is a snapshot of the guest taken right after
    the QuickJS runtime, its context and the prelude started (see `_snapshot`).
    `cache_dir`, when given, holds its `Module.serialize` output keyed by the
    guest and prelude digests, the wasmtime version and the engine settings.
    Serialized modules are native code: the directory must be writable only by
    this user (it is created with mode 0700).
    """

    def __init__(self, cache_dir: str | os.PathLike[str] | None = None) -> None:
        config = wasmtime.Config()
        config.epoch_interruption = True
        config.max_wasm_stack = NATIVE_WASM_STACK_BYTES
        config.cranelift_opt_level = "speed"
        self.engine = wasmtime.Engine(config)
        guest = resources.files(_GUEST_PACKAGE)
        self._wasm = guest.joinpath(_GUEST_MODULE).read_bytes()
        self.prelude = b"\n".join(guest.joinpath(part).read_bytes() for part in _PRELUDE_PARTS)
        self._linker = wasmtime.Linker(self.engine)
        self._linker.define_wasi()
        self.module = self._load_module(None if cache_dir is None else Path(cache_dir))
        self.instance_pre = self._linker.instantiate_pre(self.module)
        self._ticker_started = False
        self._ticker_lock = threading.Lock()

    def _cache_key(self) -> str:
        settings = {
            "guest": hashlib.sha256(self._wasm).hexdigest(),
            "prelude": hashlib.sha256(self.prelude).hexdigest(),
            "wasmtime": metadata.version("wasmtime"),
            "stack": NATIVE_WASM_STACK_BYTES,
            "epoch": True,
        }
        return hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:32]

    def _load_module(self, cache_dir: Path | None) -> wasmtime.Module:
        if cache_dir is None:
            return wasmtime.Module(self.engine, self._snapshot())
        path = cache_dir / f"guest-{self._cache_key()}.cwasm"
        if not _private_to_us(cache_dir):
            # Serialized modules are native code: never load one from a folder
            # someone else could have written to. Compile, and cache nothing.
            return wasmtime.Module(self.engine, self._snapshot())
        if path.is_file():
            try:
                return wasmtime.Module.deserialize_file(self.engine, str(path))
            except wasmtime.WasmtimeError:
                path.unlink(missing_ok=True)
        module = wasmtime.Module(self.engine, self._snapshot())
        try:
            cache_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
            with tempfile.NamedTemporaryFile(dir=cache_dir, delete=False) as handle:
                handle.write(module.serialize())
            os.replace(handle.name, path)
        except OSError:
            pass  # the cache is an optimisation; an unwritable one only costs a compile
        return module

    def _snapshot(self) -> bytes:
        """Starts the guest once and returns a module that starts where it ended."""
        module = wasmtime.Module(self.engine, self._wasm)
        store = wasmtime.Store(self.engine)
        try:
            store.set_wasi(wasmtime.WasiConfig())
            store.set_epoch_deadline(1 << 40)
            exports = self._linker.instantiate(store, module).exports(store)
            export_func(exports, "_initialize")(store)
            memory = export_memory(exports)
            pointer = export_func(exports, "wh_alloc")(store, len(self.prelude))
            memory.write(store, self.prelude, pointer)
            status = export_func(exports, "wh_init")(
                store, pointer, len(self.prelude), IsolateLimits().js_stack_bytes
            )
            if status != 0:
                raise RuntimeError("the guest runtime failed to start")
            export_func(exports, "wh_free")(store, pointer)
            image = bytes(memory.read(store, 0, memory.data_len(store)))
        finally:
            store.close()
        return snapshot_module(self._wasm, image)

    def ensure_ticker(self) -> None:
        """Starts the epoch ticker thread once per runtime."""
        with self._ticker_lock:
            if self._ticker_started:
                return
            self._ticker_started = True
        engine = self.engine

        def tick() -> None:
            while True:
                time.sleep(EPOCH_TICK_SECONDS)
                engine.increment_epoch()

        threading.Thread(target=tick, name="worker-host-epoch", daemon=True).start()


def _private_to_us(folder: Path) -> bool:
    """True when `folder` is missing (it will be made 0700) or is ours and
    writable by nobody else."""
    try:
        info = folder.stat()
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return info.st_uid == os.getuid() and not info.st_mode & 0o022


def export_func(exports: InstanceExports, name: str) -> wasmtime.Func:
    """The guest's exported function `name`."""
    func = exports[name]
    if not isinstance(func, wasmtime.Func):
        raise TypeError(f"the guest export {name} is not a function")
    return func


def export_memory(exports: InstanceExports) -> wasmtime.Memory:
    """The guest's exported linear memory."""
    memory = exports["memory"]
    if not isinstance(memory, wasmtime.Memory):
        raise TypeError("the guest export memory is not a memory")
    return memory


_shared: dict[Path | None, GuestRuntime] = {}
_shared_lock = threading.Lock()


def shared_runtime(cache_dir: str | os.PathLike[str] | None = None) -> GuestRuntime:
    """The runtime for this process and cache directory, created on first use."""
    key = None if cache_dir is None else Path(cache_dir)
    with _shared_lock:
        runtime = _shared.get(key)
        if runtime is None:
            runtime = GuestRuntime(key)
            _shared[key] = runtime
        return runtime
