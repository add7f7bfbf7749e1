#!/usr/bin/env python3
"""pgbench workloads against hotledger and PostgreSQL 15, side by side in one run, plus the
client's own ceiling (a do-nothing transaction of the workload's shape).

Workloads:
  tpcb      pgbench's TPC-B at scale 1 (one hot branch row); ceiling: 7 round trips.
  transfer  the hot-account transfer: CALL transfer(...) crediting account 1 from a random one
            of 100,000 accounts (tools/pgbench/transfer.sql); PostgreSQL runs the equivalent
            plpgsql procedure (tools/pgbench/postgres_ledger.sql); ceiling: 1 round trip.
  batch     hotledger only: multi-row INSERT INTO transfers of 1,000 rows per statement;
            reports transfers per second (TPS x 1,000).

Starts both servers itself on private ports and data directories, alternates A/B for each
client count, computes latency percentiles from pgbench's per-transaction logs, and reports
hotledger's group commit (commands per fsync). Writes a CSV and a Markdown table.

    tools/pgbench_compare.py [--workload tpcb|transfer|batch] [--clients 1,4,16,64,128]
                             [--duration 20] [--rounds 1] [--out DIR]

Needs: cargo, PostgreSQL 15 server binaries (tools/setup.sh installs them), root or a user
that can run initdb.
"""

import argparse
import csv
import glob
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PG_BIN = "/usr/lib/postgresql/15/bin"
NOOP = {
    "tpcb": "BEGIN;\nSELECT 1;\nSELECT 1;\nSELECT 1;\nSELECT 1;\nSELECT 1;\nEND;\n",
    "transfer": "SELECT 1;\n",
}
ACCOUNTS = 100_000
BATCH_ROWS = 1_000


def batch_script():
    """One INSERT of BATCH_ROWS transfers, each crediting account 1 from a pseudo-random
    account; ids are unique per statement and random across statements."""
    rows = []
    for k in range(BATCH_ROWS):
        rows.append(f"(:base * {BATCH_ROWS} + {k}, 2 + (:base * 7919 + {k * 104729}) % {ACCOUNTS}, 1, 1, 1, 1)")
    return ("\\set base random(1, 9000000000000)\n"
            "INSERT INTO transfers (id, debit_account_id, credit_account_id, amount, ledger, code) VALUES\n"
            + ",\n".join(rows) + ";\n")


def run(cmd, env=None, check=True, **kw):
    return subprocess.run(cmd, env=env, check=check, text=True, capture_output=True, **kw)


def pg_user_prefix():
    # initdb refuses to run as root: run PostgreSQL as the postgres user when we are root.
    return ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []


class Postgres:
    def __init__(self, port, workdir):
        self.port = port
        self.data = os.path.join(workdir, "pgdata")
        os.makedirs(self.data)
        if os.geteuid() == 0:
            shutil.chown(workdir, "postgres")
            shutil.chown(self.data, "postgres")
        prefix = pg_user_prefix()
        run(prefix + [f"{PG_BIN}/initdb", "-D", self.data, "-U", "postgres", "--auth=trust"])
        run(prefix + [f"{PG_BIN}/pg_ctl", "-D", self.data, "-l", os.path.join(self.data, "log"), "-w", "-o",
                      f"-p {port} -k {workdir} -c max_connections=300 -c listen_addresses=127.0.0.1", "start"])
        self.env = dict(os.environ, PGUSER="postgres")
        self.db = "postgres"

    def stop(self):
        run(pg_user_prefix() + [f"{PG_BIN}/pg_ctl", "-D", self.data, "-m", "fast", "stop"], check=False)


class Hotledger:
    def __init__(self, port, workdir, binary):
        self.port = port
        self.log = open(os.path.join(workdir, "hotledger.log"), "w")
        self.proc = subprocess.Popen([binary, "serve", "--data-dir", os.path.join(workdir, "hl"),
                                      "--listen", f"127.0.0.1:{port}"],
                                     env=dict(os.environ, HOTLEDGER_PASSWORD="bench"),
                                     stdout=self.log, stderr=self.log)
        self.env = dict(os.environ, PGUSER="ledger", PGPASSWORD="bench")
        self.db = "ledger"
        deadline = time.time() + 60
        while time.time() < deadline:
            if run(["psql", "-h", "127.0.0.1", "-p", str(port), "-Atc", "select 1", self.db], env=self.env,
                   check=False).returncode == 0:
                return
            time.sleep(0.2)
        raise SystemExit("hotledger did not start")

    def group_commit(self):
        out = run(["psql", "-h", "127.0.0.1", "-p", str(self.port), "-Atc", "show group_commit_stats", self.db],
                  env=self.env).stdout.strip()
        return dict(kv.split("=") for kv in out.split())

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=120)


