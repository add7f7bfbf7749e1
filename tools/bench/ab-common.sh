# Sourced by the A/B scripts (partitions-ab, mixed-ab, pool-ab, tpcb-ab, batch-cpu) after they
# set `port` and `work` (a scratch directory): a hotledger on a fresh data directory, loaded
# with the benchmarks' 100,001 accounts when asked, and the helpers around it. SERVER_ENV
# (e.g. "env MIMALLOC_VERBOSE=1") prefixes the server's command line.

export PGPASSWORD=bench

psql_hl() { psql -h 127.0.0.1 -p "$port" -U ledger -X -Atq "$@" ledger; }

# The TPS pgbench printed into FILE.
tps_of() { sed -n 's/^tps = \([0-9.]*\).*/\1/p' "$1"; }

# start_server BINARY SERVE_ARGS...: starts BINARY on $work/data (emptied first) and waits
# until it answers; the server's process id is left in `pid`.
start_server() {
    local binary=$1
    shift
    rm -rf "$work/data"
    HOTLEDGER_PASSWORD=bench ${SERVER_ENV:-} "$binary" serve --data-dir "$work/data" --listen "127.0.0.1:$port" \
        "$@" > "$work/server.log" 2>&1 &
    pid=$!
    for _ in $(seq 150); do psql_hl -c "select 1" > /dev/null 2>&1 && break; sleep 0.2; done
}

# load_accounts PORT: loads the benchmarks' accounts 1..100,001 through the server on PORT.
load_accounts() {
    python3 -c "import sys; sys.stdout.write(''.join(f'{i}\t1\t1\n' for i in range(1, 100002)))" |
        psql -h 127.0.0.1 -p "$1" -U ledger -X -Atq -c "COPY accounts (id, ledger, code) FROM STDIN" ledger
}

# start_loaded BINARY SERVE_ARGS...: start_server, then loads accounts 1..100,001.
start_loaded() {
    start_server "$@"
    load_accounts "$port"
}

# wait_prefaulted: with --prefault-pool, waits (up to 120 s) until the pool's memory is all
# mapped, so that a run measures a server that had time to fault its pool in.
wait_prefaulted() {
    local stats mapped capacity
    for _ in $(seq 600); do
        stats=$(psql_hl -c "SHOW storage_stats")
        mapped=$(echo "$stats" | sed -n 's/.*mapped_pages=\([0-9]*\).*/\1/p')
        capacity=$(echo "$stats" | sed -n 's/.*pool_capacity_pages=\([0-9]*\).*/\1/p')
        [ "${mapped:-0}" -lt "${capacity:-1}" ] || return 0
        sleep 0.2
    done
    echo "the pool was not faulted in within 120 s" >&2
}

# task_of NAME: the /proc directory of the server thread called NAME (the first, if several),
# whose schedstat holds its nanoseconds on a CPU and waiting for one.
task_of() { grep -lx "$1" /proc/"$pid"/task/*/comm | head -1 | xargs dirname; }

# restart_after_kill9 BINARY SERVE_ARGS...: kills the server with SIGKILL, starts BINARY
# again on the same $work/data, waits until it listens (the log since the last checkpoint
# is replayed meanwhile), and leaves its process id in `pid` and the seconds it took in
# `restart_s` (not printed: called in a subshell, it could not set `pid`).
restart_after_kill9() {
    local binary=$1 started
    shift
    kill -9 "$pid"
    wait "$pid" 2>/dev/null || true
    started=$(date +%s.%N)
    HOTLEDGER_PASSWORD=bench "$binary" serve --data-dir "$work/data" --listen "127.0.0.1:$port" \
        "$@" > "$work/restart.log" 2>&1 &
    pid=$!
    until grep -q listening "$work/restart.log"; do
        kill -0 "$pid" 2>/dev/null || { cat "$work/restart.log"; exit 1; }
        sleep 0.05
    done
    restart_s=$(awk -v a="$started" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }')
}
