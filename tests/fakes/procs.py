"""Processes for Supervisor unit tests: each spawn starts a `FakeChild` that follows a
`Script` (how long it runs, its exit code, the signals it ignores, its stderr) on a
FakeClock. Same methods as dh_cli/supervisor/seam.py's Procs; every call is recorded."""

from __future__ import annotations

import signal
from dataclasses import dataclass, field

from .clock import FakeClock


@dataclass
class Script:
    runs_for: float | None = None  # seconds until it exits on its own; None: until signalled
    rc: int = 0  # its exit code then (negative: killed by that signal)
    ignores: frozenset = frozenset()  # signals it survives (SIGKILL never is)
    stderr: str = ""


class FakeChild:
    def __init__(self, clock: FakeClock, pid: int, script: Script):
        self.clock, self.pid, self.pgid, self.script = clock, pid, pid, script
        self.create_time = 1.7e9 + pid
        self.started = self.last_output = clock.now()
        self.exit_at = None if script.runs_for is None else clock.now() + script.runs_for
        self.rc: int | None = None
        self.received: list[int] = []
        self.finished = False

    def _until(self, timeout: float) -> int | None:
        deadline = self.clock.now() + timeout
        if self.exit_at is not None:
            deadline = min(deadline, self.exit_at)
        self.clock.run_until(deadline)
        if self.rc is None and self.exit_at is not None and self.clock.now() >= self.exit_at:
            self.rc = self.script.rc
        return self.rc

    def wait_exit(self, timeout: float, wake_fd=None) -> int | None:
        return self.rc if self.rc is not None else self._until(timeout)

    def wait(self, timeout: float | None = None) -> int | None:
        return self.rc if self.rc is not None else self._until(timeout or 0.0)

    def receive(self, sig: int) -> None:
        self.received.append(sig)
        if self.rc is None and (sig == signal.SIGKILL or sig not in self.script.ignores):
            self.rc = -sig

    def finish(self) -> None:
        self.finished = True

    def stderr_tail(self) -> str:
        return self.script.stderr


class FakeTracker:
    def __init__(self, child: FakeChild):
        self.child = child
        self.snapshots, self.ended_parts, self.settled = 0, [], []
        self.seized: list[bool] = []  # for each look at the harness's death: its pipes done yet?

    def snapshot(self) -> None:
        self.snapshots += 1

    def seize(self) -> list:
        self.seized.append(self.child.finished)
        return []

    def settle(self, grace: float) -> list:
        self.settled.append(grace)
        return []


@dataclass
class FakeProcs:
    clock: FakeClock
    scripts: list[Script]  # one per spawn, the last one repeated
    children: list[FakeChild] = field(default_factory=list)
    spawned: list[dict] = field(default_factory=list)
    signals: list[tuple[int, int, float]] = field(default_factory=list)  # (pgid, signal, when)
    trapped: tuple = ()
    untrapped: bool = False
    ended_descendants: int = 0
    handler: object = None
    trackers: list[FakeTracker] = field(default_factory=list)
    guarded: list[tuple] = field(default_factory=list)

    def spawn(self, argv, env, cwd, *, pty: bool, on_line=None, typed=None, ready=None):
        script = self.scripts[min(len(self.children), len(self.scripts) - 1)]
        child = FakeChild(self.clock, 4000 + len(self.children), script)
        self.children.append(child)
        self.spawned.append({"argv": list(argv), "env": dict(env), "cwd": cwd, "pty": pty,
                             "typed": typed, "at": self.clock.now()})
        return child

    def signal_group(self, pgid: int, sig: int) -> None:
        self.signals.append((pgid, sig, self.clock.now()))
        for child in self.children:
            if child.pgid == pgid:
                child.receive(sig)

    def tracker(self, pid: int, is_part, tool_command=" ".join, on_part=None):
        self.trackers.append(FakeTracker(next(c for c in self.children if c.pid == pid)))
        return self.trackers[-1]

    def guard_part(self, guardian, pid: int, created: float) -> None:
        self.guarded.append((guardian, pid, created))

    def end_descendants(self) -> int:
        self.ended_descendants += 1
        return 0

    def become_subreaper(self) -> bool:
        return True

    def trap(self, signals, handler):
        self.trapped, self.handler = tuple(signals), handler

        def undo() -> None:
            self.untrapped = True
        return None, undo

    def guardian(self):
        return None

    def dismiss_guardian(self, guardian) -> None:
        pass

    def deliver(self, sig: int) -> None:
        """The user's signal reaching dh (Ctrl-C, kill)."""
        self.handler(sig, None)
