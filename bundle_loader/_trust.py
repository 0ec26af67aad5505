"""Which certificate authorities a fetch trusts."""

from __future__ import annotations

import os
import ssl

import httpx

from ._errors import BundleLoaderError

CERT_FILE_ENV = "SSL_CERT_FILE"


def tls_context(ca_bundle: str | os.PathLike[str] | None) -> ssl.SSLContext:
    """Build a verifying TLS client context.

    Trust, first match wins: exactly the PEM file ``ca_bundle``; else exactly
    the file named by a non-empty ``SSL_CERT_FILE`` environment variable; else
    certifi's bundle (httpx's default). Verification and host name checking are
    always on. httpx 0.28 would read ``SSL_CERT_FILE`` itself only with
    ``trust_env=True``, which also turns on proxies and .netrc credentials from
    the environment; fetches run with ``trust_env=False``, so the variable is
    honoured here instead. ``SSL_CERT_DIR`` is not consulted.

    A file that cannot be read or parsed raises ``request_failed``.
    """
    if ca_bundle is not None:
        return _load(os.fspath(ca_bundle), "ca_bundle")
    env_file = os.environ.get(CERT_FILE_ENV)
    if env_file:
        return _load(env_file, CERT_FILE_ENV)
    return httpx.create_ssl_context(verify=True, trust_env=False)


def _load(cafile: str, source: str) -> ssl.SSLContext:
    try:
        return ssl.create_default_context(cafile=cafile)
    except (OSError, ValueError) as exc:  # ssl.SSLError is an OSError
        raise BundleLoaderError(
            "request_failed", f"could not load the trusted CA certificates from {source}"
        ) from exc
