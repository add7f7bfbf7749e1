#!/usr/bin/env bash
# Installs what building and testing hotledger needs, idempotently. Called by tools/test.sh.
set -euo pipefail

if ! command -v cargo >/dev/null 2>&1; then
    if [ -x "$HOME/.cargo/bin/cargo" ]; then
        export PATH="$HOME/.cargo/bin:$PATH"
    else
        echo "setup: cargo not found; install Rust (rustup, 1.90 or newer) first" >&2
        exit 1
    fi
fi
if command -v rustup >/dev/null 2>&1; then
    for component in rustfmt clippy; do
        rustup component list --installed 2>/dev/null | grep -q "^$component" || rustup component add "$component"
    done
fi
