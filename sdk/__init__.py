"""The author side of worker-host.

``sdk/js`` is the ES module plugin authors import (``@worker-host/sdk``, with TypeScript
declarations). This package holds the Python helpers authors run: packaging a plugin into a
bundle with esbuild.
"""

from sdk._packaging import (
    CONTRACT_MODULE,
    DEFAULT_ALIASES,
    SDK_MODULE,
    PackagingError,
    PackagingErrorCode,
    build_bundle,
    find_esbuild,
    sdk_js_path,
)

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
