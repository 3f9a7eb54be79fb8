"""The session list at size (issue 30, "Scale"): wall time of `dh log list`, bare `dh` and
`dh log search` over a log of --sessions sessions (copies of the real fixtures,
tests/fakes/many_sessions.py), next to a baseline measured in the same run: a Python process
that runs a plain SQL count of the same sessions' records (`SELECT s.id, COUNT(r.id) FROM
sessions s LEFT JOIN records r ... GROUP BY s.id`). Goal: each under a second at 10,000.
Median of --runs runs, output to /dev/null; wall time and the child's CPU time (user + system,
which a loaded machine inflates less than wall time).

Measured 2026-12-02 on a shared 2-core machine (load 3.6-4.3), wall seconds (CPU alike),
median of 3, this checkout against a9fb4b8's (`--code`) in the same run:
10,001 sessions (baseline 0.07): dh log list 0.58 (8.4x baseline) against 2.21 (30.4x),
--json 0.66 against 1.77, dh 0.44 against 0.44, dh log search 0.27 against 0.27; 505
sessions (baseline 0.04): dh log list 0.20 against 0.40. The first list after the copies
makes their digests (worlds/migrations.py m045): 1.57 s for 9,496 sessions, once (reading
the model_calls view for every session is 0.7-0.9 s of it); later lists read the digests.
Each copy is placed on this machine as a session dh ran here is (its `places` and
`mirrored_paths` rows), so the listings' check of the harness's own file (stores/lost.py:
one query, a stat a session) is measured. 2026-12-06, 10,001 sessions, median of 5, CPU
seconds (the wall times swung 2-9 s with the machine's load), this checkout against the
main before that check in the same hour: dh log list 0.90 against 0.84 (baseline 0.10),
--json 0.94 against 0.91, dh 0.71 against 0.66.

Run: python bench/bench_sessionlist.py [--sessions 500,2000,10000] [--runs 3] [--code CHECKOUT]"""

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


def median_run(argv: list[str], env: dict, runs: int) -> tuple[float, float]:
    """(median wall seconds, median CPU seconds of the child: user + system, from wait4). The
    child runs in DH_HOME: `python -m` puts its folder first on the path, ahead of PYTHONPATH."""
    walls, cpus = [], []
    for _ in range(runs):
        started = time.perf_counter()
        proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, cwd=env["DH_HOME"])
        _, status, usage = os.wait4(proc.pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0, argv
        walls.append(time.perf_counter() - started)
        cpus.append(usage.ru_utime + usage.ru_stime)
    return statistics.median(walls), statistics.median(cpus)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", default="500,2000,10000")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--code", type=Path, default=ROOT,
                        help="the checkout whose dh is measured (another commit's, for a before)")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="dh-sessionlist-"))
    env = {**os.environ, "DH_HOME": str(work), "PYTHONPATH": str(args.code.resolve())}
    import_fixtures(work, args.code.resolve())
    dh = [sys.executable, "-m", "dh_cli"]
    for wanted in (int(n) for n in args.sessions.split(",")):
        count = copy_sessions(work / "dh.db", wanted)
        base, base_cpu = median_run([sys.executable, "-c", COUNT, str(work / "dh.db")], env, args.runs)
        print(f"{count:,} sessions: baseline (plain SQL count) {base:.2f} s wall, {base_cpu:.2f} s CPU",
              flush=True)
        for name, argv, runs in (("dh log list, first after the copies", dh + ["log", "list"], 1),
                                 ("dh log list", dh + ["log", "list"], args.runs),
                                 ("dh log list --json", dh + ["log", "list", "--json"], args.runs),
                                 ("dh", dh, args.runs),
                                 ("dh log search files", dh + ["log", "search", "files"], args.runs)):
            wall, cpu = median_run(argv, env, runs)
            print(f"  {name}: {wall:.2f} s wall ({wall / base:.1f}x baseline), {cpu:.2f} s CPU"
                  f" ({cpu / base_cpu:.1f}x); goal < 1 s", flush=True)
    shutil.rmtree(work)


if __name__ == "__main__":
    main()
