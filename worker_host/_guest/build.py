"""Rebuild the QuickJS-NG guest (`quickjs-guest.wasm`) from pinned sources.

Run from the repository root: ``python worker_host/_guest/build.py``.

Needs Debian's ``clang``, ``lld``, ``wasi-libc`` and ``libclang-rt-dev-wasm32``
(``apt-get install clang lld wasi-libc libclang-rt-dev-wasm32``) and pip. The
QuickJS-NG C sources come from the PyPI sdist of ``quickjs-ng``, pinned by
hash; they are compiled unchanged. Installing or testing worker-host never
runs this: the built module is committed as package data, with
``guest.json`` recording the digest of every input so a rebuild can be
checked against it.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

SDIST_NAME = "quickjs-ng"
SDIST_VERSION = "0.17.0.2"
SDIST_SHA256 = "43d2e48272208721a7aaea8e3f02d4b9318f12ef20cc4f5421b59d9a470706ef"
QUICKJS_SOURCES = ("quickjs.c", "libregexp.c", "libunicode.c", "dtoa.c")

# The shadow stack lives first in linear memory so that overflowing it traps
# (an out-of-bounds store below address 0) instead of corrupting the heap.
SHADOW_STACK_BYTES = 1024 * 1024
COMPILE_FLAGS = ("--target=wasm32-wasi", "-O2", "-D_GNU_SOURCE", "-DNDEBUG", "-fno-exceptions")
LINK_FLAGS = (
    "--target=wasm32-wasi",
    "-mexec-model=reactor",
    "-Wl,--stack-first",
    f"-Wl,-z,stack-size={SHADOW_STACK_BYTES}",
    "-Wl,--strip-debug",
)

HERE = Path(__file__).resolve().parent
OUTPUT = HERE / "quickjs-guest.wasm"
RECORD = HERE / "guest.json"


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _fetch_sdist(workdir: Path) -> Path:
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", ":all:",
         f"{SDIST_NAME}=={SDIST_VERSION}", "-d", str(workdir)],
        check=True,
    )
    (archive,) = workdir.glob("quickjs_ng-*.tar.gz")
    digest = _sha256(archive.read_bytes())
    if digest != SDIST_SHA256:
        raise SystemExit(f"sdist digest {digest} does not match the pinned {SDIST_SHA256}")
    with tarfile.open(archive) as tar:
        tar.extractall(workdir, filter="data")
    return workdir / f"quickjs_ng-{SDIST_VERSION}" / "upstream-quickjs"


def inputs_digest() -> str:
    """Digest of everything the module is built from: sdist, shim and flags."""
    material = {
        "sdist": SDIST_SHA256,
        "shim": _sha256((HERE / "shim.c").read_bytes()),
        "compile": COMPILE_FLAGS,
        "link": LINK_FLAGS,
    }
    return _sha256(json.dumps(material, sort_keys=True).encode())


def build() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        sources = _fetch_sdist(workdir)
        objects = []
        for name, source in [(n, sources / n) for n in QUICKJS_SOURCES] + [
            ("shim.c", HERE / "shim.c")
        ]:
            obj = workdir / (name + ".o")
            subprocess.run(
                ["clang", *COMPILE_FLAGS, "-I", str(sources), "-c", str(source), "-o", str(obj)],
                check=True,
            )
            objects.append(str(obj))
        out = workdir / "guest.wasm"
        subprocess.run(["clang", *LINK_FLAGS, *objects, "-o", str(out)], check=True)
        data = out.read_bytes()
    OUTPUT.write_bytes(data)
    record = {
        "quickjs_ng": SDIST_VERSION,
        "inputs_sha256": inputs_digest(),
        "wasm_sha256": _sha256(data),
        "shadow_stack_bytes": SHADOW_STACK_BYTES,
    }
    RECORD.write_text(json.dumps(record, indent=2) + "\n")
    print(f"wrote {OUTPUT.name}: {len(data)} bytes, sha256 {record['wasm_sha256']}")


if __name__ == "__main__":
    build()
