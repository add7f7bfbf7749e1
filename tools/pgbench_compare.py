#!/usr/bin/env python3
"""pgbench TPC-B (scale 1: one hot branch row) against hotledger and PostgreSQL 15, side by
side in one run, plus the client's own ceiling (a do-nothing transaction of TPC-B's shape).

Starts both servers itself on private ports and data directories, alternates A/B for each
client count, computes latency percentiles from pgbench's per-transaction logs, and reports
hotledger's group commit (commands per fsync). Writes a CSV and a Markdown table.

    tools/pgbench_compare.py [--clients 1,4,16,64,128] [--duration 20] [--rounds 1] [--out DIR]

Needs: cargo, PostgreSQL 15 server binaries (tools/setup.sh installs them), root or a user
that can run initdb.
"""

import argparse
import csv
import glob
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PG_BIN = "/usr/lib/postgresql/15/bin"
NOOP = "BEGIN;\nSELECT 1;\nSELECT 1;\nSELECT 1;\nSELECT 1;\nSELECT 1;\nEND;\n"


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


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", default="1,4,16,64,128")
    parser.add_argument("--duration", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=1, help="A/B repetitions per client count")
    parser.add_argument("--out", default=os.path.join(ROOT, "docs", "bench", "pgbench"))
    parser.add_argument("--binary", default=None, help="hotledger binary (default: build release)")
    args = parser.parse_args()

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
    try:
        for server in (pg, hl):
            pgbench(server, ["-i", "-s", "1", "-q"])
        for clients in [int(c) for c in args.clients.split(",")]:
            for rnd in range(args.rounds):
                for name, server in (("postgresql", pg), ("hotledger", hl)):
                    before = hl.group_commit() if server is hl else None
                    logdir = tempfile.mkdtemp(dir=work)
                    tps, failed = pgbench(server, ["-n", "-M", "prepared", "-c", str(clients), "-j", "2",
                                                   "-T", str(args.duration)], logdir)
                    row = {"system": name, "workload": "tpcb", "clients": clients, "round": rnd, "tps": round(tps),
                           "failed": failed}
                    row.update(percentiles(logdir))
                    if before:
                        after = hl.group_commit()
                        commands = int(after["commands"]) - int(before["commands"])
                        fsyncs = int(after["fsyncs"]) - int(before["fsyncs"])
                        row["commands_per_fsync"] = round(commands / max(fsyncs, 1), 1)
                    shutil.rmtree(logdir)
                    rows.append(row)
                    print(row, flush=True)
            # The client's own ceiling, measured in the same run against PostgreSQL.
            noop = os.path.join(work, "noop.sql")
            with open(noop, "w") as f:
                f.write(NOOP)
            for name, server in (("ceiling (noop, postgresql)", pg), ("ceiling (noop, hotledger)", hl)):
                tps, _ = pgbench(server, ["-n", "-M", "prepared", "-c", str(clients), "-j", "2", "-T",
                                          str(max(5, args.duration // 2)), "-f", noop])
                rows.append({"system": name, "workload": "noop", "clients": clients, "round": 0, "tps": round(tps)})
                print(rows[-1], flush=True)
    finally:
        hl.stop()
        pg.stop()
    fields = ["system", "workload", "clients", "round", "tps", "failed", "p50_ms", "p99_ms", "p999_ms", "max_ms",
              "commands_per_fsync"]
    with open(os.path.join(args.out, "summary.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        for r in rows:
            w.writerow(r)
    with open(os.path.join(args.out, "summary.md"), "w") as f:
        f.write(markdown(rows))
    print(markdown(rows))
    print(f"wrote {args.out}/summary.csv and summary.md")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
