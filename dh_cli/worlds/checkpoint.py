"""WAL checkpoints off the mirror's commit path.

SQLite folds the WAL back into the database inside whichever commit crosses the threshold,
and that fold (copy the frames, fsync the database) takes 100 ms or more: every few hundred
commits the live mirror would stall while the harness keeps writing. The mirror's connection
therefore turns automatic checkpoints off, and this thread, on a connection of its own, runs
PASSIVE checkpoints (which never block a writer) after the mirror says it committed, at most
once per `every` seconds. An idle session wakes it never."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

EVERY = 1.0


class Checkpointer:
    def __init__(self, db_path: Path, every: float = EVERY):
        self.db_path, self.every = db_path, every
        self.wanted = threading.Event()
        self.stopping = threading.Event()
        self.checkpoints = 0
        self.thread = threading.Thread(target=self._run, name="dh-checkpoint", daemon=True)

    def start(self) -> "Checkpointer":
        self.thread.start()
        return self

    def committed(self) -> None:
        """Called by the writer after a commit: a checkpoint is due soon."""
        self.wanted.set()

    def stop(self) -> None:
        """Ask the thread to end, without waiting: a checkpoint under way finishes on its own
        (or is cut short by the process exiting, which SQLite survives), and the relaunch
        after a crash need not wait for its fsync."""
        self.stopping.set()
        self.wanted.set()

    def _run(self) -> None:
        conn = None
        try:
            while True:
                self.wanted.wait()
                if self.stopping.is_set():
                    return
                self.wanted.clear()
                conn = conn or sqlite3.connect(self.db_path, timeout=1, check_same_thread=False)
                self._checkpoint(conn)
                self.stopping.wait(self.every)
        finally:
            if conn is not None:
                conn.close()

    def _checkpoint(self, conn: sqlite3.Connection) -> None:
        try:
            conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
            self.checkpoints += 1
        except sqlite3.Error:
            # Disk full or a busy checkpoint lock: the frames stay in the WAL, where readers
            # see them, and the next checkpoint (or SQLite's own) folds them in.
            pass
