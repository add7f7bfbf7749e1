"""Writes the results: results.csv (one row per run), steady.csv (per second), summary.md
(the tables docs/benchmarks.md quotes) and three PNG charts."""

import csv
import math

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

FIELDS = ["system", "workload", "clients", "round", "tps", "ops_per_s", "transactions", "failed", "aborted",
          "p50_ms", "p99_ms", "p999_ms", "max_ms", "server_cpu_cores", "server_cpu_us_per_tx",
          "client_cpu_cores", "peak_memory_mib", "commands_per_fsync", "mean_ms"]
SYSTEMS = ("postgresql", "hotledger")
COLORS = {"postgresql": "#336791", "hotledger": "#d9480f"}


def median(values):
    values = sorted(v for v in values if v is not None and v != "")
    if not values:
        return None
    mid = len(values) // 2
    return values[mid] if len(values) % 2 else (values[mid - 1] + values[mid]) / 2


def point(rows, system, workload, clients, key):
    return median([r.get(key) for r in rows
                   if r["system"] == system and r["workload"] == workload and r["clients"] == clients])


def fmt(value, digits=0):
    if value is None:
        return "–"
    if digits == 0:
        return f"{value:,.0f}"
    return f"{value:,.{digits}f}"


def write_csv(path, rows, fields):
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)


def workload_table(rows, workload, ceiling):
    counts = sorted({r["clients"] for r in rows if r["workload"] == workload.name})
    unit = "transfers/s" if workload.unit == "transfers" else "TPS"
    header = (f"| clients | PostgreSQL {unit} | hotledger {unit} | ratio | PostgreSQL p50 / p99 / p99.9 / max ms "
              "| hotledger p50 / p99 / p99.9 / max ms | failed (PG / hl) | server CPU cores (PG / hl) "
              "| server CPU µs per transaction (PG / hl) | peak memory MiB (PG / hl) |")
    align = "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    if ceiling:
        header += " hotledger / ceiling |"
        align += "---:|"
    lines = [header, align]
    for c in counts:
        get = lambda system, key: point(rows, system, workload.name, c, key)
        pg, hl = get("postgresql", "ops_per_s"), get("hotledger", "ops_per_s")
        ratio = f"{hl / pg:.1f}x" if pg and hl else "–"
        lat = lambda s: " / ".join(fmt(get(s, k), 2) for k in ("p50_ms", "p99_ms", "p999_ms", "max_ms"))
        pair = lambda key, digits=0: f"{fmt(get('postgresql', key), digits)} / {fmt(get('hotledger', key), digits)}"
        line = (f"| {c} | {fmt(pg)} | {fmt(hl)} | {ratio} | {lat('postgresql')} | {lat('hotledger')} "
                f"| {pair('failed')} | {pair('server_cpu_cores', 2)} | {pair('server_cpu_us_per_tx')} "
                f"| {pair('peak_memory_mib')} |")
        if ceiling:
            top = point(rows, "postgresql", ceiling, c, "tps")
            line += f" {100 * hl / top:.0f}% |" if top and hl else " – |"
        lines.append(line)
    aborted = [r for r in rows if r["workload"] == workload.name and r.get("aborted")]
    for r in aborted:
        lines.append(f"\n{r['system']} at {r['clients']} clients: pgbench aborted clients: {r['aborted']}")
    return "\n".join(lines) + "\n"


