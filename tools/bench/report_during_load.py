"""The "report during load" run: the hot-account transfer (or, with --report-workload
transfer_read, a transfer and a point read per transaction) at a fixed client count while, from
a few seconds in, one more connection runs a long report — a nested-loop self-join of a
7,000-row table, stopped by its statement_timeout (the same query and limit on both systems).
What counts is what the report does to the transfers: their throughput and p99.9 latency in
the seconds before the report and while it runs, and a per-second chart."""

import threading
import time

from driver import pgbench
from workloads import WORKLOADS

REPORT_ROWS = 7_000
REPORT = "SELECT count(*) FROM rb x, rb y WHERE x.a = y.b OR x.b = y.a"


def percentile_ms(latencies_us, q):
    if not latencies_us:
        return None
    ordered = sorted(latencies_us)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))] / 1000.0, 2)


def window(samples, start_us, end_us):
    """The transfers that completed within [start_us, end_us): per second, and p99.9."""
    inside = [lat for at, lat in samples if start_us <= at < end_us]
    seconds = max(1e-9, (end_us - start_us) / 1e6)
    return {"per_s": round(len(inside) / seconds), "p999_ms": percentile_ms(inside, 0.999),
            "p99_ms": percentile_ms(inside, 0.99)}


def run_report(server, limit_s, when):
    """Runs the report on its own connection; records when it started and ended."""
    when["start_us"] = time.time() * 1e6
    server.psql(None, stdin=f"SET statement_timeout = '{limit_s}s';\n{REPORT};\n", check=False)
    when["end_us"] = time.time() * 1e6


def one_system(server, hotledger, start_from, clients, seconds, report_at, limit_s, work, workload_name):
    workload = WORKLOADS[workload_name]
    start_from(workload, server, hotledger)
    server.psql(None, stdin=("DROP TABLE IF EXISTS rb;\nCREATE TABLE rb (id int PRIMARY KEY, a int, b int);\n"
                             f"INSERT INTO rb SELECT g, g % 100, g % 77 FROM generate_series(1, {REPORT_ROWS}) g;\n"))
    when = {}
    timer = threading.Timer(report_at, run_report, args=(server, limit_s, when))
    timer.start()
    result = pgbench(server, workload, clients, seconds, work, keep_samples=True)
    timer.join()
    samples = result.samples
    first = min(at for at, _ in samples) if samples else 0
    start, end = when.get("start_us", first), when.get("end_us", first)
    # The second after pgbench starts is warm-up; "before" is the rest up to the report.
    before = window(samples, first + 1e6, start)
    during = window(samples, start, end)
    # Every second between the first and the last (both partial, left out), none done as 0.
    seconds = sorted(result.per_second)[1:-1]
    base = seconds[0] if seconds else 0
    per_second = [(s, result.per_second.get(s, 0)) for s in range(base, seconds[-1] + 1)] if seconds else []
    return {
        "report_s": round((end - start) / 1e6, 1), "report_from_s": round((start - first) / 1e6, 1),
        "before": before, "during": during,
        "series": [{"system": server.name, "second": s - base, "tps": n} for s, n in per_second],
    }


def run(args, pg, hl, start_from, work):
    results = {}
    for server in (pg, hl):
        results[server.name] = one_system(server, hl, start_from, args.report_clients, args.report_seconds,
                                          args.report_at, args.report_limit, work, args.report_workload)
        r = results[server.name]
        print(f"report during load {server.name}: transfers/s {r['before']['per_s']:,} before, "
              f"{r['during']['per_s']:,} during the {r['report_s']} s report; p99.9 "
              f"{r['before']['p999_ms']} -> {r['during']['p999_ms']} ms", flush=True)
    return results


def summary_lines(args, results):
    out = ["", f"## Report during load: {args.report_workload} at {args.report_clients} clients, a "
           f"{args.report_limit} s report "
           f"from {args.report_at} s", "",
           f"One more connection runs `{REPORT}` ({REPORT_ROWS:,} rows, `statement_timeout` "
           f"{args.report_limit} s) while the transfers run; their throughput and latency before it and while "
           "it runs.", "",
           "| system | report ran s | transfers/s before | during | p99 ms before | during | p99.9 ms before "
           "| during |", "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for system, r in results.items():
        b, d = r["before"], r["during"]
        out.append(f"| {system} | {r['report_s']} | {b['per_s']:,} | {d['per_s']:,} | {b['p99_ms']} | {d['p99_ms']} "
                   f"| {b['p999_ms']} | {d['p999_ms']} |")
    out += ["", "Chart: `report.png`."]
    return out


def chart(path, args, results):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from report import COLORS

    fig, ax = plt.subplots(figsize=(9, 4))
    for system, r in results.items():
        xs = [p["second"] for p in r["series"]]
        ax.plot(xs, [p["tps"] for p in r["series"]], label=system, color=COLORS[system])
        start = r["report_from_s"] - 1
        ax.axvspan(start, start + r["report_s"], color=COLORS[system], alpha=0.12)
    ax.set_xlabel("second (shaded: the report running)")
    ax.set_ylabel(f"{args.report_workload} transactions per second")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.suptitle(f"{args.report_workload} at {args.report_clients} clients, a long report from {args.report_at} s")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
