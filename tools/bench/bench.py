#!/usr/bin/env python3
"""hotledger vs PostgreSQL 15, side by side in one run, with the real pgbench.

Starts a private PostgreSQL 15 (initdb in a temporary directory; fsync on, synchronous_commit
on) and a hotledger server, both on 127.0.0.1, and for every workload and client count runs
pgbench against one then the other from the same freshly loaded state. Per point: TPS,
p50/p99/p99.9/max latency from pgbench's per-transaction logs, failed transactions, server
CPU and peak memory of both servers. Then a steady run (throughput and memory per second),
hotledger's memory targets (idle connections, data file size, peak at the most clients) and
the machine's reference points (fdatasync latency, PostgreSQL's SELECT 1 round trip).

Writes results.csv, steady.csv, summary.md and throughput.png, latency.png, steady.png to
--out. Run it through tools/bench/run, which installs what it needs first.
"""

import argparse
import datetime
import os
import platform
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading

import meter
import probes
import report
import report_during_load
from driver import pgbench
from servers import Hotledger, Postgres, run
from workloads import ROOT, WORKLOADS, prepare

QUICK = dict(clients="1,16", batch_clients="1,16", duration=2, steady_seconds=8, steady_clients=16, accounts=100_000,
             idle_connections=50, fsync_samples=50, report_seconds=12, report_at=4, report_limit=5)
FULL = dict(clients="1,4,16,64,128,256", batch_clients="1,4,8,16", duration=10, steady_seconds=60, steady_clients=64, accounts=1_000_000,
            idle_connections=200, fsync_samples=500, report_seconds=30, report_at=10, report_limit=10)


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    parser.add_argument("--quick", action="store_true",
                        help="every workload at 1 and 16 clients for 2 s, short probes (under 3 minutes)")
    parser.add_argument("--workloads", default=",".join(w for w in WORKLOADS if w != "transfer_read"),
                        help=f"comma-separated, from {', '.join(WORKLOADS)} (default: all but "
                             "transfer_read, which is there for the report run)")
    parser.add_argument("--clients", help=f"client counts (default {FULL['clients']})")
    parser.add_argument("--batch-clients",
                        help=f"client counts of the batch workload (default {FULL['batch_clients']}: with "
                             "1,000-row statements PostgreSQL needs minutes after a run to drain its queue "
                             "on the hot account beyond 16)")
    parser.add_argument("--duration", type=int, help=f"seconds per point (default {FULL['duration']})")
    parser.add_argument("--rounds", type=int, default=1, help="runs per point per system, alternating (default 1)")
    parser.add_argument("--steady-seconds", type=int,
                        help=f"length of the steady run, 0 to skip (default {FULL['steady_seconds']})")
    parser.add_argument("--steady-workload", default="transfer", choices=list(WORKLOADS))
    parser.add_argument("--steady-clients", type=int, help=f"default {FULL['steady_clients']}")
    parser.add_argument("--report-seconds", type=int,
                        help=f"length of the report-during-load run, 0 to skip (default {FULL['report_seconds']})")
    parser.add_argument("--report-at", type=int, help=f"when the report starts, s (default {FULL['report_at']})")
    parser.add_argument("--report-limit", type=int,
                        help=f"the report's statement_timeout, s (default {FULL['report_limit']})")
    parser.add_argument("--report-clients", type=int, default=64, help="transfer clients beside the report (64)")
    parser.add_argument("--report-workload", default="transfer", choices=["transfer", "transfer_read"],
                        help="what the clients beside the report run (transfer)")
    parser.add_argument("--accounts", type=int, help=f"accounts for the data file check (default {FULL['accounts']:,})")
    parser.add_argument("--idle-connections", type=int, help=f"default {FULL['idle_connections']}")
    parser.add_argument("--pool-mb", type=int, default=256, help="hotledger's buffer pool (default 256)")
    parser.add_argument("--partitions", type=int,
                        help="hotledger's executor partitions (default: the server's, one per core)")
    parser.add_argument("--nodes", type=int, default=1, help="hotledger nodes: 1, or a cluster of 3 or 5 on this machine (the clients go to the leader)")
    parser.add_argument("--binary", help="the hotledger binary (default: build it in release mode)")
    parser.add_argument("--out", help="output directory (default docs/bench/run, or docs/bench/quick with --quick)")
    args = parser.parse_args()
    defaults = QUICK if args.quick else FULL
    for key, value in defaults.items():
        if getattr(args, key, None) is None:
            setattr(args, key, value)
    args.clients = [int(c) for c in str(args.clients).split(",")]
    args.batch_clients = [int(c) for c in str(args.batch_clients).split(",")]
    if any(c < 1 or c > 256 for c in args.clients + args.batch_clients):
        parser.error("client counts must be between 1 and 256")
    args.workloads = [w.strip() for w in args.workloads.split(",") if w.strip()]
    unknown = [w for w in args.workloads if w not in WORKLOADS]
    if unknown:
        parser.error(f"unknown workload(s): {', '.join(unknown)} (known: {', '.join(WORKLOADS)})")
    if args.out is None:
        args.out = os.path.join(ROOT, "docs", "bench", "quick" if args.quick else "run")
    return args


