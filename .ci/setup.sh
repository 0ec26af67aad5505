#!/usr/bin/env bash
# Shared set-up for the README's two commands: a venv with the project and its
# test dependencies, esbuild from npm for building bundles, and bubblewrap for
# the sandboxed shell. Idempotent; safe to run on a fresh machine.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

ESBUILD_VERSION=0.28.2

if [ ! -x .venv/bin/python ]; then
    python3 -m venv .venv
fi
.venv/bin/python -m pip install --quiet --disable-pip-version-check -e '.[test]'

if [ ! -x .venv/node_modules/.bin/esbuild ] \
    || [ "$(.venv/node_modules/.bin/esbuild --version)" != "$ESBUILD_VERSION" ]; then
    npm install --silent --no-save --no-package-lock --no-audit --no-fund \
        --prefix .venv "esbuild@$ESBUILD_VERSION"
fi
