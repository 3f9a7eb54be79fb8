"""A clock for Supervisor unit tests: time moves only when the code under test waits, and
what a test scheduled (`after(delay, fn)`: a user's signal, a harness writing output) runs
at its moment. Same methods as dh_cli/supervisor/seam.py's Clock."""

from __future__ import annotations

import heapq
import itertools


class FakeClock:
    def __init__(self, start: float = 1000.0):
        self.t = start
        self.epoch = 1_796_000_000.0 - start  # wall() = epoch + now()
        self._timers: list = []
        self._order = itertools.count()
        self.waited: list[float] = []  # every wait_fds/sleep asked for, in seconds

    def now(self) -> float:
        return self.t

    def wall(self) -> float:
        """Epoch seconds, moving with now()."""
        return self.epoch + self.t

    def after(self, delay: float, fn) -> None:
        heapq.heappush(self._timers, (self.t + delay, next(self._order), fn))

    def run_until(self, when: float, stop_at_timer: bool = True) -> bool:
        """Move to `when`, running the timers due on the way; with stop_at_timer, stop just
        after the first one (what it did may end the wait, as a signal wakes a select).
        True when a timer ran."""
        while self._timers and self._timers[0][0] <= when:
            at, _, fn = heapq.heappop(self._timers)
            self.t = max(self.t, at)
            fn()
            if stop_at_timer:
                return True
        self.t = max(self.t, when)
        return False

    def sleep(self, seconds: float) -> None:
        self.waited.append(seconds)
        self.run_until(self.t + seconds, stop_at_timer=False)

    def wait_fds(self, fds: list[int], timeout: float) -> list[int]:
        self.waited.append(timeout)
        self.run_until(self.t + max(0.0, timeout))
        return []
