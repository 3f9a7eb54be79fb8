"""The one seam between the Supervisor and the OS: `Procs` (spawn, signal a group, the
harness's tool children, reap, trap the user's signals) and `Clock` (now, sleep, wait on
fds). The Supervisor is handed one of each, real by default; tests hand it
tests/fakes/procs.py and tests/fakes/clock.py and run its state machine tick by tick."""

from __future__ import annotations

import os
import select
import signal
import time
from typing import Callable

from ..procs import PipeChild, become_subreaper, signal_group
from .guardian import dismiss_guardian, guard_part, start_guardian
from .terminal import PtyChild
from .tools import ToolTracker, end_descendants


class Clock:
    """Real time: monotonic seconds, sleeping, and waiting for a file descriptor."""

    def now(self) -> float:
        return time.monotonic()

    def wall(self) -> float:
        """Epoch seconds: the time a provider's limit resets is told in it."""
        return time.time()

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)

    def wait_fds(self, fds: list[int], timeout: float) -> list[int]:
        """The fds of `fds` readable within timeout (a signal arriving on the wake fd, say)."""
        return select.select(fds, [], [], max(0.0, timeout))[0]


class Procs:
    """Real processes: what the Supervisor asks of the OS, in one place."""

    def spawn(self, argv, env, cwd, *, pty: bool, on_line=None, typed=None, ready=None):
        """The harness, leading its own process group: in a pseudo-terminal (interactive)
        or with its stdout read through a pipe (headless)."""
        if pty:
            return PtyChild(argv, env, cwd, typed=typed, ready=ready)
        return PipeChild(argv, env, cwd, on_line or (lambda line: None))

    def signal_group(self, pgid: int, sig: int) -> None:
        signal_group(pgid, sig)

    def tracker(self, pid: int, is_part, tool_command=" ".join, on_part=None):
        """The tool commands (children) of the harness pid: see tools.py."""
        return ToolTracker(pid, is_part, tool_command, on_part)

    def end_descendants(self) -> int:
        """End and reap every process dh started that still lives (dh is stopping)."""
        return end_descendants(exclude=set())

    def become_subreaper(self) -> bool:
        return become_subreaper()

    def trap(self, signals, handler) -> tuple[int, Callable[[], None]]:
        """Route `signals` to handler, with a wake fd readable once one arrives (so a sleep
        on it ends at once); returns (wake fd, undo)."""
        previous = {s: signal.signal(s, handler) for s in signals}
        wake_r, wake_w = os.pipe()
        for fd in (wake_r, wake_w):
            os.set_blocking(fd, False)
        old_wakeup = signal.set_wakeup_fd(wake_w)

        def undo() -> None:
            signal.set_wakeup_fd(old_wakeup)
            for sig, old in previous.items():
                signal.signal(sig, old)
            os.close(wake_r)
            os.close(wake_w)
        return wake_r, undo

    def guardian(self) -> int | None:
        """A process that ends the harness's parts and gives the terminal back if dh dies
        (see guardian.py)."""
        return start_guardian()

    def guard_part(self, guardian: int | None, pid: int, created: float) -> None:
        guard_part(guardian, pid, created)

    def dismiss_guardian(self, guardian: int | None) -> None:
        dismiss_guardian(guardian)
