"""CPU seconds of running processes, thread by thread, read from /proc (Linux): what the load
benchmark splits dh's cost with. A thread is named by its comm (dh names its mirror threads,
see dh_cli/osthread.py); the main thread is the one whose id is the process's, and
threads that set no name are counted together as `other`."""

from __future__ import annotations

import os
from collections import Counter

TICK = os.sysconf("SC_CLK_TCK")


def thread_cpu(pid: int) -> Counter:
    """CPU seconds so far of each kind of thread of `pid` (empty once it has gone)."""
    out: Counter = Counter()
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
            with open(f"/proc/{pid}/task/{tid}/comm") as comm:
                name = comm.read().strip()
        except OSError:
            continue  # the thread ended meanwhile
        kind = "main" if int(tid) == pid else (name if name.startswith("dh-") else "other")
        out[kind] += (int(fields[11]) + int(fields[12])) / TICK
    return out


def total_cpu(pids: list[int]) -> Counter:
    total: Counter = Counter()
    for pid in pids:
        total.update(thread_cpu(pid))
    return total


def process_cpu(pid: int | None) -> float:
    """CPU seconds so far of the whole process, its ended threads included (0 once gone)."""
    if pid is None:
        return 0.0
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / TICK
