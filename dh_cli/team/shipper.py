"""Live replication (issue 15): every record and event the local log commits for a session is
shipped to the team world as it is committed, by a thread on its own connections.

Why it never slows the harness: the mirror writes the local log as before; the shipper only
reads it, on its own SQLite connection, and learns that something was committed from SQLite's
`PRAGMA data_version` (it changes when another connection commits; reading it costs a few
microseconds), looked at every POLL seconds. What was committed since the last look travels
as one batch through the ordinary push loop (sync.copy_session: COPY, ON CONFLICT DO NOTHING,
marks read from the rows themselves), so shipping is idempotent and a batch grows with the
load. The world's marks are read once per connection and then kept here: after a batch the
world holds at least what the local log held when the batch began.

When the server is down or slow the local log stays the truth: the shipper retries with a
growing backoff, says once that replication is behind and once that it caught up, and starts
again from the world's own marks on the new connection.

Every write carries the lease epoch (TeamWorld.fence): once another
machine took the session over, the server refuses the write, and the shipper stops for good."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from ..errors import WorldError
from ..osthread import name_os_thread
from ..worlds.local import LocalWorld
from .protocol import is_fenced

POLL = 0.05  # seconds between looks at the local log: 50 ms of the 250 ms lag budget
BACKOFF = (0.5, 1.0, 2.0, 4.0, 5.0)  # seconds before each retry while the server fails
FLUSH_FOR = 10.0  # how long stopping waits for the last records to reach the world


class Shipper:
    def __init__(self, db_path: Path, world: str, url: str, session_id: str, epoch_of, notice,
                 on_shipped=None):
        """world, url: the team world's name and URL; epoch_of(): the lease epoch to write
        under (None: not held yet, wait)."""
        self.db_path, self.world, self.url, self.session_id = db_path, world, url, session_id
        self.epoch_of, self.notice = epoch_of, notice
        self.on_shipped = on_shipped or (lambda: None)  # tests and the bench time it
        self.fenced: str | None = None
        self.behind_since: float | None = None
        self.shipped = 0
        self.held = False  # the lease was held once: something could be shipped
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="dh-shipper", daemon=True)
        self._caught_up = threading.Event()

    def start(self) -> "Shipper":
        self._thread.start()
        return self

    # the loop ---------------------------------------------------------------------------
    def _run(self) -> None:
        name_os_thread("dh-shipper")
        local = LocalWorld(self.db_path)
        state = _Link(self)
        try:
            self._loop(local, state)
        finally:
            state.close()
            local.close()

    def _loop(self, local: LocalWorld, link: "_Link") -> None:
        seen, failures, deadline = None, 0, None
        while not self.fenced:
            version = _version(local)
            if version != seen or failures:
                ok = self._ship_once(local, link)
                failures = 0 if ok else failures + 1
                seen = version if ok else seen
            if self._stop.is_set():
                if self.epoch_of() is None:  # the lease never held: nothing may be written
                    return  # (dh run with a world down at its start waited FLUSH_FOR at exit)
                deadline = deadline or time.monotonic() + FLUSH_FOR
                # done once what was committed up to now is shipped: a commit made while the
                # last batch travelled (the session's final state, seen missing after a long
                # catch-up batch) goes in one more pass
                if (not failures and _version(local) == seen) or time.monotonic() > deadline:
                    return
                if failures:  # the stop event is set: wait() would not wait
                    time.sleep(0.2)
                continue
            self._stop.wait(BACKOFF[min(failures, len(BACKOFF)) - 1] if failures else POLL)

    def _ship_once(self, local: LocalWorld, link: "_Link") -> bool:
        epoch = self.epoch_of()
        if epoch is None:
            return False  # the lease is not held yet: nothing may be written
        self.held = True
        try:
            link.ship(local, epoch)
        except WorldError as exc:
            if is_fenced(exc):
                self.fenced = str(exc)
                return True
            self._behind(exc)
            link.close()
            return False
        self._caught_up_now()
        self.on_shipped()
        return True

    def _behind(self, exc: BaseException) -> None:
        if self.behind_since is None:
            self.behind_since = time.monotonic()
            self.notice(f"dh: replication to the world is behind ({exc}); the local log keeps "
                        "everything, and dh keeps trying")

    def _caught_up_now(self) -> None:
        if self.behind_since is not None:
            self.notice(f"dh: replication to the world caught up after "
                        f"{time.monotonic() - self.behind_since:.0f} s")
            self.behind_since = None

    def stop(self) -> bool:
        """Ship what is left (up to FLUSH_FOR s) and stop; whether the world has it all."""
        self._stop.set()
        self._thread.join(timeout=FLUSH_FOR + 5)
        return self.held and self.behind_since is None and not self.fenced


def _version(local: LocalWorld) -> int:
    return local.conn.execute("PRAGMA data_version").fetchone()[0]


class _Link:
    """The shipper's connection to the world and the world's marks as last known."""

    def __init__(self, shipper: Shipper):
        self.shipper, self.remote, self.marks, self.epoch = shipper, None, None, None

    def ship(self, local: LocalWorld, epoch: int) -> None:
        from .sync import Masks, _Counter, copy_session

        sid = self.shipper.session_id
        self._connect(epoch)
        src = local.marks(sid).get(sid)
        if src is None:
            return
        if self.marks is None:
            self.marks = self.remote.marks(sid).get(sid)
        result = copy_session(local, self.remote, src, self.marks, _Counter(0, None),
                              Masks.pushing_to(self.remote))
        self.shipper.shipped += result.records
        self.marks = src

    def _connect(self, epoch: int) -> None:
        if self.remote is not None and self.epoch == epoch:
            return
        from . import open_world

        self.close()
        self.remote = open_world(self.shipper.world, self.shipper.url, migrate=False,
                                 connect_timeout=5)
        self.remote.fence(self.shipper.session_id, epoch)
        self.epoch = epoch

    def close(self) -> None:
        if self.remote is not None:
            try:
                self.remote.close()
            except Exception:  # noqa: BLE001 - a broken connection closes as well as it can
                pass
        self.remote, self.marks = None, None