def build():
    target = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
    print("building hotledger (release)", flush=True)
    subprocess.run(["cargo", "build", "--release", "-j", "2", "-p", "server"], cwd=ROOT, check=True)
    return os.path.join(target, "release", "hotledger")


def machine():
    model = "unknown CPU"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    with open("/proc/meminfo") as f:
        mem_kb = int(f.readline().split()[1])
    return f"{model}, {os.cpu_count()} vCPU, {mem_kb / (1 << 20):.0f} GiB, Linux {platform.release()}"


def commit():
    head = run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], check=False).stdout.strip() or "unknown"
    dirty = run(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"], check=False).stdout.strip()
    return head + ("-dirty" if dirty else "")


def mib(n):
    return round(n / (1 << 20), 1)


def start_from(workload, server, hotledger):
    """The workload's starting state: hotledger restarted on a fresh data directory (so no
    point inherits the tables or the memory of the one before), then the tables loaded."""
    if server is hotledger:
        hotledger.start(fresh=True)
    prepare(workload, server)


def measure_point(server, hotledger, workload, clients, duration, rnd, work):
    before = hotledger.stats("group_commit_stats") if server is hotledger else None
    with meter.Measurement(server) as m:
        result = pgbench(server, workload, clients, duration, work)
    row = {
        "system": server.name, "workload": workload.name, "clients": clients, "round": rnd,
        "tps": round(result.tps), "ops_per_s": round(result.tps * workload.per_transaction),
        "transactions": result.transactions, "failed": result.failed, "aborted": result.aborted,
        "p50_ms": result.percentile_ms(0.50), "p99_ms": result.percentile_ms(0.99),
        "p999_ms": result.percentile_ms(0.999), "max_ms": result.percentile_ms(1.0),
        # pgbench runs past -T until the last transaction ends: divide by the time it took.
        "server_cpu_cores": round(m.cpu_s / m.wall_s, 2),
        "server_cpu_us_per_tx": round(1e6 * m.cpu_s / result.transactions) if result.transactions else None,
        "client_cpu_cores": round(result.client_cpu_s / m.wall_s, 2),
        "peak_memory_mib": mib(m.peak_bytes),
        "mean_ms": result.mean_ms(),
    }
    if before:
        after = hotledger.stats("group_commit_stats")
        fsyncs = max(1, after["fsyncs"] - before["fsyncs"])
        row["commands_per_fsync"] = round((after["commands"] - before["commands"]) / fsyncs, 1)
    return row


def sweep(args, pg, hl, work):
    rows = []
    for name in args.workloads:
        workload = WORKLOADS[name]
        for clients in args.batch_clients if name == "batch" else args.clients:
            for rnd in range(args.rounds):
                order = (pg, hl) if rnd % 2 == 0 else (hl, pg)
                for server in order:
                    start_from(workload, server, hl)
                    row = measure_point(server, hl, workload, clients, args.duration, rnd, work)
                    rows.append(row)
                    print(f"{name:>8} {clients:>3} clients {server.name:>10}: {row['ops_per_s']:>9,} {workload.unit}/s"
                          f"  p99.9 {row['p999_ms']} ms  cpu {row['server_cpu_cores']}  "
                          f"mem {row['peak_memory_mib']} MiB" + (f"  ABORTED: {row['aborted']}" if row["aborted"]
                                                                 else ""), flush=True)
    return rows


def steady_run(args, pg, hl, work):
    """One workload at a fixed client count for `steady_seconds` on each system: throughput
    and server memory per second. For hotledger also the buffer pool's memory (its page
    buffers) at the early point, half-way and at the end, to tell the pool filling up from
    growth elsewhere."""
    workload = WORKLOADS[args.steady_workload]
    series, systems, pool = [], {}, {}
    early_at = min(10, args.steady_seconds / 2)
    half_at = args.steady_seconds / 2
    for server in (pg, hl):
        start_from(workload, server, hl)
        marks = {"early": {}, "half": {}}
        timers = []
        if server is hl:
            for name, at_s in (("early", early_at), ("half", half_at)):
                timers.append(threading.Timer(at_s, lambda stats=marks[name]: stats.update(hl.stats("storage_stats"))))
                timers[-1].start()
        sampler = meter.Sampler(server, 1.0).start()
        result = pgbench(server, workload, args.steady_clients, args.steady_seconds, work)
        sampler.stop()
        for timer in timers:
            timer.cancel()
        if server is hl and all(marks.values()):
            marks["end"] = hl.stats("storage_stats")
            pool = {name: mib(stats["mapped_pages"] * stats["page_size"]) for name, stats in marks.items()}
        seconds = sorted(result.per_second)[1:-1]  # the first and last seconds are partial
        start = seconds[0] if seconds else 0
        memory = {int(t): b for t, b in sampler.samples}
        for second in seconds:
            series.append({"system": server.name, "second": second - start, "tps": result.per_second[second],
                           "memory_mib": mib(memory.get(second - start, memory.get(second - start - 1, 0)))})
        counts = sorted(result.per_second[s] for s in seconds)
        median = counts[len(counts) // 2] if counts else 0
        at = lambda t: mib(min(sampler.samples, key=lambda s: abs(s[0] - t))[1]) if sampler.samples else 0
        systems[server.name] = {"median_tps": median, "worst_pct": 100 * counts[0] / median if median else 0,
                                "mem_early_mib": at(early_at), "mem_half_mib": at(half_at),
                                "mem_end_mib": at(args.steady_seconds - 1)}
        print(f"steady {server.name}: median {median:,} TPS, memory {systems[server.name]['mem_early_mib']} -> "
              f"{systems[server.name]['mem_half_mib']} -> {systems[server.name]['mem_end_mib']} MiB", flush=True)
    steady = {"workload": workload.name, "clients": args.steady_clients, "seconds": args.steady_seconds,
              "early_at": early_at, "half_at": half_at, "systems": systems}
    if pool:
        steady["pool_mib"] = pool
        steady["pool_note"] = (f"hotledger's buffer pool (its page buffers: cached pages, images a checkpoint still "
                               f"holds, free buffers) held {pool['early']} MiB at {early_at:g} s, {pool['half']} MiB "
                               f"at {half_at:g} s and {pool['end']} MiB at the end, for `--pool-mb {args.pool_mb}` "
                               f"(it fills as the tables grow; past its size only by dirty pages no checkpoint has "
                               f"written yet).")
    return series, steady


def memory_targets(args, rows, steady, idle, files):
    targets = []
    top = max(args.clients)
    peak = max((r["peak_memory_mib"] for r in rows if r["system"] == "hotledger" and r["clients"] == top),
               default=None)
    if peak is not None:
        limit = args.pool_mb + 256
        targets.append((f"peak RSS at {top} clients ≤ buffer pool + 256 MiB ({limit} MiB)",
                        f"{peak} MiB (largest over the workloads)", peak <= limit))
        worst = max((r for r in rows if r["system"] == "hotledger"), key=lambda r: r["peak_memory_mib"])
        targets.append(("the same bound at every point of the sweep",
                        f"largest: {worst['peak_memory_mib']} MiB ({worst['workload']}, {worst['clients']} clients)",
                        worst["peak_memory_mib"] <= limit))
    hl = steady.get("systems", {}).get("hotledger") if steady else None
    if hl:
        pool = steady.get("pool_mib") or {"early": 0, "half": 0, "end": 0}
        outside = {mark: hl[f"mem_{mark}_mib"] - pool[mark] for mark in ("early", "half", "end")}
        late = outside["end"] - outside["half"]
        targets.append((f"no memory growth in the {steady['seconds']} s steady run outside the buffer pool (which "
                        f"fills to its configured size), from {steady['half_at']:g} s to the end, once the first "
                        "checkpoints and caches are warm; 8 MiB allowed for noise",
                        f"RSS {hl['mem_early_mib']} → {hl['mem_half_mib']} → {hl['mem_end_mib']} MiB at "
                        f"{steady['early_at']:g} s / {steady['half_at']:g} s / end; outside the pool "
                        f"{outside['early']:.1f} → {outside['half']:.1f} → {outside['end']:.1f} MiB: "
                        f"{late:+.1f} MiB over the second half ({outside['end'] - outside['early']:+.1f} MiB "
                        f"from {steady['early_at']:g} s)", late <= 8))
    if idle:
        per = idle["hotledger"] / 1024
        targets.append(("per idle connection ≤ 100 KiB",
                        f"{per:.0f} KiB over {args.idle_connections} connections (PostgreSQL: "
                        f"{idle['postgresql'] / 1024:.0f} KiB)", per <= 100))
    if files:
        ratio = files["hotledger_file_bytes"] / files["raw_bytes"]
        targets.append((f"with {files['accounts']:,} accounts the data file ≤ 2x the raw row bytes",
                        f"{mib(files['hotledger_file_bytes'])} MiB = {ratio:.2f}x of {mib(files['raw_bytes'])} MiB "
                        f"(whole data directory with log segments and page map records: "
                        f"{mib(files['hotledger_dir_bytes'])} MiB; PostgreSQL's table and index: "
                        f"{mib(files['postgresql_table_bytes'])} MiB)", ratio <= 2))
    return targets


def main():
    args = parse_args()
    binary = args.binary or build()
    if not os.access(binary, os.X_OK):
        raise SystemExit(f"no hotledger binary at {binary}")
    os.makedirs(args.out, exist_ok=True)
    work = tempfile.mkdtemp(prefix="hotledger-bench-")
    os.chmod(work, 0o777)
    os.makedirs(os.path.join(work, "pg"))
    pg = Postgres(24532, os.path.join(work, "pg"))
    hl = Hotledger(binary, 24533, work, args.pool_mb, args.nodes, args.partitions)
    try:
        fsync_p50, fsync_p99 = probes.fdatasync_latency(work, args.fsync_samples)
        rtt_us, rtt_tps = probes.select1_round_trip(pg, 1 if args.quick else 5, work)
        reference = [("fdatasync of a 4 KiB overwrite in the data directory's file system",
                      f"p50 {fsync_p50} µs, p99 {fsync_p99} µs ({args.fsync_samples} samples): at most "
                      f"~{1e6 / fsync_p50:,.0f} commits/s for a system that fsyncs each commit alone"),
                     ("PostgreSQL `SELECT 1`, one connection, prepared",
                      f"p50 {rtt_us} µs per round trip ({rtt_tps:,} per second)")]
        print("; ".join(f"{n}: {v}" for n, v in reference), flush=True)
        rows = sweep(args, pg, hl, work)
        series, steady = steady_run(args, pg, hl, work) if args.steady_seconds > 0 else ([], {})
        during = (report_during_load.run(args, pg, hl, start_from, work) if args.report_seconds > 0
                  else {})
        hl.start(fresh=True)
        idle = {s.name: probes.idle_connection_bytes(s, args.idle_connections, work) for s in (hl, pg)}
        files = probes.data_file_size(hl, pg, args.accounts)
        targets = memory_targets(args, rows, steady, idle, files)
    finally:
        hl.stop()
        pg.stop()
    context = {
        "command": "tools/bench/run " + " ".join(shlex.quote(a) for a in sys.argv[1:]),
        "commit": commit(), "date": datetime.date.today().isoformat(), "machine": machine(),
        "postgresql": pg.version(),
        "pool_mb": args.pool_mb, "partitions": hl.partitions_shown(), "duration": args.duration, "rounds": args.rounds, "reference": reference,
    }
    workloads = [WORKLOADS[w] for w in args.workloads]
    report.write_csv(os.path.join(args.out, "results.csv"), rows, report.FIELDS)
    report.write_csv(os.path.join(args.out, "steady.csv"), series, ["system", "second", "tps", "memory_mib"])
    report.summary(os.path.join(args.out, "summary.md"), context, rows, workloads, targets, steady)
    report.throughput_chart(os.path.join(args.out, "throughput.png"), rows, workloads)
    report.latency_chart(os.path.join(args.out, "latency.png"), rows, workloads)
    if during:
        with open(os.path.join(args.out, "summary.md"), "a") as f:
            f.write("\n".join(report_during_load.summary_lines(args, during)) + "\n")
        report_during_load.chart(os.path.join(args.out, "report.png"), args, during)
    if series:
        report.steady_chart(os.path.join(args.out, "steady.png"), series,
                            f"{steady['workload']} at {steady['clients']} clients")
    for name, measured, met in targets:
        print(f"target: {name}: {measured}: {'met' if met else 'NOT MET'}")
    print(f"wrote {args.out}/summary.md, results.csv, steady.csv and the charts")
    shutil.rmtree(work, ignore_errors=True)
    # Missed targets are results; a workload that did not run is a broken benchmark.
    broken = [r for r in rows if r["aborted"] or not r["transactions"]]
    for r in broken:
        print(f"error: {r['workload']} at {r['clients']} clients on {r['system']} did not run cleanly: "
              f"{r['aborted'] or 'no transaction completed'}", file=sys.stderr)
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
