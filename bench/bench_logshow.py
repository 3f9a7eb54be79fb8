"""`dh log show` of a large session (issue 17): peak RSS and time of `dh log show --json`
(also `--raw` and the table) of a session of --records records (200k by default), next to
`jq -c .` over the native file, measured in the same run. Goals: peak RSS <= 100 MB, time <=
3x jq's. Every command writes to /dev/null; RSS is the child's ru_maxrss from wait4.

Run: python bench/bench_logshow.py [--records 200000] [--modes json,raw,table]"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.fakes.transcripts import write_claude_transcript  # noqa: E402

SID = "5f0c2a9e-1b7d-4c3e-9a61-2d8f0e4b7c15"


def measured(argv: list[str], env: dict | None = None) -> tuple[float, float, int]:
    """(wall seconds, peak RSS in MB, exit code) of one command writing to /dev/null."""
    with open(os.devnull, "wb") as sink:
        started = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=sink, stderr=subprocess.PIPE, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - started
    return wall, usage.ru_maxrss / 1024, os.waitstatus_to_exitcode(status)


def session_of(records: int, work: Path) -> Path:
    """A generated Claude Code transcript of about `records` lines."""
    sample = work / "sample.jsonl"
    lines = write_claude_transcript(sample, 1 << 20)
    per_line = sample.stat().st_size / lines
    sample.unlink()
    native = work / "claude" / "projects" / "-home-dev-project" / f"{SID}.jsonl"
    lines = write_claude_transcript(native, int(records * per_line))
    print(f"session: {lines:,} records, {native.stat().st_size / 1e6:.0f} MB", flush=True)
    return native


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--modes", default="json,raw,table")
    args = parser.parse_args()
    if not shutil.which("jq"):
        raise SystemExit("jq is not installed (apt-get install jq)")
    work = Path(tempfile.mkdtemp(prefix="dh-logshow-"))
    native = session_of(args.records, work)
    env = {**os.environ, "DH_HOME": str(work / "dh"), "PYTHONPATH": str(ROOT)}
    dh = [sys.executable, "-m", "dh_cli"]
    subprocess.run(dh + ["import", "claude", "--all", "--home", str(work / "claude")], env=env,
                   check=True, stdout=subprocess.DEVNULL)
    jq_wall, jq_rss, _ = measured(["jq", "-c", ".", str(native)])
    print(f"baseline jq -c . over the native file: {jq_wall:.1f} s, peak RSS {jq_rss:.0f} MB", flush=True)
    flags = {"json": ["--json"], "raw": ["--raw"], "table": []}
    for mode in args.modes.split(","):
        wall, rss, code = measured(dh + ["log", "show", SID] + flags[mode], env)
        print(f"dh log show {' '.join(flags[mode]) or '(table)'}: {wall:.1f} s ({wall / jq_wall:.1f}x jq; "
              f"goal <= 3x), peak RSS {rss:.0f} MB (goal <= 100 MB){'' if code == 0 else f', exit {code}'}",
              flush=True)
    shutil.rmtree(work)


if __name__ == "__main__":
    main()
