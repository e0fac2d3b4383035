"""How many threads a command computes with when not told: the cores that are idle now.

torch's default is every core the process may use. When another process holds some of them,
torch's threads wait on each other at every parallel region and a step takes as long as its
slowest thread on a shared core. So a command that computes (train, evaluate, forecast,
benchmark, quality) takes, unless `--threads` says otherwise, the cores found idle over a short
look at /proc/stat when it starts: all of them on an idle machine, one fewer for each busy one,
at least one (bench/bench_busy.py measures it)."""

from __future__ import annotations

import os
import time

PROBE_S = 0.2  # how long the look at the machine's load lasts


def _cpu_times() -> tuple[float, float] | None:
    """(idle, total) jiffies of all CPUs, or None where /proc/stat is not there."""
    try:
        with open("/proc/stat") as f:
            fields = [float(v) for v in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0.0)  # idle + iowait
    return idle, sum(fields[:8])


def idle_cores(probe_s: float = PROBE_S) -> float:
    """Cores of this process's affinity that were idle over the last `probe_s` seconds (all
    of them where the load cannot be read)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    cores = cores or 1
    before = _cpu_times()
    if before is None:
        return float(cores)
    time.sleep(probe_s)
    after = _cpu_times()
    if after is None or after[1] <= before[1]:
        return float(cores)
    share = (after[0] - before[0]) / (after[1] - before[1])  # of all the machine's CPUs
    machine = os.cpu_count() or cores
    return min(float(cores), share * machine)


def default_threads(asked: int | None = None) -> int:
    """`asked`, else the idle cores rounded, at least 1."""
    if asked:
        return asked
    return max(1, int(idle_cores() + 0.5))
