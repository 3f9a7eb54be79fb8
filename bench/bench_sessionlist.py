"""The session list at size (issue 30, "Scale"): wall time of `dh log list`, bare `dh` and
`dh log search` over a log of --sessions sessions (copies of the real fixtures,
tests/fakes/many_sessions.py), next to a baseline measured in the same run: a Python process
that runs a plain SQL count of the same sessions' records (`SELECT s.id, COUNT(r.id) FROM
sessions s LEFT JOIN records r ... GROUP BY s.id`). Goal: each under a second at 10,000.
Median of --runs runs, output to /dev/null.

Run: python bench/bench_sessionlist.py [--sessions 500,2000,10000] [--runs 3]"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.fakes.many_sessions import copy_sessions, import_fixtures  # noqa: E402

COUNT = ("import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); print(len(c.execute("
         "'SELECT s.id, COUNT(r.id) FROM sessions s LEFT JOIN records r ON r.session_id = s.id"
         " GROUP BY s.id').fetchall()))")


def median_wall(argv: list[str], env: dict, runs: int) -> float:
    walls = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run(argv, env=env, check=True, stdout=subprocess.DEVNULL)
        walls.append(time.perf_counter() - started)
    return statistics.median(walls)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", default="500,2000,10000")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="dh-sessionlist-"))
    env = {**os.environ, "DH_HOME": str(work), "PYTHONPATH": str(ROOT)}
    import_fixtures(work)
    dh = [sys.executable, "-m", "dh_cli"]
    for wanted in (int(n) for n in args.sessions.split(",")):
        count = copy_sessions(work / "dh.db", wanted)
        base = median_wall([sys.executable, "-c", COUNT, str(work / "dh.db")], env, args.runs)
        print(f"{count:,} sessions: baseline (plain SQL count) {base:.2f} s", flush=True)
        for name, argv in (("dh log list", dh + ["log", "list"]), ("dh", dh),
                           ("dh log search files", dh + ["log", "search", "files"])):
            wall = median_wall(argv, env, args.runs)
            print(f"  {name}: {wall:.2f} s ({wall / base:.1f}x baseline; goal < 1 s)", flush=True)
    shutil.rmtree(work)


if __name__ == "__main__":
    main()
