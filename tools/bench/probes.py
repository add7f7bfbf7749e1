"""Measurements beside the sweep: the machine's physical reference points and hotledger's
memory targets (idle connections, data file size)."""

import os
import subprocess
import time

import meter
from driver import pgbench
from workloads import WORKLOADS, load_ledger

# Column bytes of one `accounts` row as PostgreSQL's fixed-width types count them: id,
# ledger, code, four balances, three flags, user_data, created_at.
ACCOUNT_ROW_BYTES = 8 + 4 + 4 + 4 * 8 + 3 * 1 + 8 + 8


def fdatasync_latency(directory, count):
    """Overwrite 4 KiB of a preallocated file and fdatasync it, `count` times: what one
    durable log append costs on this disk. Returns (p50 µs, p99 µs)."""
    path = os.path.join(directory, "fdatasync-probe")
    fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o600)
    try:
        os.posix_fallocate(fd, 0, 1 << 20)
        os.fdatasync(fd)
        block = b"\xa5" * 4096
        samples = []
        for i in range(count):
            start = time.perf_counter_ns()
            os.pwrite(fd, block, (i % 256) * 4096)
            os.fdatasync(fd)
            samples.append((time.perf_counter_ns() - start) / 1000)
    finally:
        os.close(fd)
        os.unlink(path)
    samples.sort()
    return round(samples[len(samples) // 2]), round(samples[min(len(samples) - 1, int(0.99 * len(samples)))])


def select1_round_trip(postgres, seconds, workdir):
    """One connection running `SELECT 1` (prepared) against PostgreSQL: the loopback round
    trip plus the least a server can do per statement. Returns (p50 µs, TPS)."""
    result = pgbench(postgres, WORKLOADS["noop1"], 1, seconds, workdir)
    return round(result.latencies_us[len(result.latencies_us) // 2]) if result.latencies_us else None, round(result.tps)


def idle_connection_bytes(server, connections, workdir):
    """Memory per idle connection: the server's memory with `connections` sessions open and
    sleeping (pgbench running `\\sleep`), less its memory before, divided by the count."""
    script = os.path.join(workdir, "idle.sql")
    with open(script, "w") as f:
        f.write("\\sleep 6 s\n")
    time.sleep(0.5)
    before = meter.memory_bytes(server.pids())
    cmd = ["pgbench", "-h", "127.0.0.1", "-p", str(server.port), "-n", "-c", str(connections), "-j", "2",
           "-T", "6", "-f", script, server.db]
    proc = subprocess.Popen(cmd, env=server.env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    # pgbench opens every connection before the first \sleep ends; sample while they idle.
    time.sleep(4)
    during = meter.memory_bytes(server.pids())
    _, err = proc.communicate(timeout=60)
    if proc.returncode != 0:
        raise SystemExit(f"idle-connection probe failed on {server.name}: {err.strip()[-300:]}")
    return max(0, during - before) / connections


def data_file_size(hotledger, postgres, accounts):
    """Loads `accounts` accounts into a fresh hotledger (then a clean stop: final checkpoint)
    and into PostgreSQL; returns hotledger's data file and directory bytes, PostgreSQL's
    `accounts` table with its index, and the rows' raw column bytes."""
    hotledger.start(fresh=True)
    load_ledger(hotledger, accounts)
    hotledger.stop()
    file_bytes, dir_bytes = hotledger.data_file_bytes(), hotledger.dir_bytes()
    load_ledger(postgres, accounts)
    pg_bytes = int(postgres.psql("select pg_total_relation_size('accounts')"))
    return {
        "accounts": accounts + 1,
        "raw_bytes": (accounts + 1) * ACCOUNT_ROW_BYTES,
        "hotledger_file_bytes": file_bytes,
        "hotledger_dir_bytes": dir_bytes,
        "postgresql_table_bytes": pg_bytes,
    }
