"""Tool processes that outlive the harness.

Every harness runs its shell tools in a process group of their own, so a killed harness
leaves its running command behind: orphaned, still able to finish its side effect. dh is a
child subreaper, so those orphans are re-parented to dh. While the harness runs, dh keeps a
picture of its descendants; when the harness dies, each tool still running gets a grace period
to finish on its own (dh reaps it and keeps its exit code), and is then ended — SIGTERM, then
SIGKILL to its group. The outcome of each decides how dh reports the cut-off call."""

from __future__ import annotations

import os
import signal
import time
from dataclasses import asdict, dataclass

import psutil

from .procs import signal_group


@dataclass
class ToolOutcome:
    pid: int
    command: str
    started: float  # epoch seconds
    finished: bool = False  # ran to the end on its own
    exit_code: int | None = None
    ended_by_dh: bool = False

    def to_dict(self) -> dict:
        return asdict(self)


def _describe(proc: psutil.Process) -> tuple[float, str] | None:
    try:
        return proc.create_time(), " ".join(proc.cmdline())[:300]
    except psutil.Error:
        return None


class ToolTracker:
    def __init__(self, harness_pid: int):
        self.harness_pid = harness_pid
        self.seen: dict[int, tuple[float, str]] = {}  # pid -> (create time, command line)
        self.done: list[ToolOutcome] = []

    def snapshot(self) -> None:
        """Remember the harness's direct children (its tool commands), whatever their group."""
        try:
            children = psutil.Process(self.harness_pid).children()
        except psutil.Error:
            return
        for child in children:
            if child.pid not in self.seen and (info := _describe(child)):
                self.seen[child.pid] = info

    def survivors(self) -> list[int]:
        """Tools still running after the harness died: remembered ones, plus any process
        re-parented to dh (started after the last snapshot)."""
        for child in psutil.Process().children():
            if child.pid != self.harness_pid and child.pid not in self.seen:
                if (info := _describe(child)) and info[0] >= time.time() - 86400:
                    self.seen[child.pid] = info
        return [pid for pid in self.seen if _running(pid, self.seen[pid][0])]

    def settle(self, grace: float, poll: float = 0.05) -> list[ToolOutcome]:
        """Wait up to `grace` seconds for survivors to finish, then end the rest."""
        pending = {pid: ToolOutcome(pid, self.seen[pid][1], self.seen[pid][0])
                   for pid in self.survivors()}
        deadline = time.monotonic() + grace
        while pending and time.monotonic() < deadline:
            for pid in list(pending):
                if not _running(pid, pending[pid].started):
                    outcome = pending.pop(pid)
                    outcome.finished, outcome.exit_code = True, _reap(pid)
                    self.done.append(outcome)
            time.sleep(poll)
        for outcome in pending.values():
            end_group(outcome.pid)
            outcome.ended_by_dh, outcome.exit_code = True, _reap(outcome.pid)
            self.done.append(outcome)
        return self.done



def _running(pid: int, create_time: float) -> bool:
    try:
        proc = psutil.Process(pid)
        return proc.status() != psutil.STATUS_ZOMBIE and abs(proc.create_time() - create_time) < 0.05
    except psutil.Error:
        return False


def _reap(pid: int) -> int | None:
    """Collect the exit status of a process re-parented to dh (None if it is not ours)."""
    try:
        got, status = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return None
    if got == 0:
        return None
    return os.waitstatus_to_exitcode(status)


def end_group(pid: int, wait: float = 1.0) -> None:
    """SIGTERM the process's group (and the process), then SIGKILL what is left."""
    try:
        pgid = os.getpgid(pid)
    except ProcessLookupError:
        return
    for sig in (signal.SIGTERM, signal.SIGKILL):
        signal_group(pgid, sig)
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            if _reap(pid) is not None or not psutil.pid_exists(pid):
                return
            time.sleep(0.02)


def end_descendants(exclude: set[int] = frozenset()) -> int:
    """End every process dh started that is still alive (used when dh itself stops)."""
    count = 0
    for child in psutil.Process().children(recursive=True):
        if child.pid in exclude:
            continue
        try:
            if child.status() != psutil.STATUS_ZOMBIE:
                end_group(child.pid, wait=0.5)
                count += 1
            _reap(child.pid)
        except psutil.Error:
            pass
    return count
