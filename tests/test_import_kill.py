"""SIGKILL of `dh import` at any point, then running it again, gives the same log as one
clean run: every native record exactly once."""

import os
import signal
import subprocess
import sys
import time

import pytest

from dh_cli.worlds.local import LocalWorld

from .fakes.transcripts import write_claude_transcript


def log_content(dh_home) -> list[tuple]:
    world = LocalWorld(dh_home / "dh.db")
    out = []
    for session in world.list_sessions():
        for source in world.sources(session["id"]):
            out += [(session["harness_session_id"], source.relpath, r.generation, r.offset, r.raw)
                    for r in world.records(session["id"], source.id)]
    world.close()
    return sorted(out)


def run_import(home, dh_home, kill_after: float | None = None, pool_mb: str = "32") -> int:
    env = {**os.environ, "DH_HOME": str(dh_home), "DH_PARSE_POOL_MB": pool_mb}
    proc = subprocess.Popen([sys.executable, "-m", "dh_cli", "import", "claude", "--all",
                             "--home", str(home)], env=env, stdout=subprocess.DEVNULL)
    if kill_after is not None:
        time.sleep(kill_after)
        proc.send_signal(signal.SIGKILL)
    return proc.wait()


def _left_behind(home, wait: float = 5.0) -> list:
    """Processes still running for this import's home a moment after the kills."""
    import psutil

    deadline = time.monotonic() + wait
    while True:
        left = [p for p in psutil.process_iter(["cmdline", "status"])
                if str(home) in " ".join(p.info["cmdline"] or []) and p.info["status"] != psutil.STATUS_ZOMBIE]
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.1)


@pytest.mark.parametrize("pool_mb", ["32", "1"], ids=["in-process", "parse-pool"])
def test_killed_import_resumes_to_the_same_log(tmp_path, pool_mb):
    """pool_mb 1: every file is parsed by the second process (mirror/parse_pool.py)."""
    home = tmp_path / "claude"
    for n in range(3):
        write_claude_transcript(home / "projects" / "-home-dev-project" / f"{n:08d}-aaaa-bbbb-cccc-dddddddddddd.jsonl",
                                12 << 20, seed=n)
    clean = tmp_path / "clean"
    assert run_import(home, clean, pool_mb="100000") == 0  # the reference: no worker at all
    expected = log_content(clean)
    killed = tmp_path / "killed"
    codes = [run_import(home, killed, kill_after=delay, pool_mb=pool_mb)
             for delay in (0.3, 0.6, 0.9, 1.2)]
    assert -signal.SIGKILL in codes, "no kill landed while the import was running"
    assert not _left_behind(home), "a killed dh import left a process behind (its parse worker)"
    assert run_import(home, killed, pool_mb=pool_mb) == 0
    assert log_content(killed) == expected
    total = sum(p.stat().st_size for p in home.rglob("*.jsonl"))
    assert sum(len(row[-1]) for row in expected) == total
