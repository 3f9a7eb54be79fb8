"""The local log's connection: opening the SQLite file (0600, WAL, 16 KiB pages), migrating it
under a lock, and the one write transaction every change goes through.

Writes go through `_write()` (BEGIN IMMEDIATE, so concurrent writers queue on the busy timeout
instead of failing on a stale snapshot). A constraint the log refuses (a UNIQUE key taken) is
raised as LogConflict, a dh error, so no caller needs to know the log is SQLite."""

from __future__ import annotations

import fcntl
import math
import os
import random
import sqlite3
import time
from contextlib import contextmanager
from pathlib import Path

from .. import paths
from ..pricing import register_price
from ..errors import ConfigError, LogConflict, LogDbError
from . import checkpoint, migrations, wal_file
from .prices import reprice_if_changed
from .rows import column

def _busy_timeout() -> float:
    value = os.environ.get("DH_DB_TIMEOUT", "30")
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    if not math.isfinite(seconds) or seconds < 0:  # nan, inf, -1: no wait anyone can mean
        raise ConfigError(f"bad value for DH_DB_TIMEOUT: {value!r} is not a number of seconds",
                          hint="unset it, or give seconds, e.g. DH_DB_TIMEOUT=30")
    return seconds


@contextmanager
def _migration_lock(db_path: Path):
    """An exclusive lock beside the log while its schema is migrated: two dh processes
    migrating one new log at once made one fail with `table ... already exists` (issue 14).
    Waits up to DH_DB_TIMEOUT like any other busy write."""
    folder = db_path.parent / "locks"
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(folder / "migrate.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        deadline = time.monotonic() + _busy_timeout()
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise LogDbError(f"the log {db_path} is being migrated by another dh",
                                     hint="try again, or raise DH_DB_TIMEOUT") from None
                time.sleep(0.02)
        yield
    finally:
        os.close(fd)


def _create_private(path: Path) -> bool:
    """Create the file 0600 (and its folder 0700) before SQLite opens it; True if new."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    if path.exists():
        return False
    os.close(os.open(path, os.O_WRONLY | os.O_CREAT, 0o600))
    return True


# A live commit rewrites a few pages whole in the WAL: for each record the leaves of its
# three indexes, wherever its session's entries sit. So the page size is the cost of a live
# record: with 64 KiB pages the mirror's p99 lag at 500 records/s was 50 ms instead of 2 ms
# (bench_supervisor.py lag), and the shared mirror at 32 sessions x 20 records/s costs 134-147
# us a record with 4 KiB pages against 151-166 with 16 KiB (bench_load.py, two pairs of runs).
# What 4 KiB costs: the log of a 105 MB Claude Code transcript is 0.91x its size, not 0.82x;
# the import and the rebuild (0.18 s against 0.17 s) took the same time with either page size
# (bench_import.py, same runs). A log keeps the page size it was made with.
PAGE_SIZE = 4096


FULL_BELOW = 1024 * 1024  # free bytes under which the log's disk counts as full


def disk_room(path: Path) -> tuple[int | None, int]:
    """(free bytes on the disk holding the log, or None when unknown; bytes its WAL holds)."""
    try:
        stat = os.statvfs(Path(path).parent)
        free = stat.f_bavail * stat.f_frsize
    except OSError:
        free = None
    try:
        wal = os.path.getsize(f"{path}-wal")
    except OSError:
        wal = 0
    return free, wal


def full_disk(path: Path) -> str | None:
    """One line on a full disk under the log (None: it is not full)."""
    free, wal = disk_room(path)
    if free is None or free >= FULL_BELOW:
        return None
    return (f"the disk holding the log {path} is full ({free:,} bytes free; the log's WAL "
            f"holds {wal:,} bytes)")


def db_error(exc: sqlite3.Error, path: Path) -> LogDbError:
    """The dh error an SQLite error of the log at `path` is reported as."""
    text = str(exc)
    if "locked" in text or "busy" in text:
        return LogDbError(f"the log {path} is locked by another process",
                          hint="wait for the other dh to finish, or raise DH_DB_TIMEOUT")
    if "not a database" in text or "malformed" in text or "corrupt" in text:
        return LogDbError(f"the log {path} is corrupt ({text})",
                          hint="move it aside; `dh import` can rebuild the log from native files")
    if "readonly" in text or "read-only" in text or "unable to open" in text:
        return LogDbError(f"cannot write the log {path} ({text})",
                          hint="check the file's permissions and the free disk space")
    if "full" in text or "disk I/O" in text:
        problem = full_disk(path)
        return LogDbError(f"{problem}: {text}" if problem else f"cannot write the log {path} ({text})",
                          hint="free some disk space; what is already logged is kept")
    return LogDbError(f"log database error: {text} ({path})")


class LocalConnection:
    """Mixed into LocalWorld: the connection (`conn`), its path and the write transaction."""

    def __init__(self, path: Path | str | None = None, migrate: bool = True, create: bool = True,
                 read_only: bool = False):
        """`create=False` for a connection opened while a run goes on (the mirror, the shared
        mirror, the snapshot thread): a log deleted meanwhile then stays deleted, where one
        of them made it anew and the run's end reported it "replaced" (seen once in the suite).
        `read_only` for views that must never write (`dh serve`): SQLite refuses any write."""
        self.path = Path(path) if path else paths.db_path()
        self._read_only = read_only
        try:
            self._open(migrate and not read_only, create and not read_only)
        except sqlite3.DatabaseError as exc:
            raise db_error(exc, self.path) from None
        except OSError as exc:  # DH_HOME is a file, or a folder dh may not write
            why = (f"{self.path.parent} is not a folder"
                   if isinstance(exc, (FileExistsError, NotADirectoryError)) else exc.strerror or exc)
            raise LogDbError(f"cannot open the log {self.path} ({why})",
                             hint="check DH_HOME and the permissions of its folder") from None

    def _open(self, migrate: bool, create: bool) -> None:
        new = _create_private(self.path) if create else False
        info = os.stat(self.path)
        self._identity = (info.st_dev, info.st_ino)
        mode = "ro" if self._read_only else "rw"
        where = self.path if create else f"{self.path.resolve().as_uri()}?mode={mode}"  # no new file
        self.conn = sqlite3.connect(where, timeout=_busy_timeout(), isolation_level=None,
                                    check_same_thread=False, uri=not create)
        if new:
            self.conn.execute(f"PRAGMA page_size={PAGE_SIZE}")
        self.conn.execute("PRAGMA foreign_keys=ON")
        register_price(self.conn)  # records.price_usd is filled as a record is written
        if os.access(self.path, os.W_OK) and not self._read_only:
            self.conn.execute("PRAGMA journal_mode=WAL")
            self.conn.execute("PRAGMA synchronous=NORMAL")
            # once a checkpoint has folded in the whole WAL, the next commit cuts the file
            # back to this size (worlds/checkpoint.py relies on it to tell the WAL's growth)
            self.conn.execute(f"PRAGMA journal_size_limit={checkpoint.SOFT}")
        self._check_not_newer()
        if migrate and migrations.pending(self.conn):
            with _migration_lock(self.path):  # one process migrates; the others then find none
                if migrations.pending(self.conn):
                    migrations.migration_set().apply(self.db)
        if migrate and os.access(self.path, os.W_OK):
            reprice_if_changed(self.conn)

    @property
    def db(self):
        """sqlite_utils' view of the connection, for migrations (imported on first use)."""
        if self._db is None:
            from sqlite_utils import Database

            self._db = Database(self.conn)
        return self._db

    _db = None

    def _check_not_newer(self) -> None:
        known = set(migrations.names())
        unknown = [name for name in migrations.applied(self.conn) if name not in known]
        if unknown:
            raise LogDbError(f"{self.path} was written by a newer dh (schema {unknown[-1]})",
                             hint="upgrade dh, or point DH_HOME at another folder")

    def close(self) -> None:
        self.conn.close()

    def schema_state(self) -> tuple[list[str], list[str]]:
        """(migrations applied, migrations pending) of this log, by name (`dh log schema`)."""
        return migrations.applied(self.conn), migrations.pending(self.conn)

    def be_patient(self, seconds: float, on_wait=None) -> None:
        """For a supervising dh: wait up to `seconds` for the write lock instead of failing
        after DH_DB_TIMEOUT, and ask for it often (every few ms, like the processes holding it
        do) rather than SQLite's 100 ms polls, which many busy writers can starve for good.
        on_wait() is called once when a write has waited longer than DH_DB_TIMEOUT."""
        self.patience, self.on_wait = seconds, on_wait
        self.conn.execute("PRAGMA busy_timeout = 20")

    patience = 0.0
    on_wait = None
    checkpointer = None

    def checkpoint_elsewhere(self, checkpointer) -> None:
        """Leave WAL checkpoints to `checkpointer` (see worlds/checkpoint.py), so no commit on
        this connection stalls on folding the WAL back into the database."""
        self.conn.execute("PRAGMA wal_autocheckpoint=0")
        self.checkpointer = checkpointer

    def _begin(self) -> None:
        if not self.patience:
            self.conn.execute("BEGIN IMMEDIATE")
            return
        started, told = time.monotonic(), False
        while True:
            try:
                self.conn.execute("BEGIN IMMEDIATE")
                return
            except sqlite3.OperationalError as exc:
                waited = time.monotonic() - started
                if ("locked" not in str(exc) and "busy" not in str(exc)) or waited > self.patience:
                    raise
                if not told and self.on_wait and waited > _busy_timeout():
                    told = True
                    self.on_wait()
            time.sleep(random.random() * 0.004)

    @contextmanager
    def _write(self):
        self._begin()
        try:
            yield self.conn
            self.conn.execute("COMMIT")
            if self.checkpointer is not None:
                self.checkpointer.committed()
        except BaseException as exc:
            self._roll_back()
            if isinstance(exc, sqlite3.OperationalError) and ("full" in str(exc) or "I/O" in str(exc)):
                self._give_back_wal()
            if isinstance(exc, sqlite3.IntegrityError):  # a key the log already holds
                raise LogConflict(f"the log refused the change ({exc})") from None
            raise

    def _give_back_wal(self) -> None:
        """After a write the full disk refused: the WAL's pages go back to the database file
        and the WAL is cut to nothing, so it does not keep the disk full for what comes next
        (a snapshot's failed write left a WAL that made the next `dh run` fail). When earlier
        commits are still in the WAL, folding them in needs room the refused frames hold:
        those are cut first (wal_file.py), under the write lock, then the fold is tried again."""
        if self._fold_wal():
            return
        try:
            self.conn.execute("BEGIN IMMEDIATE")
        except sqlite3.Error:
            return  # another writer holds the log: its own commit reuses the WAL
        try:
            cut = wal_file.cut_after_last_commit(f"{self.path}-wal")
        finally:
            self._roll_back()
        if cut:
            self._fold_wal()

    def _fold_wal(self) -> bool:
        """A TRUNCATE checkpoint; True when it left the WAL empty."""
        try:
            self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
            return os.path.getsize(f"{self.path}-wal") == 0
        except (sqlite3.Error, OSError):
            return False

    def _roll_back(self) -> None:
        # SQLite may have rolled back already (disk full, I/O error): then there is
        # nothing to undo, and the first error is the one to report
        if self.conn.in_transaction:
            try:
                self.conn.execute("ROLLBACK")
            except sqlite3.Error:
                pass

    def _insert(self, table: str, values: dict, conflict: str = "") -> None:
        with self._write() as conn:
            conn.execute(f"INSERT {conflict} INTO {table} ({', '.join(map(column, values))})"
                         f" VALUES ({', '.join('?' * len(values))})", list(values.values()))