def pgbench(server, args, logdir=None):
    cmd = ["pgbench", "-h", "127.0.0.1", "-p", str(server.port)] + args
    if logdir:
        cmd += ["-l", "--log-prefix", os.path.join(logdir, "tx")]
    cmd.append(server.db)
    out = run(cmd, env=server.env, check=False, cwd=logdir or None)
    if out.returncode != 0:
        raise SystemExit(f"pgbench failed: {' '.join(cmd)}\n{out.stdout}\n{out.stderr}")
    tps = failed = None
    for line in out.stdout.splitlines():
        if line.startswith("tps = "):
            tps = float(line.split()[2])
        if line.startswith("number of failed transactions:"):
            failed = int(line.split(":")[1].split()[0])
    return tps, failed or 0


def percentiles(logdir):
    latencies = []
    for path in glob.glob(os.path.join(logdir, "tx*")):
        with open(path) as f:
            for line in f:
                parts = line.split()
                if len(parts) >= 3 and parts[2].isdigit():
                    latencies.append(int(parts[2]))
    latencies.sort()
    if not latencies:
        return {}
    pick = lambda q: latencies[min(len(latencies) - 1, int(q * len(latencies)))] / 1000.0
    return {"p50_ms": pick(0.50), "p99_ms": pick(0.99), "p999_ms": pick(0.999), "max_ms": latencies[-1] / 1000.0}


