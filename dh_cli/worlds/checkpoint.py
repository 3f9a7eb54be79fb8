"""WAL checkpoints off the mirror's commit path, and a WAL that stays bounded.

SQLite folds the WAL back into the database inside whichever commit crosses the threshold,
and that fold (copy the frames, fsync the database) takes 100 ms or more: every few hundred
commits the live mirror would stall while the harness keeps writing. The mirror's connection
therefore turns automatic checkpoints off, and this thread, on a connection of its own, folds
the WAL in instead.

It wakes only when a commit left the WAL file past `SOFT` bytes (one stat() per commit; an
idle session wakes it never). Every connection of the log sets journal_size_limit to SOFT, so
once a checkpoint has folded in every frame, the next commit restarts the WAL and cuts the file
back to SOFT: past SOFT means "this much written since the last restart". A PASSIVE checkpoint
(which never blocks a writer) is then enough while the log is quiet between commits. Under
steady writes from many processes it never is: writers append while it runs, the WAL never
restarts and grew without bound (216 MB in 11 s at 300 records/s). Past a quarter of the
limit (DH_WAL_LIMIT_MB, 64 MB by default) the thread therefore runs a TRUNCATE checkpoint,
which holds writers back for the fold and its fsync and leaves an empty WAL (a quarter: 128
sessions commit some 32 MB of WAL a second, 16 KiB pages, 3-4 pages a commit).

Every supervising dh has such a thread; they take turns (the machine-wide lock file
`checkpoint.lock` next to the log), so that 32 of them do not keep SQLite's checkpoint lock
taken between them. Measured (bench_load.py): one session at 300 records/s for 5 minutes
peaks at 22 MB of WAL (649 MB in 30 s before); 8 sessions at 200/s at 34-45 MB (2.5 GB
before). With 32 writers at 20/s it peaks at 43-62 MB, at 200/s at 65-77 MB, and with 128
writers at 5/s (load average 50-90) at 175 MB: what bounds it there is less the checkpoint
than the bytes each commit adds (3-5 pages of 16 KiB: 640 commits a second write 50 MB of
WAL a second; with 4 KiB pages the 32 x 20/s run peaks at 27 MB). Letting each TRUNCATE
try wait 5 ms in SQLite's busy handler was tried and measured no better (48 MB against 43 MB
in the same 32 x 20/s pair of runs)."""

from __future__ import annotations

import fcntl
import os
import random
import sqlite3
import threading
import time
from contextlib import contextmanager
from pathlib import Path

from ..errors import ConfigError
from ..osthread import name_os_thread

EVERY = 1.0  # at most one PASSIVE checkpoint per second per process
SOFT = 4 << 20  # bytes of WAL before a checkpoint is worth its fsync
# A TRUNCATE holds the write lock while it copies what is left and fsyncs: every try that
# gets that lock holds all writers back for one fsync. A TRUNCATE that waited for readers (the
# busy handler) held it 20 ms per try, and 200 quick tries a round held 32 writers back for
# seconds (bench_load.py, 32 sessions: lag p99 7.5 s). So each try takes the locks only if
# they are free at once and gives them back at once if not, and a round is 3 tries at most,
# one round a second machine-wide (the turns below).
TRUNCATE_TRIES = 3


HOLD_WAIT = 2.0  # seconds a writer past the WAL limit waits for it to be cut back


