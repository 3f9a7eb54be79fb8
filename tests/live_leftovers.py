"""Nothing a live-world test started may outlive it: every `dh run`, `dh worker`, the `dh
resume` children a worker starts (each in a session of its own) and their harnesses.

A `dh worker` was found running an hour after a test run (with the run's private PostgreSQL:
tests/pg.py's watchdog now stops that one). Its test had failed before it sent SIGTERM, and
a worker is built to outlive a lost server (it waits for it with backoff), so nothing ever
stopped it. The fixture here finds such processes by the test's folder in their environment
(every one of them inherits a DH_HOME or HOME under it) or their cwd, kills what is left at
teardown, and fails the test when anything was."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import psutil
import pytest

GRACE = 10.0  # seconds for processes that are stopping (a worker handing back) to be gone


def started_under(root: Path) -> list[psutil.Process]:
    """Live processes (not this one, not zombies) whose environment or cwd is under root."""
    mark, found = str(root), []
    for proc in psutil.process_iter(["pid", "status"]):
        if proc.pid == os.getpid() or proc.info["status"] == psutil.STATUS_ZOMBIE:
            continue
        try:
            env = proc.environ()
            cwd = proc.cwd()
        except (psutil.Error, OSError):
            continue
        if cwd.startswith(mark) or any(v.startswith(mark) for v in (env.get("DH_HOME", ""),
                                                                    env.get("HOME", ""))):
            found.append(proc)
    return found


def describe(procs: list[psutil.Process]) -> str:
    lines = []
    for proc in procs:
        try:
            lines.append(f"{proc.pid}: {' '.join(proc.cmdline())[:160]}")
        except psutil.Error:
            lines.append(f"{proc.pid}: (gone)")
    return "; ".join(lines)


def kill_all(procs: list[psutil.Process]) -> None:
    for proc in procs:
        for kill in (lambda: os.killpg(os.getpgid(proc.pid), signal.SIGKILL),
                     lambda: os.kill(proc.pid, signal.SIGKILL)):
            try:
                kill()
            except (ProcessLookupError, PermissionError, OSError):
                pass
    psutil.wait_procs(procs, timeout=5)


def check_nothing_left(root: Path, grace: float = GRACE) -> None:
    """Wait up to `grace` s for the test's processes to end; kill the rest and fail."""
    deadline = time.monotonic() + grace
    while (left := started_under(root)) and time.monotonic() < deadline:
        time.sleep(0.2)
    if left:
        shown = describe(left)
        kill_all(left)
        pytest.fail(f"processes left running after the test (now killed): {shown}")


@pytest.fixture
def nothing_left(tmp_path):
    """Teardown: no process the test started is still running (checked in the process table)."""
    yield
    check_nothing_left(tmp_path)