def median(values):
    values = sorted(v for v in values if v is not None)
    return values[len(values) // 2] if values else None


def markdown(rows):
    """Medians over rounds: TPS, latency percentiles, ratio to PostgreSQL and to the ceiling."""
    counts = sorted({r["clients"] for r in rows})
    pick = lambda system, c, key: median([r.get(key) for r in rows if r["system"] == system and r["clients"] == c])
    lines = [
        "| clients | PostgreSQL TPS | hotledger TPS | ratio | ceiling TPS (noop, PostgreSQL) | hotledger / ceiling "
        "| PostgreSQL p99.9 ms | hotledger p50 / p99 / p99.9 ms | commands per fsync |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for c in counts:
        pg, hl = pick("postgresql", c, "tps"), pick("hotledger", c, "tps")
        ceiling = pick("ceiling (noop, postgresql)", c, "tps")
        lines.append(
            f"| {c} | {pg:,} | {hl:,} | {hl / pg:.1f}x | {ceiling:,} | {100 * hl / ceiling:.0f}% "
            f"| {pick('postgresql', c, 'p999_ms')} | {pick('hotledger', c, 'p50_ms')} / {pick('hotledger', c, 'p99_ms')} / "
            f"{pick('hotledger', c, 'p999_ms')} | {pick('hotledger', c, 'commands_per_fsync')} |"
        )
    return "\n".join(lines) + "\n"


def batch_markdown(rows):
    counts = sorted({r["clients"] for r in rows})
    pick = lambda c, key: median([r.get(key) for r in rows if r["clients"] == c])
    lines = ["| connections | statements/s (1,000 transfers each) | transfers/s | p50 / p99 / p99.9 ms per statement "
             "| commands per fsync |", "|---:|---:|---:|---:|---:|"]
    for c in counts:
        lines.append(f"| {c} | {pick(c, 'tps'):,} | {pick(c, 'transfers_per_s'):,} | {pick(c, 'p50_ms')} / "
                     f"{pick(c, 'p99_ms')} / {pick(c, 'p999_ms')} | {pick(c, 'commands_per_fsync')} |")
    return "\n".join(lines) + "\n"


def setup_ledger(pg, hl):
    """The ledger's accounts on both systems: 100,001 accounts, account 1 the hot one.
    PostgreSQL gets hotledger's own ledger tables (the migration, less its ledger_role
    options), then the procedure of tools/pgbench/postgres_ledger.sql."""
    with open(os.path.join(ROOT, "migrations", "0002_ledger.sql")) as f:
        tables = re.sub(r"\s*WITH \(ledger_role = '\w+'\)", "", f.read())
    drop = "DROP TABLE IF EXISTS transfers, accounts, pending_transfers, account_balances;\n"
    psql = ["psql", "-h", "127.0.0.1", "-p", str(pg.port), "-q", "-v", "ON_ERROR_STOP=1"]
    run(psql + [pg.db], env=pg.env, input=drop + tables)
    run(psql + ["-f", os.path.join(ROOT, "tools", "pgbench", "postgres_ledger.sql"), pg.db], env=pg.env)
    rows = "".join(f"{i}\t1\t1\n" for i in range(1, ACCOUNTS + 2))
    run(["psql", "-h", "127.0.0.1", "-p", str(hl.port), "-v", "ON_ERROR_STOP=1", "-c",
         "COPY accounts (id, ledger, code) FROM STDIN", hl.db], env=hl.env, input=rows)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workload", choices=["tpcb", "transfer", "batch"], default="tpcb")
    parser.add_argument("--clients", default=None,
                        help="client counts (default 1,4,16,64,128; transfer 1,16,64,128,256; batch 8)")
    parser.add_argument("--duration", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=1, help="A/B repetitions per client count")
    parser.add_argument("--out", default=os.path.join(ROOT, "docs", "bench", "pgbench"))
    parser.add_argument("--binary", default=None, help="hotledger binary (default: build release)")
    args = parser.parse_args()
    if args.clients is None:
        args.clients = {"tpcb": "1,4,16,64,128", "transfer": "1,16,64,128,256", "batch": "8"}[args.workload]

    binary = args.binary
    if not binary:
        target = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
        run(["cargo", "build", "--release", "-j", "2", "-p", "server"], cwd=ROOT)
        binary = os.path.join(target, "release", "hotledger")
    os.makedirs(args.out, exist_ok=True)
    work = tempfile.mkdtemp(prefix="pgbench-compare-")
    os.chmod(work, 0o777)
    pgdir = os.path.join(work, "pg")
    os.makedirs(pgdir)
    pg = Postgres(24432, pgdir)
    hl = Hotledger(24433, work, binary)
    rows = []
    workload = args.workload
    script = []
    try:
        if workload == "tpcb":
            for server in (pg, hl):
                pgbench(server, ["-i", "-s", "1", "-q"])
        else:
            setup_ledger(pg, hl)
            path = os.path.join(ROOT, "tools", "pgbench", "transfer.sql")
            if workload == "batch":
                path = os.path.join(work, "batch.sql")
                with open(path, "w") as f:
                    f.write(batch_script())
            script = ["-f", path]
        for n, clients in enumerate(int(c) for c in args.clients.split(",")):
            if workload != "tpcb" and n > 0:
                # Every client count starts from the same state: without this, later counts
                # would run against tables millions of transfers larger.
                hl.stop()
                shutil.rmtree(os.path.join(work, "hl"))
                hl = Hotledger(24433, work, binary)
                setup_ledger(pg, hl)
            for rnd in range(args.rounds):
                systems = [("hotledger", hl)] if workload == "batch" else [("postgresql", pg), ("hotledger", hl)]
                for name, server in systems:
                    before = hl.group_commit() if server is hl else None
                    logdir = tempfile.mkdtemp(dir=work)
                    # pgbench allows 255 parameters per prepared statement; the batch's 2,000
                    # uses of :base go as text.
                    mode = "simple" if workload == "batch" else "prepared"
                    tps, failed = pgbench(server, ["-n", "-M", mode, "-c", str(clients), "-j", "2",
                                                   "-T", str(args.duration)] + script, logdir)
                    row = {"system": name, "workload": workload, "clients": clients, "round": rnd, "tps": round(tps),
                           "failed": failed}
                    if workload == "batch":
                        row["transfers_per_s"] = round(tps * BATCH_ROWS)
                    row.update(percentiles(logdir))
                    if before:
                        after = hl.group_commit()
                        commands = int(after["commands"]) - int(before["commands"])
                        fsyncs = int(after["fsyncs"]) - int(before["fsyncs"])
                        row["commands_per_fsync"] = round(commands / max(fsyncs, 1), 1)
                    shutil.rmtree(logdir)
                    rows.append(row)
                    print(row, flush=True)
            if workload == "batch":
                continue
            # The client's own ceiling, measured in the same run against PostgreSQL.
            noop = os.path.join(work, "noop.sql")
            with open(noop, "w") as f:
                f.write(NOOP[workload])
            for name, server in (("ceiling (noop, postgresql)", pg), ("ceiling (noop, hotledger)", hl)):
                tps, _ = pgbench(server, ["-n", "-M", "prepared", "-c", str(clients), "-j", "2", "-T",
                                          str(max(5, args.duration // 2)), "-f", noop])
                rows.append({"system": name, "workload": "noop", "clients": clients, "round": 0, "tps": round(tps)})
                print(rows[-1], flush=True)
    finally:
        hl.stop()
        pg.stop()
    fields = ["system", "workload", "clients", "round", "tps", "failed", "p50_ms", "p99_ms", "p999_ms", "max_ms",
              "commands_per_fsync", "transfers_per_s"]
    with open(os.path.join(args.out, "summary.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        for r in rows:
            w.writerow(r)
    table = batch_markdown(rows) if workload == "batch" else markdown(rows)
    with open(os.path.join(args.out, "summary.md"), "w") as f:
        f.write(table)
    print(table)
    print(f"wrote {args.out}/summary.csv and summary.md")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
