"""Build a plugin bundle: one self-contained ES module, made with the real esbuild.

A bundle is what the host loads from a URL. Its default export is the plugin, and every import,
including the sdk itself, is inlined, because a Worker isolate cannot resolve packages.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal

__all__ = [
    "CONTRACT_MODULE",
    "DEFAULT_ALIASES",
    "PackagingError",
    "PackagingErrorCode",
    "SDK_MODULE",
    "build_bundle",
    "find_esbuild",
    "sdk_js_path",
]

SDK_MODULE = "@worker-host/sdk"
"""The module name plugin authors import the sdk by."""

CONTRACT_MODULE = "@zephyrcloudio/harness-plugin"
"""The contract's own module name; plugins written against the contract import it."""

ESBUILD_INSTALL_COMMAND = "npm install esbuild"

BUILD_TIMEOUT_SECONDS = 120.0
"""How long one esbuild run may take before the build fails."""

# The flags the contract's "Worker bundles" section prescribes, plus an explicit target.
_ESBUILD_FLAGS = (
    "--bundle",
    "--format=esm",
    "--platform=neutral",
    "--target=es2022",
    "--log-level=error",
    "--color=false",
)

PackagingErrorCode = Literal["esbuild_missing", "build_failed", "entry_not_found"]


class PackagingError(Exception):
    """A bundle could not be built.

    ``code`` is stable: ``esbuild_missing`` (no esbuild executable was found),
    ``entry_not_found`` (the entry file does not exist) or ``build_failed`` (esbuild
    reported an error, or the output is not a usable bundle). ``message`` is one line
    without absolute host paths, and ``str(err) == err.message``.
    """

    code: PackagingErrorCode
    message: str

    def __init__(self, code: PackagingErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message

    def __str__(self) -> str:
        return self.message

    def __repr__(self) -> str:
        return f"PackagingError({self.code!r}, {self.message!r})"

    def __reduce__(self) -> tuple[type[PackagingError], tuple[str, str]]:
        return (type(self), (self.code, self.message))


# Resources stay extracted (only needed when the package is not a plain directory) until exit.
_resource_files = contextlib.ExitStack()
atexit.register(_resource_files.close)


@functools.cache
def sdk_js_path() -> Path:
    """The packaged sdk module, ``sdk/js/index.mjs``, as a file on disk."""
    package = __name__.rpartition(".")[0]
    resource = resources.files(package) / "js" / "index.mjs"
    return _resource_files.enter_context(resources.as_file(resource))


DEFAULT_ALIASES: Mapping[str, str] = MappingProxyType(
    {SDK_MODULE: str(sdk_js_path()), CONTRACT_MODULE: str(sdk_js_path())}
)
"""Module names esbuild maps to the packaged sdk: ``@worker-host/sdk`` and the contract's name."""


def find_esbuild() -> Path:
    """Locate the esbuild executable.

    Looks on ``PATH``, then in ``./node_modules/.bin`` (the current directory), then in
    ``<sys.prefix>/node_modules/.bin`` (where the project's set-up script installs it).
    Raises ``PackagingError`` ``esbuild_missing`` when none is found.
    """
    found = shutil.which("esbuild")
    if found is not None:
        return Path(found)
    bases: list[Path] = []
    with contextlib.suppress(OSError):  # the current directory may have been removed
        bases.append(Path.cwd())
    bases.append(Path(sys.prefix))
    names = ("esbuild.cmd", "esbuild.exe", "esbuild") if os.name == "nt" else ("esbuild",)
    for base in bases:
        for name in names:
            candidate = base / "node_modules" / ".bin" / name
            if candidate.is_file() and os.access(candidate, os.X_OK):
                return candidate
    raise PackagingError(
        "esbuild_missing",
        "esbuild was not found on PATH, in ./node_modules/.bin or in the Python environment's "
        f"node_modules/.bin; install it with `{ESBUILD_INSTALL_COMMAND}`.",
    )


def build_bundle(
    entry: str | os.PathLike[str],
    outfile: str | os.PathLike[str] | None = None,
    *,
    aliases: Mapping[str, str] | None = None,
) -> bytes:
    """Bundle ``entry`` (JavaScript or TypeScript) into one self-contained ES module.

    Runs esbuild with ``--bundle --format=esm --platform=neutral --target=es2022`` and the
    module aliases: ``DEFAULT_ALIASES`` updated with ``aliases``. An alias value starting with
    ``./`` or ``../`` is a path relative to the current directory; other values are absolute
    paths or package names. esbuild runs in the entry's directory, so file comments in the
    bundle are relative to it and the same sources give the same bytes wherever they are built;
    the packaged sdk is labelled by its module name.

    Returns the bundle's bytes and also writes them to ``outfile`` when given. Raises
    ``PackagingError``: ``entry_not_found``, ``esbuild_missing``, or ``build_failed`` with the
    first error esbuild reported (``file:line:column: text``), or when the bundle has no
    default export or still imports a module.
    """
    entry_path = Path(os.path.abspath(entry))
    if not entry_path.is_file():
        raise PackagingError("entry_not_found", f"Bundle entry not found: {_display(entry)}")
    # esbuild reports paths relative to the real working directory; use the same one here.
    entry_path = Path(os.path.realpath(entry_path))
    workdir = entry_path.parent
    alias_args = _alias_args({**DEFAULT_ALIASES, **(aliases or {})})
    esbuild = find_esbuild()

    with tempfile.TemporaryDirectory(prefix="worker-host-bundle-") as scratch:
        bundle_file = Path(scratch, "bundle.mjs")
        meta_file = Path(scratch, "meta.json")
        command = [
            os.fspath(esbuild),
            # out=in form: the name is never read as an option, and an = in it
            # is not taken for this form.
            "bundle=./" + entry_path.name,
            *_ESBUILD_FLAGS,
            f"--outfile={bundle_file}",
            f"--metafile={meta_file}",
            *alias_args,
        ]
        try:
            completed = subprocess.run(
                command,
                cwd=workdir,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=BUILD_TIMEOUT_SECONDS,
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            raise PackagingError(
                "build_failed", f"esbuild did not finish within {BUILD_TIMEOUT_SECONDS:g} seconds"
            ) from exc
        except OSError as exc:
            raise PackagingError("build_failed", "esbuild could not be started") from exc
        if completed.returncode != 0:
            stderr = completed.stderr.decode("utf-8", errors="replace")
            raise PackagingError(
                "build_failed", _first_error(stderr, completed.returncode, workdir)
            )
        bundle = bundle_file.read_bytes()
        meta: Any = json.loads(meta_file.read_text(encoding="utf-8"))

    bundle = _check_and_label(bundle, meta, workdir)
    if outfile is not None:
        target = Path(outfile)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(bundle)
    return bundle


def _alias_args(aliases: Mapping[str, str]) -> list[str]:
    args: list[str] = []
    for name, value in aliases.items():
        # esbuild splits `--alias:NAME=VALUE` at the first `=`, so a name holding one would
        # silently map a different module.
        if not name or "=" in name:
            raise PackagingError("build_failed", f"Invalid alias name: {name!r}")
        if value.startswith(("./", "../")):
            # esbuild resolves relative alias targets against its working directory, which is
            # the entry's directory here; the caller means the current one.
            value = os.path.abspath(value)
        # One argv element per alias: no shell, so spaces in the path need no quoting.
        args.append(f"--alias:{name}={value}")
    return args


def _check_and_label(bundle: bytes, meta: Any, workdir: Path) -> bytes:
    """Check, from esbuild's metafile, that the bundle is one module with a default export and
    no imports left; then label the sdk's module comment."""
    outputs: Any = meta.get("outputs") if isinstance(meta, dict) else None
    if not isinstance(outputs, dict) or len(outputs) != 1:
        raise PackagingError("build_failed", "esbuild did not produce exactly one output file")
    (output,) = outputs.values()
    imports: Any = output.get("imports") or []
    if imports:
        first = imports[0].get("path", "?") if isinstance(imports[0], dict) else "?"
        raise PackagingError(
            "build_failed", f"The bundle still imports {_scrub(str(first), workdir)}"
        )
    if "default" not in (output.get("exports") or []):
        raise PackagingError(
            "build_failed", "The bundle has no default export; export the plugin as default"
        )
    # esbuild heads each module's code with a `// <path relative to the working directory>`
    # comment. For the packaged sdk that path depends on where Python is installed; label it by
    # its module name instead so that the bundle's bytes (its identity) do not.
    sdk_file = os.path.realpath(sdk_js_path())
    inputs: Any = meta.get("inputs")
    for key in inputs if isinstance(inputs, dict) else ():
        if os.path.realpath(os.path.join(workdir, key)) == sdk_file:
            marker = f"// {key}\n".encode()
            label = f"// {SDK_MODULE}\n".encode()
            if bundle.startswith(marker):
                bundle = label + bundle[len(marker) :]
            else:
                bundle = bundle.replace(b"\n" + marker, b"\n" + label, 1)
    return bundle


_ERROR_LINE = re.compile(r"\[ERROR\]\s*(?P<text>.*\S)")
_LOCATION_LINE = re.compile(r"^\s+(?P<file>.+?):(?P<line>\d+):(?P<column>\d+):\s*$")


def _first_error(stderr: str, returncode: int, workdir: Path) -> str:
    """esbuild's first error as ``file:line:column: text`` on one line, without host paths."""
    lines = stderr.splitlines()
    for index, line in enumerate(lines):
        found = _ERROR_LINE.search(line)
        if found is None:
            continue
        text = _scrub(found.group("text"), workdir)
        following = next((rest for rest in lines[index + 1 :] if rest.strip()), "")
        location = _LOCATION_LINE.match(following)
        if location is None:
            return text
        where = _shown_path(os.path.join(workdir, location.group("file")), workdir)
        return f"{where}:{location.group('line')}:{location.group('column')}: {text}"
    first = next((line.strip() for line in lines if line.strip()), "")
    if first:
        return _scrub(first, workdir)
    return f"esbuild exited with status {returncode}"


# An absolute path: in double quotes (where it may hold spaces), or bare up to a delimiter.
# The look-behind keeps URLs (`https://host/path`) and relative paths (`a/b`) out.
_QUOTED_ABSOLUTE = re.compile(r'"(?P<path>(?:/|[A-Za-z]:[\\/])[^"\n]*)"')
_BARE_ABSOLUTE = re.compile(r"(?<![\w.@:/\\-])(?P<path>(?:/|[A-Za-z]:[\\/])[^\s\"'`,;()\[\]{}<>]+)")


def _scrub(text: str, workdir: Path) -> str:
    """Replace absolute paths in ``text`` with what ``_shown_path`` shows for them."""
    text = _QUOTED_ABSOLUTE.sub(lambda m: f'"{_shown_path(m.group("path"), workdir)}"', text)
    return _BARE_ABSOLUTE.sub(lambda m: _shown_path(m.group("path"), workdir), text)


def _shown_path(path: str, workdir: Path) -> str:
    """A path as messages show it: relative inside ``workdir``, the sdk by its module name,
    anything else by its file name only."""
    absolute = os.path.normpath(os.path.join(workdir, path))
    sdk_dir = os.path.dirname(os.path.realpath(sdk_js_path()))
    for base, prefix in ((os.fspath(workdir), ""), (sdk_dir, f"{SDK_MODULE}/")):
        with contextlib.suppress(ValueError):  # different drives on Windows
            relative = os.path.relpath(absolute, base)
            if relative != os.pardir and not relative.startswith(os.pardir + os.sep):
                return (prefix + relative).replace(os.sep, "/")
    return os.path.basename(absolute) or "<path>"


def _display(entry: str | os.PathLike[str]) -> str:
    """The entry as the caller wrote it when relative; otherwise its file name only."""
    raw = os.fspath(entry)
    return raw if not os.path.isabs(raw) else (os.path.basename(raw) or "<path>")
