"""The floor every mirror benchmark prints next to dh's figures: what a bare Python loop pays
to append the same records to SQLite and commit each one (WAL, synchronous=NORMAL, the log's
page size), with nothing else around it: no tailing, no parsing, no supervisor. Measured in
the same run as the figure it is compared with, because this machine is shared and noisy."""

from __future__ import annotations

import sqlite3
import tempfile
import time
from pathlib import Path


def commit_floor(lines: list[bytes], workdir: Path | None = None, rate: float | None = None) -> dict:
    """CPU and wall microseconds per record of: BEGIN; INSERT the line; COMMIT, line by line.
    With `rate`, the loop sleeps 1/rate between records, as a live mirror does between
    wake-ups: a commit after a sleep finds the CPU caches cold (here 80-85 us per commit
    after 50 ms asleep against 13 us back to back), which is a cost no mirror can avoid."""
    folder = Path(workdir or tempfile.mkdtemp(prefix="dh-floor-"))
    db = folder / "floor.db"
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("PRAGMA page_size=16384")
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute("CREATE TABLE lines (id INTEGER PRIMARY KEY, offset INTEGER, raw BLOB)")
    cpu, wall, offset = 0.0, 0.0, 0
    for line in lines:
        if rate:
            time.sleep(1 / rate)
        started_cpu, started = time.thread_time(), time.perf_counter()
        conn.execute("BEGIN")
        conn.execute("INSERT INTO lines (offset, raw) VALUES (?, ?)", (offset, line))
        conn.execute("COMMIT")
        offset += len(line)
        cpu += time.thread_time() - started_cpu
        wall += time.perf_counter() - started
    conn.close()
    for path in folder.glob("floor.db*"):
        path.unlink()
    return {"records": len(lines), "cpu_us": cpu / len(lines) * 1e6, "wall_us": wall / len(lines) * 1e6}


def pi_load_lines(count: int, pad: int = 100) -> list[bytes]:
    """Lines shaped like tests/fakes/pi_writer.py's `custom` entries."""
    import json

    filler = "x" * pad
    return [(json.dumps({"type": "custom", "customType": "load", "id": f"{n + 2:08x}",
                         "parentId": f"{n + 1:08x}", "timestamp": "2026-12-01T09:00:00.000Z",
                         "data": {"n": n, "t": time.time(), "pad": filler}},
                        separators=(",", ":")) + "\n").encode() for n in range(count)]
