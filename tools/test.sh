#!/usr/bin/env bash
# Runs every test of the repository, after installing what the tests need (tools/setup.sh).
# The storage engine's tests run twice: on io_uring (the default when the kernel allows it) and
# on the portable pread/pwrite path.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/hotledger-target}"
export PATH="$HOME/.cargo/bin:$PATH"
tools/setup.sh

echo "== cargo fmt --check"
cargo fmt --all -- --check
echo "== cargo clippy -D warnings"
cargo clippy -j 2 --workspace --all-targets -- -D warnings
echo "== tests, default IO (io_uring when available)"
HOTLEDGER_IO=auto cargo test -j 2 --workspace
echo "== kv tests, portable IO"
HOTLEDGER_IO=portable cargo test -j 2 -p kv
echo "== fuzz targets: the saved inputs replayed (fuzz/regressions)"
cargo test -j 2 -q --manifest-path fuzz/Cargo.toml
if rustup toolchain list 2>/dev/null | grep -q '^nightly' && command -v cargo-fuzz >/dev/null 2>&1; then
    for target in frames sql_front; do
        echo "== fuzz $target for ${HOTLEDGER_FUZZ_SECONDS:-60} s"
        mkdir -p "fuzz/corpus/$target"
        fuzz_log=$(mktemp)
        if ! cargo +nightly fuzz run -j 2 "$target" "fuzz/corpus/$target" "fuzz/regressions/$target" -- \
            -max_total_time="${HOTLEDGER_FUZZ_SECONDS:-60}" -max_len=4096 -rss_limit_mb=4096 >"$fuzz_log" 2>&1; then
            tail -n 60 "$fuzz_log" >&2
            echo "fuzz $target failed: the input is in fuzz/artifacts/$target; add it to fuzz/regressions/$target" >&2
            exit 1
        fi
        grep -E "^#[0-9]+: cov" "$fuzz_log" | tail -n 1
        rm -f "$fuzz_log"
    done
else
    echo "== fuzz targets not run (needs a nightly toolchain and cargo-fuzz)"
fi
echo "== kv-bench runs end to end (a correctness check of the tool, not a measurement)"
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
cargo run -j 2 -q -p kv-bench -- --keys 20000 --duration-s 1 --checkpoint-interval-s 1 \
    --workloads update-zipf,read-uniform --out "$scratch" 2>&1 | tail -n 5
test -s "$scratch/summary.csv" && test -s "$scratch/timeseries.csv"
echo "== tools/bench --quick runs end to end against PostgreSQL (the tool's correctness, not speed)"
tools/bench/run --quick --binary "$CARGO_TARGET_DIR/debug/hotledger" --out "$scratch/bench" | tail -n 6
for f in summary.md results.csv steady.csv throughput.png latency.png steady.png report.png; do
    test -s "$scratch/bench/$f" || { echo "tools/bench did not write $f" >&2; exit 1; }
done
echo "== all tests passed"
