#!/usr/bin/env python3
"""Plots kv-bench's timeseries.csv: throughput per second for each workload, engines side by
side, with seconds in which a checkpoint (or RocksDB flush/compaction) ran shaded.

usage: plot.py RESULTS_DIR [OUTPUT.png]
"""
import csv
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main() -> None:
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    results = sys.argv[1]
    output = sys.argv[2] if len(sys.argv) > 2 else f"{results}/throughput.png"
    series = defaultdict(lambda: defaultdict(list))
    with open(f"{results}/timeseries.csv", newline="") as handle:
        for row in csv.DictReader(handle):
            series[row["workload"]][row["engine"]].append(
                (int(row["second"]), int(row["ops"]), row["checkpointing"] == "1")
            )
    workloads = list(series)
    engines = sorted({engine for by_engine in series.values() for engine in by_engine})
    figure, axes = plt.subplots(len(workloads), len(engines), figsize=(5 * len(engines), 3 * len(workloads)),
                                squeeze=False, sharey="row")
    for row, workload in enumerate(workloads):
        for column, engine in enumerate(engines):
            axis = axes[row][column]
            points = series[workload].get(engine, [])
            if points:
                seconds = [p[0] for p in points]
                axis.plot(seconds, [p[1] / 1000 for p in points], linewidth=1)
                for second, _, busy in points:
                    if busy:
                        axis.axvspan(second - 0.5, second + 0.5, color="orange", alpha=0.15, linewidth=0)
            axis.set_title(f"{engine}: {workload}", fontsize=9)
            axis.set_xlabel("second")
            axis.set_ylim(bottom=0)
            if column == 0:
                axis.set_ylabel("k ops/s")
    figure.suptitle("kv-bench throughput per second (shaded: checkpoint / flush / compaction running)", fontsize=10)
    figure.tight_layout()
    figure.savefig(output, dpi=110)
    print(output)


if __name__ == "__main__":
    main()
