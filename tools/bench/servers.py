"""The two systems under test, each started privately on 127.0.0.1 by the benchmark: a
PostgreSQL 15 (initdb in a temporary directory, default durability) and hotledger.

Both expose the same small surface to the rest of the tool: `port`, `db`, `env` (what
pgbench and psql need to connect), `psql(sql)`, `pids()` (the processes whose CPU and memory
count as the server's) and `stop()`.
"""

import os
import re
import shutil
import signal
import subprocess
import time

PG_BIN = "/usr/lib/postgresql/15/bin"


def run(cmd, env=None, check=True, **kw):
    return subprocess.run(cmd, env=env, check=check, text=True, capture_output=True, **kw)


def _ppid(pid):
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[1])


def descendants(root):
    """`root` and every live process below it."""
    children = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                children.setdefault(_ppid(int(entry)), []).append(int(entry))
            except (OSError, IndexError, ValueError):
                pass
    found, stack = [], [root]
    while stack:
        pid = stack.pop()
        found.append(pid)
        stack.extend(children.get(pid, []))
    return found


class Server:
    """What both systems share: psql against `port`/`db` with `env`."""

    def psql(self, sql, stdin=None, check=True):
        """Runs `sql` (or, when it is None, the script on `stdin`); stops at the first error,
        which raises unless `check` is false."""
        cmd = ["psql", "-h", "127.0.0.1", "-p", str(self.port), "-X", "-q", "-At", "-v", "ON_ERROR_STOP=1"]
        if sql is not None:
            cmd += ["-c", sql]
        return run(cmd + [self.db], env=self.env, input=stdin, check=check).stdout.strip()


class Postgres(Server):
    name = "postgresql"

    def __init__(self, port, workdir):
        self.port = port
        self.workdir = workdir
        self.data = os.path.join(workdir, "pgdata")
        os.makedirs(self.data)
        if os.geteuid() == 0:
            # initdb refuses to run as root: PostgreSQL runs as the postgres user.
            shutil.chown(workdir, "postgres")
            shutil.chown(self.data, "postgres")
        self.prefix = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        run(self.prefix + [f"{PG_BIN}/initdb", "-D", self.data, "-U", "postgres", "--auth=trust"])
        run(self.prefix + [f"{PG_BIN}/pg_ctl", "-D", self.data, "-l", os.path.join(self.data, "log"), "-w", "-o",
                           f"-p {port} -k {workdir} -c max_connections=300 -c listen_addresses=127.0.0.1", "start"])
        self.env = dict(os.environ, PGUSER="postgres")
        self.db = "postgres"
        with open(os.path.join(self.data, "postmaster.pid")) as f:
            self.pid = int(f.readline())

    def version(self):
        return run([f"{PG_BIN}/postgres", "--version"]).stdout.strip()

    def pids(self):
        return descendants(self.pid)

    def stop(self):
        run(self.prefix + [f"{PG_BIN}/pg_ctl", "-D", self.data, "-m", "fast", "stop"], check=False)


class Hotledger(Server):
    """`hotledger serve` on a private data directory, or `nodes` of them forming a cluster
    on 127.0.0.1 (node N takes clients on port+N-1 and its peers on port+100+N-1). The
    clients go to the leader; `pids()` covers every node, so CPU and memory are the whole
    cluster's."""

    name = "hotledger"

    def __init__(self, binary, port, workdir, pool_mb, nodes=1, partitions=None):
        if nodes not in (1, 3, 5):
            raise SystemExit("--nodes is 1, 3 or 5")
        self.binary = binary
        self.base_port = port
        self.port = port
        self.workdir = workdir
        self.pool_mb = pool_mb
        self.nodes = nodes
        # A cluster on this one machine shares its cores among the nodes, as `hotledger
        # cluster` does: more partition threads than cores cost hand-offs waiting for one.
        if partitions is None and nodes > 1:
            partitions = max(1, (os.cpu_count() or 1) // nodes)
        self.partitions = partitions
        self.root_dir = os.path.join(workdir, "hotledger-data")
        self.data_dir = self.root_dir
        self.env = dict(os.environ, PGUSER="ledger", PGPASSWORD="bench")
        self.db = "ledger"
        self.procs = []
        self.log = open(os.path.join(workdir, "hotledger.log"), "a")

    def node_args(self, node):
        """`serve`'s arguments for node `node` (1-based) of the cluster, or the one node."""
        if self.nodes == 1:
            return ["--data-dir", self.root_dir, "--listen", f"127.0.0.1:{self.base_port}"]
        peers = ",".join(f"{n}=127.0.0.1:{self.base_port + 100 + n - 1}" for n in range(1, self.nodes + 1))
        return ["--node-id", str(node), "--data-dir", os.path.join(self.root_dir, f"node{node}"),
                "--listen", f"127.0.0.1:{self.base_port + node - 1}",
                "--raft-listen", f"127.0.0.1:{self.base_port + 100 + node - 1}", "--peers", peers]

    def start(self, fresh=True):
        """Starts the server (every node); `fresh` removes the data first. With a cluster,
        the clients' port is the leader's."""
        if self.procs:
            self.stop()
        if fresh:
            shutil.rmtree(self.root_dir, ignore_errors=True)
        for node in range(1, self.nodes + 1):
            self.procs.append(subprocess.Popen(
                [self.binary, "serve", "--pool-mb", str(self.pool_mb)] + self.node_args(node)
                + (["--partitions", str(self.partitions)] if self.partitions else []),
                env=dict(os.environ, HOTLEDGER_PASSWORD="bench"), stdout=self.log, stderr=self.log))
        for node in range(1, self.nodes + 1):
            self.port = self.base_port + node - 1
            self.wait_ready()
        if self.nodes > 1:
            leader = self.psql("select pg_addr from hotledger.cluster where role = 'leader'").strip()
            self.port = int(leader.rsplit(":", 1)[1])
            self.data_dir = os.path.join(self.root_dir, f"node{self.port - self.base_port + 1}")

    def wait_ready(self):
        deadline = time.time() + 120
        while time.time() < deadline:
            if any(p.poll() is not None for p in self.procs):
                raise SystemExit(f"hotledger exited during start; see {self.log.name}")
            probe = run(["psql", "-h", "127.0.0.1", "-p", str(self.port), "-X", "-Atc", "select 1", self.db],
                        env=self.env, check=False)
            if probe.returncode == 0:
                return
            time.sleep(0.2)
        raise SystemExit("hotledger did not start within 120 s")

    def partitions_shown(self):
        """The partition count for the report: asked for, or the server's default."""
        return self.partitions or f"default ({os.cpu_count()} cores)"

    def stats(self, which):
        """`SHOW group_commit_stats` or `SHOW storage_stats` as a dict of integers."""
        return {k: int(v) for k, v in (pair.split("=") for pair in self.psql(f"show {which}").split())}

    def pids(self):
        return [p.pid for p in self.procs if p.poll() is None]

    def data_file_bytes(self):
        """The data files of every executor partition: data.hl, data.hl.p1, ..."""
        names = os.listdir(self.data_dir)
        files = [n for n in names if n == "data.hl" or re.fullmatch(r"data\.hl\.p[0-9]+", n)]
        return sum(os.path.getsize(os.path.join(self.data_dir, n)) for n in files)

    def dir_bytes(self):
        total = 0
        for base, _, files in os.walk(self.data_dir):
            total += sum(os.path.getsize(os.path.join(base, f)) for f in files)
        return total

    def stop(self):
        """SIGTERM to every node: a clean stop with a final checkpoint."""
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(timeout=120)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self.procs = []