def summary(path, context, rows, workloads, targets, steady):
    out = ["# hotledger vs PostgreSQL 15: benchmark run", ""]
    out.append(f"Command: `{context['command']}`  ")
    out.append(f"Commit: `{context['commit']}`; {context['date']}  ")
    out.append(f"Machine: {context['machine']}  ")
    out.append(f"Servers: {context['postgresql']} (fsync on, synchronous_commit on, 127.0.0.1); hotledger "
               f"(`--pool-mb {context['pool_mb']}`, partitions: {context.get('partitions', 1)}, "
               f"every commit fsynced before its acknowledgement)  ")
    out.append(f"Each point: `pgbench -n -c N -j 2 -T {context['duration']}`, PostgreSQL then hotledger, "
               f"{context['rounds']} round(s), medians; every point starts from freshly loaded tables.")
    out += ["", "## Reference points of this machine", ""]
    for name, value in context["reference"]:
        out.append(f"- {name}: {value}")
    for workload in workloads:
        if not any(r["workload"] == workload.name for r in rows):
            continue
        out += ["", f"## {workload.name}: {workload.title}", ""]
        ceiling = workload.ceiling if any(r["workload"] == workload.ceiling for r in rows) else None
        if ceiling:
            out.append(f"Ceiling: PostgreSQL's `{ceiling}` at the same client count (the client's own limit "
                       "for this many round trips).")
            out.append("")
        out.append(workload_table(rows, workload, ceiling))
    if steady:
        out += ["", f"## Steady run: {steady['workload']} at {steady['clients']} clients for {steady['seconds']} s",
                "", f"| system | median TPS | worst second (% of median) | memory at {steady['early_at']:g} s MiB "
                f"| memory at {steady['half_at']:g} s MiB | memory at end MiB "
                "| growth MiB |", "|---|---:|---:|---:|---:|---:|---:|"]
        for system in SYSTEMS:
            s = steady["systems"].get(system)
            if s:
                out.append(f"| {system} | {fmt(s['median_tps'])} | {fmt(s['worst_pct'])}% | {fmt(s['mem_early_mib'])} "
                           f"| {fmt(s['mem_half_mib'])} | {fmt(s['mem_end_mib'])} "
                           f"| {fmt(s['mem_end_mib'] - s['mem_early_mib'], 1)} |")
        if steady.get("pool_note"):
            out += ["", steady["pool_note"]]
    out += ["", "## hotledger's memory targets", "", "| target | measured | met |", "|---|---|---|"]
    for name, measured, met in targets:
        out.append(f"| {name} | {measured} | {'yes' if met else '**no**'} |")
    out += ["", "Charts: `throughput.png`, `latency.png`, `steady.png`. Data: `results.csv`, `steady.csv`.", ""]
    with open(path, "w") as f:
        f.write("\n".join(out))


def _sweep_chart(path, rows, workloads, title, draw):
    """One panel per workload that ran, clients on a log2 axis; `draw(ax, workload, counts)`
    plots the panel's lines and labels its y axis."""
    names = [w for w in workloads if any(r["workload"] == w.name for r in rows)]
    ncols = min(3, len(names))
    nrows = math.ceil(len(names) / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(5 * ncols, 3.6 * nrows), squeeze=False)
    for ax, workload in zip(axes.flat, names):
        counts = sorted({r["clients"] for r in rows if r["workload"] == workload.name})
        draw(ax, workload, counts)
        ax.set_xscale("log", base=2)
        ax.set_xticks(counts, [str(c) for c in counts])
        ax.set_title(workload.name)
        ax.set_xlabel("clients")
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[len(names):]:
        ax.axis("off")
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def throughput_chart(path, rows, workloads):
    def draw(ax, workload, counts):
        for system in SYSTEMS:
            ys = [point(rows, system, workload.name, c, "ops_per_s") for c in counts]
            ax.plot(counts, ys, marker="o", label=system, color=COLORS[system])
        ax.set_ylabel(f"{workload.unit}/s")
        ax.set_ylim(bottom=0)
        ax.legend(fontsize=8)

    _sweep_chart(path, rows, workloads, "Throughput vs clients (fsync on, one machine)", draw)


def latency_chart(path, rows, workloads):
    styles = {"p50_ms": ":", "p99_ms": "--", "p999_ms": "-"}

    def draw(ax, workload, counts):
        for system in SYSTEMS:
            for key, style in styles.items():
                ys = [point(rows, system, workload.name, c, key) for c in counts]
                ax.plot(counts, ys, linestyle=style, marker=".", color=COLORS[system],
                        label=f"{system} {key[:-3].replace('p999', 'p99.9')}")
        ax.set_yscale("log")
        ax.set_ylabel("latency ms")
        ax.legend(fontsize=6)

    _sweep_chart(path, rows, workloads, "Latency percentiles vs clients", draw)


def steady_chart(path, series, title):
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(9, 6), sharex=True)
    for system in SYSTEMS:
        points = [p for p in series if p["system"] == system]
        if not points:
            continue
        xs = [p["second"] for p in points]
        top.plot(xs, [p["tps"] for p in points], label=system, color=COLORS[system])
        bottom.plot(xs, [p["memory_mib"] for p in points], label=system, color=COLORS[system])
    top.set_ylabel("transactions per second")
    top.set_ylim(bottom=0)
    bottom.set_ylabel("server memory MiB")
    bottom.set_xlabel("second")
    bottom.set_ylim(bottom=0)
    for ax in (top, bottom):
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
