"""The guardian (dh_cli/supervisor/guardian.py) with real processes: a "dh" told of a part
of its harness (a process in a session of its own, as Codex's app-server daemon is) is
SIGKILLed; the guardian ends the part and the command it runs. A dh that exits on its own, or
a part that is not the process dh named (its pid reused), leaves the process alone.

Seen with Codex 0.171.0's TUI: dh and the TUI killed mid-turn, the daemon went on alone, ran
the shell command and asked the model for every remaining reply (tests/e2e/test_tui.py has the
real case)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time

import psutil
import pytest

DRIVER = textwrap.dedent("""
    import os, signal, subprocess, sys, time
    import psutil
    from dh_cli.supervisor.guardian import dismiss_guardian, guard_part, start_guardian

    how = sys.argv[1]
    guardian = start_guardian()  # no terminal here: only the parts to look after
    part = subprocess.Popen(["bash", "-c", "sleep 60; true"], start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    while not psutil.Process(part.pid).children():
        time.sleep(0.01)
    command = psutil.Process(part.pid).children()[0].pid
    created = psutil.Process(part.pid).create_time()
    # "reused": the pid dh named now belongs to another process, started a second later
    guard_part(guardian, part.pid, created + (1.0 if how == "reused" else 0.0))
    print(part.pid, command, flush=True)
    if how == "exits":
        dismiss_guardian(guardian)
        os._exit(0)
    os.kill(os.getpid(), signal.SIGKILL)
""")


def running(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def drive(how: str) -> list[int]:
    done = subprocess.run([sys.executable, "-c", DRIVER, how], capture_output=True, text=True, timeout=30)
    assert done.stdout.strip(), done.stderr
    return [int(pid) for pid in done.stdout.split()]


def gone_within(pids: list[int], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while any(map(running, pids)):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def test_a_part_is_ended_with_its_command_when_dh_is_killed():
    pids = drive("killed")
    assert gone_within(pids, 5), [psutil.Process(p).cmdline() for p in pids if running(p)]


@pytest.mark.parametrize("how", ["exits", "reused"])
def test_a_part_is_left_alone_when_dh_exits_or_the_pid_is_another_process(how):
    pids = drive(how)
    try:
        assert not gone_within(pids, 1.0)
        assert all(map(running, pids))
    finally:
        for pid in pids:
            try:
                psutil.Process(pid).kill()
            except psutil.NoSuchProcess:
                pass
