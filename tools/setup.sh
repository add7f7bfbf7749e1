#!/usr/bin/env bash
# Installs what building and testing hotledger needs, idempotently. Called by tools/test.sh.
#   tools/setup.sh          everything the tests need
#   tools/setup.sh bench    only what the benchmark tool needs (tools/bench/run)
set -euo pipefail
cd "$(dirname "$0")/.."
scope="${1:-all}"

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

# PostgreSQL 15 tools the tests drive (psql, pgbench); the server package also brings the
# postgres binary the benchmark compares against.
if ! command -v pgbench >/dev/null 2>&1 || ! command -v psql >/dev/null 2>&1 ||
    [ ! -x /usr/lib/postgresql/15/bin/initdb ]; then
    echo "setup: installing PostgreSQL 15 (psql, pgbench)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq postgresql-15 postgresql-client-15 >/dev/null
fi

# Python packages: matplotlib for the benchmark's charts, psycopg for tests/drivers.
venv="$HOME/.cache/hotledger-venv"
if [ ! -x "$venv/bin/python" ]; then
    if ! python3 -m venv "$venv" >/dev/null 2>&1; then
        # Debian ships the venv module separately.
        rm -rf "$venv"
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null
        python3 -m venv "$venv"
    fi
fi
if ! "$venv/bin/python" -c "import matplotlib" >/dev/null 2>&1; then
    "$venv/bin/pip" install -q "matplotlib==3.9.2"
fi
# The failover benchmark's load driver (tools/bench/failover) is Go.
if command -v go >/dev/null 2>&1; then
    (cd tools/bench/failover-load && go mod download)
fi
[ "$scope" = bench ] && exit 0

# Driver packages for tests/drivers (see tests/drivers/README.md).
if ! "$venv/bin/python" -c "import psycopg" >/dev/null 2>&1; then
    "$venv/bin/pip" install -q "psycopg[binary]==3.2.3"
fi
if ! "$venv/bin/python" -c "import sqlalchemy" >/dev/null 2>&1; then
    "$venv/bin/pip" install -q "sqlalchemy==2.0.36"
fi
if ! "$venv/bin/python" -c "import django" >/dev/null 2>&1; then
    "$venv/bin/pip" install -q "django==5.1.3"
fi
if [ ! -d tests/drivers/node/node_modules/pg ]; then
    (cd tests/drivers/node && npm ci --no-audit --no-fund --loglevel=error)
fi
# The console's browser test (server/tests/console.rs): Debian's Chromium and Firefox ESR,
# playwright-core and puppeteer-core to drive them, and Prometheus' own text parser for
# /metrics.
if ! command -v chromium >/dev/null 2>&1 || ! command -v firefox-esr >/dev/null 2>&1; then
    echo "setup: installing Chromium and Firefox ESR"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium firefox-esr >/dev/null
fi
if [ ! -d tests/console/node_modules/playwright-core ] || [ ! -d tests/console/node_modules/puppeteer-core ]; then
    (cd tests/console && npm ci --no-audit --no-fund --loglevel=error)
fi
if ! "$venv/bin/python" -c "import prometheus_client" >/dev/null 2>&1; then
    "$venv/bin/pip" install -q "prometheus-client==0.21.0"
fi
if ! command -v go >/dev/null 2>&1; then
    echo "setup: go not found; install Go 1.22 or newer (the pgx driver test and the linearizability checker need it)" >&2
    exit 1
fi
(cd tests/drivers/go && go mod download)
(cd tests/linearizability && go mod download)
if [ ! -f tests/drivers/java/target/deps/postgresql-42.7.4.jar ]; then
    (cd tests/drivers/java && mvn -q -B dependency:copy-dependencies -DoutputDirectory=target/deps)
fi

# The fuzz targets (fuzz/): cargo-fuzz, and a nightly toolchain for libFuzzer's
# instrumentation. Without nightly, tools/test.sh replays the saved inputs only.
if ! command -v cargo-fuzz >/dev/null 2>&1; then
    cargo install -q --locked cargo-fuzz@0.13.2
fi
if command -v rustup >/dev/null 2>&1 && ! rustup toolchain list | grep -q '^nightly'; then
    rustup toolchain install nightly --profile minimal >/dev/null 2>&1 ||
        echo "setup: no nightly toolchain (the fuzz targets will replay their saved inputs only)" >&2
fi
