"""What a test sees of a process from outside: whether it lives, and its threads' names (dh
names its threads, osthread.py, so a test can tell which mirror runs where)."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import psutil


def alive(pid: int | None) -> bool:
    try:
        return pid is not None and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def proc_comm(pid: int, tid: str) -> str:
    try:
        return Path(f"/proc/{pid}/task/{tid}/comm").read_text().strip()
    except OSError:
        return ""


def threads(pid: int) -> set[str]:
    try:
        return {proc_comm(pid, tid) for tid in os.listdir(f"/proc/{pid}/task")}
    except OSError:
        return set()


def stop_group(proc: subprocess.Popen, grace: float = 30) -> None:
    """Stop a server a test started in a session of its own (start_new_session=True), with
    whatever it started: SIGTERM to its group, SIGKILL after `grace` seconds."""
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
