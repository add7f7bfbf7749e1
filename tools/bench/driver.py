"""Runs the real pgbench against a server and reads what it reports: TPS from its summary,
latencies and per-second throughput from its per-transaction logs (`-l`), its own CPU time."""

import glob
import os
import resource
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field


@dataclass
class PgbenchResult:
    tps: float = 0.0
    transactions: int = 0
    failed: int = 0
    aborted: str = ""  # pgbench's complaint when clients were aborted
    latencies_us: list = field(default_factory=list)
    per_second: dict = field(default_factory=dict)  # epoch second -> completed transactions
    samples: list = field(default_factory=list)  # (epoch µs at completion, latency µs), when kept
    client_cpu_s: float = 0.0

    def percentile_ms(self, q):
        if not self.latencies_us:
            return None
        index = min(len(self.latencies_us) - 1, int(q * len(self.latencies_us)))
        return round(self.latencies_us[index] / 1000.0, 3)

    def mean_ms(self):
        if not self.latencies_us:
            return None
        return round(sum(self.latencies_us) / len(self.latencies_us) / 1000.0, 3)


def pgbench(server, workload, clients, duration, workdir, extra=(), keep_samples=False):
    """One pgbench run of `workload` with `clients` connections for `duration` seconds;
    `keep_samples` keeps each transaction's completion time and latency."""
    logdir = tempfile.mkdtemp(dir=workdir)
    script = []
    if workload.script is not None:
        path = os.path.join(logdir, f"{workload.name}.sql")
        with open(path, "w") as f:
            f.write(workload.script)
        script = ["-f", path]
    elif workload.script_path:
        script = ["-f", workload.script_path]
    cmd = (["pgbench", "-h", "127.0.0.1", "-p", str(server.port), "-n", "-M", workload.mode,
            "-c", str(clients), "-j", str(min(2, clients)), "-T", str(duration)]
           + workload.args + script + list(extra) + ["-l", "--log-prefix", os.path.join(logdir, "tx"), server.db])
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run(cmd, env=server.env, text=True, capture_output=True, cwd=logdir)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    result = PgbenchResult(client_cpu_s=(after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime))
    for line in out.stdout.splitlines():
        if line.startswith("tps = "):
            result.tps = float(line.split()[2])
        elif line.startswith("number of failed transactions:"):
            result.failed = int(line.split(":")[1].split()[0])
    if out.returncode != 0:
        # pgbench prints why clients aborted on stderr, after its progress lines.
        lines = [l for l in out.stderr.splitlines() if l.strip() and not l.startswith("progress")]
        lines = lines or [l for l in out.stdout.splitlines() if l.strip()]
        result.aborted = " / ".join(lines[-3:])[:300] or f"pgbench exited with {out.returncode}"
    read_logs(logdir, result, keep_samples)
    shutil.rmtree(logdir, ignore_errors=True)
    return result


def read_logs(logdir, result, keep_samples=False):
    """pgbench's per-transaction log lines: client, transaction, latency µs (or "failed" /
    "skipped"), script, epoch seconds, µs."""
    latencies = []
    per_second = {}
    samples = []
    for path in glob.glob(os.path.join(logdir, "tx*")):
        with open(path) as f:
            for line in f:
                parts = line.split()
                if len(parts) < 6:
                    continue
                if parts[2].isdigit():
                    latencies.append(int(parts[2]))
                    second = int(parts[4])
                    per_second[second] = per_second.get(second, 0) + 1
                    if keep_samples:
                        samples.append((second * 1_000_000 + int(parts[5]), int(parts[2])))
    latencies.sort()
    result.latencies_us = latencies
    result.transactions = len(latencies)
    result.per_second = per_second
    result.samples = samples
