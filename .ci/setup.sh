#!/usr/bin/env bash
# Shared set-up for the README's two commands: a venv with the project and its
# test dependencies, esbuild from npm for building bundles, and bubblewrap for
# the sandboxed shell. Idempotent; safe to run on a fresh machine.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# The sandboxed shell runs commands under bubblewrap (0.8.0 or newer).
if ! command -v bwrap >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ]; then
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap
    else
        sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap
    fi
fi

ESBUILD_VERSION=0.28.2
TYPESCRIPT_VERSION=5.9.3

if [ ! -x .venv/bin/python ]; then
    python3 -m venv .venv
fi
.venv/bin/python -m pip install --quiet --disable-pip-version-check -e '.[test,dev]'

# esbuild builds bundles; TypeScript checks that sdk/js's typings hold.
if [ ! -x .venv/node_modules/.bin/esbuild ] || [ ! -x .venv/node_modules/.bin/tsc ] \
    || [ "$(.venv/node_modules/.bin/esbuild --version)" != "$ESBUILD_VERSION" ] \
    || [ "$(.venv/node_modules/.bin/tsc --version)" != "Version $TYPESCRIPT_VERSION" ]; then
    npm install --silent --no-save --no-package-lock --no-audit --no-fund \
        --prefix .venv "esbuild@$ESBUILD_VERSION" "typescript@$TYPESCRIPT_VERSION"
fi
