"""CPU time and memory of a server's processes, read from /proc while a workload runs.

CPU: user + system time of the server's processes, including children they have reaped
(PostgreSQL's backends end with their connections; their time moves to the postmaster's
`cutime`/`cstime`), so the difference of two readings is the CPU the server used between them.

Memory: hotledger is one process and is measured by its resident set (VmRSS; the peak by
VmHWM, reset at the start of each measurement). PostgreSQL is a process per connection
sharing `shared_buffers`; adding their RSS would count the shared memory once per backend, so
its memory is the sum of private anonymous memory (RssAnon) plus the largest shared and file
mappings of any one process (RssShmem, RssFile): cheap to read 1,000 times a minute and close
to the proportional set size summed over the processes.
"""

import os
import threading
import time

TICK = os.sysconf("SC_CLK_TCK")


def _stat_cpu(pid):
    """utime + stime + cutime + cstime of `pid`, in seconds (0 if it is gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    # After ")": state is field 3 of stat(5); utime..cstime are fields 14..17.
    return sum(int(x) for x in fields[11:15]) / TICK


def _status(pid):
    values = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                key, _, rest = line.partition(":")
                if rest.strip().endswith("kB"):
                    values[key] = int(rest.split()[0]) * 1024
    except OSError:
        pass
    return values


def cpu_seconds(pids):
    return sum(_stat_cpu(pid) for pid in pids)


def memory_bytes(pids):
    """Resident memory of the processes, shared memory counted once (see the module doc)."""
    if len(pids) == 1:
        return _status(pids[0]).get("VmRSS", 0)
    anon = shmem = file = 0
    for pid in pids:
        s = _status(pid)
        anon += s.get("RssAnon", 0)
        shmem = max(shmem, s.get("RssShmem", 0))
        file = max(file, s.get("RssFile", 0))
    return anon + shmem + file


def reset_peak(pid):
    """Resets VmHWM (Linux: write 5 to clear_refs); false if not permitted."""
    try:
        with open(f"/proc/{pid}/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def peak_bytes(pid):
    return _status(pid).get("VmHWM", 0)


class Sampler:
    """Samples a server's memory every `interval` seconds in a thread, from start() to
    stop(); `samples` is a list of (seconds since start, bytes)."""

    def __init__(self, server, interval):
        self.server = server
        self.interval = interval
        self.samples = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self):
        self._start = time.monotonic()
        self._thread.start()
        return self

    def _run(self):
        while not self._stop.is_set():
            self.samples.append((time.monotonic() - self._start, memory_bytes(self.server.pids())))
            self._stop.wait(self.interval)

    def stop(self):
        self._stop.set()
        self._thread.join()
        return self

    def peak(self):
        return max((b for _, b in self.samples), default=0)


class Measurement:
    """CPU used and peak memory of one server over a block of work:

        with Measurement(server) as m:
            ...
        m.cpu_s, m.wall_s, m.peak_bytes
    """

    def __init__(self, server, interval=0.5):
        self.server = server
        self.interval = interval

    def __enter__(self):
        pids = self.server.pids()
        self._single = pids[0] if len(pids) == 1 else None
        self._hwm = self._single is not None and reset_peak(self._single)
        self._cpu = cpu_seconds(pids)
        self._wall = time.monotonic()
        self._sampler = Sampler(self.server, self.interval).start()
        return self

    def __exit__(self, *exc):
        self._sampler.stop()
        self.wall_s = time.monotonic() - self._wall
        # Let PostgreSQL's postmaster reap the backends of the connections just closed.
        time.sleep(0.3)
        self.cpu_s = cpu_seconds(self.server.pids()) - self._cpu
        self.samples = self._sampler.samples
        self.peak_bytes = self._sampler.peak()
        if self._hwm:
            self.peak_bytes = max(self.peak_bytes, peak_bytes(self._single))
        return False
