"""How long the live mirror lets appends gather before it reads them.

Every wake-up of the mirror pays the same fixed path (the watcher's select and read, a thread
switch, open + fstat + two short reads of the file, BEGIN ... COMMIT) whether it then commits
one record or twenty: about 250 us of CPU here against 15 us for the commit of one record in a
bare loop (bench/bench_mirror.py). So when records arrive in a stream (the last wake-up was
less than STREAM_GAP ago), the watcher waits a window before waking the mirror, and the mirror
commits everything that arrived in it at once. The window is what is left of the lag budget
once the mirror's recent sync time is paid for, so lag stays within LAG_BUDGET plus one sync
at any rate: a slow commit (many writers queueing on the lock) shrinks the window. A record
after a pause is read at once: at low rates nothing waits."""

from __future__ import annotations

import time

LAG_BUDGET = 0.010  # half of the single-session goal (p99 <= 20 ms at 500 records/s)
STREAM_GAP = 2 * LAG_BUDGET  # wake-ups closer than this are a stream worth batching
SMOOTHING = 0.2  # weight of the newest sync in the running mean of sync times


class Pacer:
    def __init__(self, budget: float = LAG_BUDGET):
        self.budget = budget
        self.sync_time = 0.0  # running mean of the wall time of a sync that committed
        self.last_wake = float("-inf")

    def window(self) -> float:
        """Seconds to let appends gather after this wake-up (0: wake the mirror now)."""
        now = time.monotonic()
        gap, self.last_wake = now - self.last_wake, now
        if gap > STREAM_GAP:
            return 0.0
        return max(0.0, self.budget - self.sync_time)

    def synced(self, seconds: float) -> None:
        """The mirror's report after a sync that committed records."""
        self.sync_time += SMOOTHING * (seconds - self.sync_time)
