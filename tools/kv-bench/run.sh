#!/usr/bin/env bash
# Builds kv-bench in release mode and runs it, then plots the time series.
#   tools/kv-bench/run.sh [--rocksdb] [kv-bench flags...]
# --rocksdb builds the RocksDB engine too (a long C++ build; needs libclang-dev) and adds it to
# the engines. Results go to docs/bench/kv unless --out is given.
set -euo pipefail
cd "$(dirname "$0")/../.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/hotledger-target}"
features=()
engines="hotledger,redb"
if [ "${1:-}" = "--rocksdb" ]; then
    shift
    command -v apt-get >/dev/null && ! dpkg -s libclang-dev >/dev/null 2>&1 && apt-get install -y libclang-dev
    features=(--features rocksdb)
    engines="hotledger,redb,rocksdb"
fi
out=docs/bench/kv
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do
    [ "${args[$i]}" = "--out" ] && out="${args[$((i + 1))]}"
done
cargo build -j 2 --release -p kv-bench "${features[@]}"
"$CARGO_TARGET_DIR/release/kv-bench" --engines "$engines" --out "$out" "$@"
python3 -c "import matplotlib" 2>/dev/null || python3 -m pip install --quiet matplotlib
python3 tools/kv-bench/plot.py "$out"
