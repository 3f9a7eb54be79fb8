"""A log that cannot be written while the harness runs on (a full disk, an I/O error, a lock
held too long): the in-process mirror (live.py) and each session of the shared mirror
(shared_sessions.py) keep one `Failing`. The first failure is told once; the mirror tries
again every RETRY s from what the log holds, and the first write that succeeds journals how
long the log could not be written (`log_write_failed`) and tells that mirroring caught up."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

from .. import events
from ..util import now_iso
from ..worlds.local import db_error

CAUGHT_UP = "dh: the log can be written again; mirroring has caught up"


class Failing:
    def __init__(self):
        self.since: str | None = None
        self.started = 0.0
        self.error = ""

    def __bool__(self) -> bool:
        return self.since is not None

    def failed(self, exc: BaseException, db: Path) -> str | None:
        """The notice to give when the log just started failing; None while it still is."""
        if self:
            return None
        error = db_error(exc, db) if isinstance(exc, sqlite3.Error) else exc
        self.since, self.started, self.error = now_iso(), time.monotonic(), str(error)
        return f"dh: {error}; the harness keeps running, and dh keeps trying to log it"

    def recovered(self, world, session_id: str) -> str:
        """Journal the failure in the log that can be written again (its errors propagate:
        then it is failing still); the notice to give."""
        seconds = round(time.monotonic() - self.started, 1)
        events.add(world, session_id, events.log_write_failed(self.since, seconds, self.error))
        self.since = None
        return CAUGHT_UP
