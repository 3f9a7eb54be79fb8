"""A short version of bench/bench_load.py: 8 `dh run` sessions at once on one dh.db, each
over a writer appending 200 Pi-format records a second for 10 s. Nothing may be lost and no dh
may fail on a locked database. Timing is the benchmark's business, not this test's."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))

from bench_load import run_load  # noqa: E402


def test_eight_sessions_at_once_lose_nothing(tmp_path):
    result = run_load(sessions=8, rate=200, seconds=10, workdir=tmp_path, quiet=True)
    assert result.failed_runs == []
    assert result.locked_failures == 0
    assert result.native_records == 8 * (2000 + 3)  # header, prompt, 2000 entries, final answer
    assert (result.lost, result.mismatched_sessions) == (0, 0)
    assert result.logged_records == result.native_records
