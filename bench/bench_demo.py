"""`dh demo` wall time (issue 18): the whole demo — start, the kill, repair, resume, the log
shown, the temporary folder removed — as a new user runs it, piped. Goal: under 15 s on this
machine. Baseline measured in the same run: `dh --version` (Python start-up and dh's imports,
the floor of any dh command), so the ratio says what the demo itself costs.
Run: python bench/bench_demo.py [runs]"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GOAL = 15.0


def timed(args: list[str], env: dict) -> float:
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "dh_cli", *args], env=env, cwd=ROOT,
                          capture_output=True, stdin=subprocess.DEVNULL)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        sys.exit(f"dh {' '.join(args)} failed ({done.returncode}): {done.stderr.decode()[-500:]}")
    return elapsed


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    with tempfile.TemporaryDirectory(prefix="bench-demo-") as tmp:
        env = {**os.environ, "TMPDIR": tmp, "DH_HOME": str(Path(tmp) / "untouched"),
               "PYTHONPATH": str(ROOT)}
        base = [timed(["--version"], env) for _ in range(runs)]
        demo = [timed(["demo"], env) for _ in range(runs)]
        left = sorted(p.name for p in Path(tmp).iterdir())
    b, d = statistics.median(base), statistics.median(demo)
    print(f"dh --version (baseline): median {b:.2f} s over {runs} runs")
    print(f"dh demo:                 median {d:.2f} s, max {max(demo):.2f} s "
          f"({d / b:.1f}x the baseline); goal < {GOAL:g} s: {'met' if max(demo) < GOAL else 'NOT met'}")
    print(f"left in TMPDIR afterwards: {left or 'nothing'}")


if __name__ == "__main__":
    main()