def _try_lock(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False


def wal_limit() -> int:
    """The WAL size dh keeps under, in bytes (DH_WAL_LIMIT_MB, default 64)."""
    value = os.environ.get("DH_WAL_LIMIT_MB", "64")
    try:
        megabytes = float(value)
    except ValueError:
        megabytes = -1.0
    if megabytes < 8:
        raise ConfigError(f"bad value for DH_WAL_LIMIT_MB: {value!r} is not a number of megabytes"
                          " of at least 8", hint="unset it, or give megabytes, e.g. DH_WAL_LIMIT_MB=64")
    return int(megabytes * (1 << 20))


class Checkpointer:
    def __init__(self, db_path: Path, every: float = EVERY, soft: int = SOFT,
                 limit: int | None = None):
        self.db_path, self.every, self.soft = db_path, every, soft
        self.wal = f"{db_path}-wal"
        self.turn = Path(db_path).parent / "checkpoint.lock"
        self.limit = limit or wal_limit()
        self.truncate_at = self.limit // 4  # room for what commits add meanwhile
        # writers are held a quarter below the limit: 128 writers held at the limit itself
        # took the WAL to 80 MB (64 MB limit) with what they commit before they see it
        self.hold_at = self.limit * 3 // 4
        self.wake_at = soft  # WAL bytes that wake the thread (fold_here raises it)
        self.held = 0  # commits that waited for the WAL to be cut back (see hold_writer)
        self._hold_conn: sqlite3.Connection | None = None
        self.wanted = threading.Event()
        self.stopping = threading.Event()
        self.checkpoints = self.truncations = 0
        self.thread = threading.Thread(target=self._run, name="dh-checkpoint", daemon=True)

    def start(self) -> "Checkpointer":
        self.thread.start()
        return self

    def committed(self) -> None:
        """Called by the writer after a commit: wake the thread if the WAL passed SOFT; near
        the limit, hold this writer until the WAL is cut back (hold_writer)."""
        size = self._wal_size()
        if size > self.wake_at:
            self.wanted.set()
        if size > self.hold_at:
            self.hold_writer()

    def folds_in_writer(self) -> None:
        """For the log's one busy writer (the shared mirror), which calls fold_here between
        its transactions: the thread then wakes only past a quarter of the limit, for a
        TRUNCATE when readers kept fold_here from emptying the WAL."""
        self.wake_at = max(self.soft, self.truncate_at)

    def fold_here(self, conn: sqlite3.Connection) -> bool:
        """Fold the WAL in on the writer's own connection, between its transactions, once it
        passed SOFT; True if it did. Run here, the PASSIVE checkpoint has no commit after it:
        it folds in every frame, and the writer's next transaction restarts the WAL (its
        commit cuts the file back to SOFT). Run by the thread under a stream of commits, it
        never got that moment: the WAL ran up to the writers' hold (48 MB), and each hold
        stalled the writer 50 ms (32 x 200/s: 80 holds in 30 s, 4.4 s of the server's loop).
        A PASSIVE of SOFT bytes takes a few ms."""
        if self._wal_size() <= self.soft:
            return False
        self._run_pragma(conn, "PASSIVE")
        return True

    def hold_writer(self) -> None:
        """Back-pressure, in the writer's thread, outside any transaction: with many writers
        the checkpoint thread's tries rarely find the moment a TRUNCATE needs (no writer, no
        reader), and the WAL grew to 175-291 MB with 128 writers. Every writer near the limit
        queues here on the machine-wide turn instead of writing on; the one whose turn it is
        folds the WAL in and empties it, waiting up to HOLD_WAIT s for the others to finish
        the commit they are in (they then queue too). A reader that keeps an old snapshot
        longer than that (a long `dh log` read) wins: the writer gives up and writes on."""
        self.held += 1
        deadline = time.monotonic() + HOLD_WAIT
        try:
            fd = os.open(self.turn, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError:
            return
        try:
            while not _try_lock(fd):
                if time.monotonic() > deadline:
                    return
                time.sleep(0.002)
            if self._wal_size() > self.hold_at:  # else another writer has just cut it back
                self._hold_connection().execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
                self.truncations += 1
        except sqlite3.Error:
            pass  # disk full, a reader that stays: the WAL keeps its frames, readers see them
        finally:
            os.close(fd)

    def _hold_connection(self) -> sqlite3.Connection:
        if self._hold_conn is None:
            self._hold_conn = sqlite3.connect(self.db_path, timeout=HOLD_WAIT, check_same_thread=False)
            self._hold_conn.execute(f"PRAGMA journal_size_limit={self.soft}")
        return self._hold_conn

    def stop(self) -> None:
        """Ask the thread to end, without waiting: a checkpoint under way finishes on its own
        (or is cut short by the process exiting, which SQLite survives), and the relaunch
        after a crash need not wait for its fsync."""
        self.stopping.set()
        self.wanted.set()
        if self._hold_conn is not None:  # the writer's thread is done with it by now
            self._hold_conn.close()
            self._hold_conn = None

    def _wal_size(self) -> int:
        try:
            return os.stat(self.wal).st_size
        except OSError:
            return 0

    def _run(self) -> None:
        name_os_thread("dh-checkpoint")
        conn = None
        try:
            while True:
                self.wanted.wait()
                if self.stopping.is_set():
                    return
                self.wanted.clear()
                conn = conn or self._connect()
                self._take_turn(conn)
                self.stopping.wait(self.every)
        finally:
            if conn is not None:
                conn.close()

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.db_path, timeout=0, check_same_thread=False)
        conn.execute(f"PRAGMA journal_size_limit={self.soft}")
        return conn

    def _take_turn(self, conn: sqlite3.Connection) -> None:
        """Checkpoint unless another dh on this machine is checkpointing the log right now."""
        try:
            fd = os.open(self.turn, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError:
            return self._checkpoint(conn)  # a folder dh cannot write: SQLite's locks still hold
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            self._checkpoint(conn)
        except BlockingIOError:
            pass
        finally:
            os.close(fd)  # also lets the lock go

    def _checkpoint(self, conn: sqlite3.Connection) -> None:
        if self._wal_size() > self.truncate_at:
            self._truncate(conn)
        else:
            self._run_pragma(conn, "PASSIVE")

    def _truncate(self, conn: sqlite3.Connection) -> None:
        """Fold in every frame and empty the WAL; retried often (like the writers ask for
        their lock) so that many busy writers cannot starve it, and never waiting with the
        write lock held. A PASSIVE checkpoint first folds in (without holding writers back)
        all but what arrives meanwhile, so the TRUNCATE has only that left to copy."""
        self._run_pragma(conn, "PASSIVE")
        for _ in range(TRUNCATE_TRIES):
            if self._run_pragma(conn, "TRUNCATE") or self.stopping.is_set():
                self.truncations += 1
                return
            time.sleep(random.random() * 0.004)

    def _run_pragma(self, conn: sqlite3.Connection, mode: str) -> bool:
        """True when the checkpoint ran to the end."""
        try:
            busy = conn.execute(f"PRAGMA wal_checkpoint({mode})").fetchone()[0]
            self.checkpoints += 1
            return not busy
        except sqlite3.Error:
            # Disk full or a busy checkpoint lock: the frames stay in the WAL, where readers
            # see them, and the next checkpoint folds them in.
            return False


@contextmanager
def fewer_checkpoints(world):
    """For a bulk import on `world`'s connection: SQLite's own checkpoints at three quarters of
    the WAL limit instead of every 1000 pages (16 MB). Each of them fsyncs the log inside a
    commit; a 60 MB import spent 4.5-5.4 s with the default and 2.3-2.9 s with this (raw
    insert baseline 0.7-1.9 s, same runs). The WAL stays under the limit: one batch (8 MB at
    most) is committed past the threshold before the checkpoint folds it in."""
    conn = getattr(world, "conn", None)
    if not isinstance(conn, sqlite3.Connection):  # another kind of world: nothing to tune
        yield
        return
    before = conn.execute("PRAGMA wal_autocheckpoint").fetchone()[0]
    page = conn.execute("PRAGMA page_size").fetchone()[0]
    conn.execute(f"PRAGMA wal_autocheckpoint={wal_limit() * 3 // 4 // page}")
    try:
        yield
    finally:
        conn.execute(f"PRAGMA wal_autocheckpoint={before}")
