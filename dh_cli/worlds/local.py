"""The local world: one SQLite file (WAL, 0600) shared by every dh process on the machine.

Writes go through `_write()` (BEGIN IMMEDIATE, so concurrent writers queue on the busy timeout
instead of failing on a stale snapshot). A batch of records and the source's new offset are
committed together, so a killed dh replays at most one batch and the replay is a no-op."""

from __future__ import annotations

import fcntl
import json
import math
import os
import random
import sqlite3
import time
import zlib
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import fields
from pathlib import Path
from typing import Iterator

import lz4.block

from .. import paths
from ..errors import AmbiguousSession, ConfigError, LogDbError, SessionNotFound
from ..models import Event, Record, Session, Source
from ..util import new_session_id, now_iso
from . import migrations
from .local_places import LocalPlaces, check_ref  # noqa: F401 (check_ref: used by postgres.py)

RECORD_COLUMNS = [f.name for f in fields(Record)]
SOURCE_COLUMNS = [f.name for f in fields(Source)]
SESSION_COLUMNS = [f.name for f in fields(Session)]
_INSERT_RECORD = "INSERT OR IGNORE INTO records ({}) VALUES ({})".format(
    ", ".join(RECORD_COLUMNS), ", ".join("?" * len(RECORD_COLUMNS))
)


def _decide_place(conn, session_id: str, home: str | None, cwd: str | None) -> None:
    if home:
        conn.execute("INSERT OR REPLACE INTO places (session_id, home, cwd, decided_at)"
                     " VALUES (?, ?, ?, ?)", [session_id, home, cwd, now_iso()])


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


# 16 KiB pages pack kilobyte-sized JSON lines with little waste (the log stays near native
# size), while a live commit of a few records still writes only a few small pages to the WAL:
# with 64 KiB pages the log was no smaller, but every commit wrote four times the bytes and
# the mirror's p99 lag at 500 records/s was 50 ms instead of 2 ms (bench_supervisor.py lag).
PAGE_SIZE = 16384
COMPRESS_MIN = 1024  # lines shorter than this are stored as they are
# codec 0/None: stored as written; 1: raw deflate, 4 KiB window (logs written before m006);
# 2: LZ4 block with its size in front (m006 on). LZ4 packs JSON lines a little less tightly
# (the 100 MB bench log: 0.71x -> 0.76x of native) but costs a seventh of deflate's time to
# compress and half to inflate, which took import throughput past half a raw insert.
DEFLATE, LZ4 = 1, 2
_WBITS = -12


def encode_raw(raw: bytes) -> tuple[bytes, int | None]:
    if len(raw) < COMPRESS_MIN:
        return raw, None
    packed = lz4.block.compress(raw)
    return (packed, LZ4) if len(packed) < len(raw) else (raw, None)


READ_ROWS = 1024  # rows per rebuild batch: writev takes at most IOV_MAX (1024) parts
DECODE_THREADS = min(4, os.cpu_count() or 1)


def _decode_rows(rows: list[tuple]) -> list[bytes]:
    return [decode_raw(raw, codec) if codec else raw for raw, codec in rows]


def decode_raw(data: bytes, codec: int | None) -> bytes:
    """A record's native bytes. An unknown codec or damaged compressed bytes (a row from a
    world) is one LogDbError, never bytes handed back as if they were native."""
    try:
        if codec == LZ4:
            return lz4.block.decompress(data)
        if codec == DEFLATE:
            return zlib.decompress(data, _WBITS)
    except (lz4.block.LZ4BlockError, zlib.error, ValueError) as exc:
        raise LogDbError(f"a record's compressed bytes are damaged (codec {codec}: {exc})",
                         hint="pull the session again from a good copy, or `dh log rm` it") from None
    if codec not in (None, 0):
        raise LogDbError(f"a record is stored with codec {codec!r}, which this dh does not know",
                         hint="upgrade dh, or `dh log rm` the session")
    return bytes(data)


class LocalWorld(LocalPlaces):
    """The SQLite log. `path=None` means `$DH_HOME/dh.db`."""

    name = "local"

    def __init__(self, path: Path | str | None = None, migrate: bool = True):
        self.path = Path(path) if path else paths.db_path()
        try:
            self._open(migrate)
        except sqlite3.DatabaseError as exc:
            raise db_error(exc, self.path) from None
        except OSError as exc:  # DH_HOME is a file, or a folder dh may not write
            why = (f"{self.path.parent} is not a folder"
                   if isinstance(exc, (FileExistsError, NotADirectoryError)) else exc.strerror or exc)
            raise LogDbError(f"cannot open the log {self.path} ({why})",
                             hint="check DH_HOME and the permissions of its folder") from None

    def _open(self, migrate: bool) -> None:
        new = _create_private(self.path)
        info = os.stat(self.path)
        self._identity = (info.st_dev, info.st_ino)
        self.conn = sqlite3.connect(self.path, timeout=_busy_timeout(), isolation_level=None,
                                    check_same_thread=False)
        if new:
            self.conn.execute(f"PRAGMA page_size={PAGE_SIZE}")
        self.conn.execute("PRAGMA foreign_keys=ON")
        if os.access(self.path, os.W_OK):
            self.conn.execute("PRAGMA journal_mode=WAL")
            self.conn.execute("PRAGMA synchronous=NORMAL")
        self._check_not_newer()
        if migrate and migrations.pending(self.conn):
            with _migration_lock(self.path):  # one process migrates; the others then find none
                if migrations.pending(self.conn):
                    migrations.migration_set().apply(self.db)

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
        except BaseException:
            # SQLite may have rolled back already (disk full, I/O error): then there is
            # nothing to undo, and the first error is the one to report
            if self.conn.in_transaction:
                try:
                    self.conn.execute("ROLLBACK")
                except sqlite3.Error:
                    pass
            raise

    def _insert(self, table: str, values: dict, conflict: str = "") -> None:
        with self._write() as conn:
            conn.execute(f"INSERT {conflict} INTO {table} ({', '.join(map(_column, values))})"
                         f" VALUES ({', '.join('?' * len(values))})", list(values.values()))

    # sessions -----------------------------------------------------------------------------
    def create_session(self, harness: str, **values) -> Session:
        with self._write():
            return self._new_session(harness, **values)

    def session_for_native(self, harness: str, native_id: str, home: str, path: str | None,
                           **values) -> Session:
        """The session of (harness, native id, home), or the one mirroring `path`, else a
        new one: looked up and created in one write transaction, so parallel imports of
        one native session make one session (issue 14: three imports made 46-49 of 40)."""
        with self._write():
            found = self.find_by_native(harness, native_id, home=home)
            found = found or (self.find_by_path(harness, path) if path else None)
            if found is None:
                found = self._new_session(harness, harness_session_id=native_id, home=home,
                                          native_path=path, **values)
        return found

    def _new_session(self, harness: str, **values) -> Session:
        now = now_iso()
        session = Session(id=values.pop("id", None) or new_session_id(), harness=harness,
                          created_at=now, updated_at=now, **values)
        row = session.to_dict()
        self.conn.execute(f"INSERT INTO sessions ({', '.join(map(_column, row))})"
                          f" VALUES ({', '.join('?' * len(row))})", list(row.values()))
        _decide_place(self.conn, session.id, session.home, session.cwd)
        return session

    def update_session(self, session_id: str, **values) -> None:
        """Only this machine calls it (a pull goes through put_session): a home or cwd given
        here is where the session lives on this machine (see confine.py)."""
        values["updated_at"] = now_iso()
        with self._write() as conn:
            conn.execute(f"UPDATE sessions SET {', '.join(f'{_column(k)} = ?' for k in values)}"
                         " WHERE id = ?", [*values.values(), session_id])
            if "home" in values or "cwd" in values:
                row = conn.execute("SELECT home, cwd FROM sessions WHERE id = ?", [session_id]).fetchone()
                if row:
                    _decide_place(conn, session_id, *row)

    def get_session(self, session_id: str) -> Session:
        row = self.conn.execute(
            f"SELECT {', '.join(SESSION_COLUMNS)} FROM sessions WHERE id = ?", [session_id]
        ).fetchone()
        if row is None:
            raise SessionNotFound(f"no session {session_id!r} in the log")
        return Session(*row)

    def find_session(self, ref: str) -> Session:
        """A dh id, a unique prefix of one, or the harness's own session id."""
        check_ref(ref)
        rows = self.conn.execute(
            f"SELECT {', '.join(SESSION_COLUMNS)} FROM sessions WHERE id = ? OR"
            " harness_session_id = ? OR id LIKE ? ESCAPE '\\' OR harness_session_id LIKE ? ESCAPE '\\'",
            [ref, ref, _like_prefix(ref), _like_prefix(ref)],
        ).fetchall()
        exact = [r for r in rows if ref in (r[0], r[2])]
        matches = exact or rows
        if not matches:
            raise SessionNotFound(f"no session matches {ref!r}", hint="see `dh log list`")
        if len(matches) > 1:
            ids = ", ".join(r[0] for r in matches[:5])
            raise AmbiguousSession(f"{ref!r} matches {len(matches)} sessions: {ids}",
                                   hint="give more characters of the id")
        return Session(*matches[0])

    def find_by_native(self, harness: str, native_id: str, home: str | None = None) -> Session | None:
        """By the harness's own id; with `home`, only a session that lives in that harness
        home on this machine (an import's identity is harness, native id and home)."""
        where, args = "", []
        if home is not None:
            where = " AND id IN (SELECT session_id FROM places WHERE home IN (?, ?))"
            args = [home, os.path.realpath(home)]
        row = self.conn.execute(
            f"SELECT {', '.join(SESSION_COLUMNS)} FROM sessions WHERE harness = ? AND harness_session_id = ?"
            f"{where} ORDER BY created_at LIMIT 1", [harness, native_id, *args]).fetchone()
        return Session(*row) if row else None

    def list_sessions(self, harness: str | None = None) -> list[dict]:
        where, args = ("WHERE s.harness = ?", [harness]) if harness else ("", [])
        sql = f"""
            SELECT s.*, (SELECT COUNT(*) FROM records r JOIN sources o ON o.id = r.source_id
                         WHERE o.session_id = s.id) AS records,
                   (SELECT MAX(r.ts) FROM records r JOIN sources o ON o.id = r.source_id
                         WHERE o.session_id = s.id) AS last_record_at
            FROM sessions s {where} ORDER BY s.created_at, s.id"""
        cursor = self.conn.execute(sql, args)
        names = [d[0] for d in cursor.description]
        out = [dict(zip(names, row)) for row in cursor]
        for item in out:
            item["tokens"] = self.token_totals(item["id"])
        return out

    # sources ------------------------------------------------------------------------------
    def add_source(self, session_id: str, kind: str, relpath: str, path: str | None) -> Source:
        existing = self.get_source(session_id, relpath)
        if existing:
            return existing
        values = {"session_id": session_id, "kind": kind, "relpath": relpath, "path": path,
                  "updated_at": now_iso()}
        with self._write() as conn:
            conn.execute(f"INSERT OR IGNORE INTO sources ({', '.join(map(_column, values))})"
                         f" VALUES ({', '.join('?' * len(values))})", list(values.values()))
            if path:  # the mirror found this file here: the one path of it dh trusts as read
                conn.execute("INSERT OR REPLACE INTO mirrored_paths (source_id, path) SELECT id, ?"
                             " FROM sources WHERE session_id = ? AND relpath = ?",
                             [path, session_id, relpath])
        return self.get_source(session_id, relpath)

    def get_source(self, session_id: str, relpath: str) -> Source | None:
        row = self.conn.execute(
            f"SELECT {', '.join(SOURCE_COLUMNS)} FROM sources WHERE session_id = ? AND relpath = ?",
            [session_id, relpath],
        ).fetchone()
        return Source(*row) if row else None

    def sources(self, session_id: str) -> list[Source]:
        rows = self.conn.execute(
            f"SELECT {', '.join(SOURCE_COLUMNS)} FROM sources WHERE session_id = ? ORDER BY rowid",
            [session_id],
        ).fetchall()
        return [Source(*row) for row in rows]

    def commit(self, source: Source, records: list[Record], events: list[tuple] = ()) -> int:
        """Append records, save the source's new position and journal what happened to it
        (`events`: (type, details) pairs), all in one transaction."""
        source.updated_at = now_iso()
        with self._write() as conn:
            before = conn.total_changes
            conn.executemany(_INSERT_RECORD, [record_row(r) for r in records])
            added = conn.total_changes - before
            for type_, details in events:
                self._insert_event(conn, source.session_id, type_, details, None, "info")
            conn.execute(
                "UPDATE sources SET {} WHERE id = ?".format(
                    ", ".join(f"{c} = ?" for c in SOURCE_COLUMNS[1:])),
                [getattr(source, c) for c in SOURCE_COLUMNS[1:]] + [source.id],
            )
        return added

    # records ------------------------------------------------------------------------------
    def records(self, session_id: str, source_id: str | None = None,
                generation: int | None = None, from_offset: int = 0) -> Iterator[Record]:
        """Records of a session in native order: by source, generation, then byte offset."""
        clauses, args = ["o.session_id = ?", "r.offset >= ?"], [session_id, from_offset]
        if source_id is not None:
            clauses.append("r.source_id = ?")
            args.append(source_id)
        if generation is not None:
            clauses.append("r.generation = ?")
            args.append(generation)
        cursor = self.conn.execute(
            f"SELECT {', '.join('r.' + c for c in RECORD_COLUMNS)} FROM records r"
            f" JOIN sources o ON o.id = r.source_id WHERE {' AND '.join(clauses)}"
            " ORDER BY o.rowid, r.generation, r.offset", args)
        for row in cursor:
            record = Record(*row)
            record.raw = decode_raw(record.raw, record.codec)
            yield record

    def raw_lines(self, source_id: int, generation: int) -> Iterator[bytes]:
        """Just the native bytes of one generation, in order."""
        for batch in self.raw_batches(source_id, generation):
            yield from batch

    def raw_batches(self, source_id: int, generation: int) -> Iterator[list[bytes]]:
        """The native bytes of one generation in order, as batches of at most IOV_MAX lines:
        the fast path for rebuilds. Compressed lines are decompressed on helper threads (LZ4
        and zlib let go of the GIL) while this one fetches the next rows; a session of one
        batch needs none."""
        cursor = self.conn.execute(
            "SELECT raw, codec FROM records WHERE source_id = ? AND generation = ? ORDER BY offset",
            [source_id, generation])
        first, second = cursor.fetchmany(READ_ROWS), cursor.fetchmany(READ_ROWS)
        if not second:
            if first:
                yield _decode_rows(first)
            return
        with ThreadPoolExecutor(DECODE_THREADS) as pool:
            pending = deque(pool.submit(_decode_rows, rows) for rows in (first, second))
            while rows := cursor.fetchmany(READ_ROWS):
                pending.append(pool.submit(_decode_rows, rows))
                if len(pending) > 2 * DECODE_THREADS:
                    yield pending.popleft().result()
            while pending:
                yield pending.popleft().result()

    def last_offset_of_kind(self, source_id: int, generation: int, kind: str) -> int:
        row = self.conn.execute(
            "SELECT MAX(offset) FROM records WHERE source_id = ? AND generation = ? AND kind = ?",
            [source_id, generation, kind]).fetchone()
        return row[0] or 0

    def count_kind(self, source_id: int, kind: str) -> int:
        return self.conn.execute(
            "SELECT COUNT(*) FROM records WHERE source_id = ? AND kind = ? AND generation ="
            " (SELECT MAX(generation) FROM records WHERE source_id = ?)",
            [source_id, kind, source_id]).fetchone()[0]

    def record_count(self, session_id: str) -> int:
        return self.conn.execute(
            "SELECT COUNT(*) FROM records r JOIN sources o ON o.id = r.source_id"
            " WHERE o.session_id = ?", [session_id]).fetchone()[0]

    def last_msg_id(self, source_id: int) -> str | None:
        """The model message the source's last logged call belongs to, unless a user prompt
        came after it (the tailer's usage de-duplication resumes from here)."""
        row = self.conn.execute(
            "SELECT msg_id FROM records WHERE source_id = ? AND (msg_id IS NOT NULL OR kind = 'user')"
            " ORDER BY generation DESC, offset DESC LIMIT 1", [source_id]).fetchone()
        return row[0] if row else None

    def latest_generation(self, source_id: str) -> int | None:
        return self.conn.execute("SELECT MAX(generation) FROM records WHERE source_id = ?",
                                 [source_id]).fetchone()[0]

    def source_stats(self, source_id: str) -> tuple[int, int]:
        """(number of generations, number of records) logged for a source."""
        return self.conn.execute(
            "SELECT COUNT(DISTINCT generation), COUNT(*) FROM records WHERE source_id = ?",
            [source_id]).fetchone()

    def token_totals(self, session_id: str) -> dict:
        """Token usage summed once per model call. JSONL rows carry it once already (see the
        tailer); an OpenCode message row is logged at each update, and its last version wins."""
        row = self.conn.execute(
            """SELECT COALESCE(SUM(tokens_in),0), COALESCE(SUM(tokens_out),0),
                      COALESCE(SUM(tokens_cache_read),0), COALESCE(SUM(tokens_cache_write),0),
                      COUNT(*)
               FROM (SELECT r.tokens_in, r.tokens_out, r.tokens_cache_read, r.tokens_cache_write,
                            ROW_NUMBER() OVER (PARTITION BY o.id, r.generation,
                                   CASE WHEN o.kind = 'opencode' THEN r.msg_id ELSE r.id END
                                               ORDER BY r.offset DESC) AS rn
                     FROM records r JOIN sources o ON o.id = r.source_id
                     WHERE o.session_id = ? AND r.tokens_in IS NOT NULL
                       AND r.generation = (SELECT MAX(generation) FROM records x WHERE x.source_id = o.id))
               WHERE rn = 1""", [session_id]).fetchone()
        return {"input": row[0], "output": row[1], "cache_read": row[2], "cache_write": row[3],
                "model_calls": row[4]}

    def lock_session(self, session_id: str):
        """An exclusive, non-blocking lock on the session (raises SessionLocked)."""
        from .locks import SessionLock

        return SessionLock(self.path.parent, session_id).acquire()

    # events -------------------------------------------------------------------------------
    def add_event(self, session_id: str, type: str, details: dict | None = None,
                  attempt: int | None = None, phase: str | None = None) -> Event:
        with self._write() as conn:
            return self._insert_event(conn, session_id, type, details, attempt, phase)

    @staticmethod
    def _insert_event(conn, session_id, type_, details, attempt, phase) -> Event:
        seq = conn.execute("SELECT COALESCE(MAX(seq), 0) + 1 FROM events WHERE session_id = ?",
                           [session_id]).fetchone()[0]
        event = Event(session_id, seq, now_iso(), attempt, type_, phase, details or {})
        conn.execute("INSERT INTO events VALUES (?, ?, ?, ?, ?, ?, ?)",
                     [session_id, seq, event.at, attempt, type_, phase,
                      json.dumps(event.details, sort_keys=True)])
        return event

    def events(self, session_id: str, after_seq: int = 0) -> list[Event]:
        rows = self.conn.execute(
            "SELECT session_id, seq, at, attempt, type, phase, details FROM events"
            " WHERE session_id = ? AND seq > ? ORDER BY seq", [session_id, after_seq]).fetchall()
        return [Event(*row[:6], json.loads(row[6] or "{}")) for row in rows]

    # World interface (base.py): natural keys, stored rows, high-water marks ---------------
    def put_session(self, session: Session) -> str | None:
        """Insert, or update when this copy is newer (updated_at); "added", "updated" or None."""
        values = [getattr(session, c) for c in SESSION_COLUMNS]
        with self._write() as conn:
            if conn.execute(f"INSERT OR IGNORE INTO sessions ({', '.join(SESSION_COLUMNS)})"
                            f" VALUES ({', '.join('?' * len(values))})", values).rowcount:
                return "added"
            changed = conn.execute(
                f"UPDATE sessions SET {', '.join(f'{c} = ?' for c in SESSION_COLUMNS[1:])}"
                " WHERE id = ? AND updated_at < ?", values[1:] + [session.id, session.updated_at])
            return "updated" if changed.rowcount else None

    def sessions(self, harness: str | None = None) -> list[Session]:
        rows = self.conn.execute(
            f"SELECT {', '.join(SESSION_COLUMNS)} FROM sessions WHERE ? IS NULL OR harness = ?"
            " ORDER BY created_at, id", [harness, harness]).fetchall()
        return [Session(*row) for row in rows]

    def put_source(self, source: Source, update: bool = False) -> Source:
        """Insert by (session id, relpath), keeping this log's own id; `update` also copies the
        source's progress (generation, offset, hashes, status)."""
        names = SOURCE_COLUMNS[1:]
        progress = [c for c in names if c not in ("session_id", "relpath")]
        with self._write() as conn:
            conn.execute(f"INSERT OR IGNORE INTO sources ({', '.join(names)})"
                         f" VALUES ({', '.join('?' * len(names))})", [getattr(source, c) for c in names])
            if update:
                conn.execute(f"UPDATE sources SET {', '.join(f'{c} = ?' for c in progress)}"
                             " WHERE session_id = ? AND relpath = ?",
                             [getattr(source, c) for c in progress] + [source.session_id, source.relpath])
        return self.get_source(source.session_id, source.relpath)

    def append_rows(self, rows: list[tuple]) -> int:
        """Stored rows (RECORD_COLUMNS order, raw as stored, source_id this log's), in one
        transaction; rows already present are skipped. Also the tests' bulk-insert helper."""
        with self._write() as conn:
            before = conn.total_changes
            conn.executemany(_INSERT_RECORD, rows)
            return conn.total_changes - before

    def append_records(self, source: Source, records: list[Record]) -> int:
        from .base import stored_rows

        return self.append_rows(stored_rows(source, records))

    def read_rows(self, source: Source, after=None, upto=None, as_source_id: int | None = None,
                  chunk: int = 50_000) -> Iterator[list[tuple]]:
        """Stored rows of a source in order, with `as_source_id` in the source_id column (the
        id the receiving world gave the source), so they can be appended there as they are."""
        clause, args = _position_range(after, upto)
        cursor = self.conn.execute(
            f"SELECT ?, {', '.join(RECORD_COLUMNS[1:])} FROM records WHERE source_id = ?{clause}"
            " ORDER BY generation, offset",
            [source.id if as_source_id is None else as_source_id, source.id] + args)
        while batch := cursor.fetchmany(chunk):
            yield batch

    def read_records(self, session_id: str, relpath: str, after=None,
                     limit: int | None = None) -> list[Record]:
        source = self.get_source(session_id, relpath)
        if source is None:
            return []
        clause, args = _position_range(after, None)
        rows = self.conn.execute(
            f"SELECT {', '.join(RECORD_COLUMNS)} FROM records WHERE source_id = ?{clause}"
            " ORDER BY generation, offset LIMIT ?", [source.id] + args + [-1 if limit is None else limit])
        return [Record(*row[:3], decode_raw(row[3], row[4]), *row[4:]) for row in rows]

    def count_upto(self, source: Source, last) -> int:
        return self.conn.execute("SELECT COUNT(*) FROM records WHERE source_id = ?"
                                 " AND (generation, offset) <= (?, ?)", [source.id, *last]).fetchone()[0]

    def append_events(self, events: list[Event]) -> int:
        """Events from another world, kept with their own seq; present ones are skipped."""
        rows = [(e.session_id, e.seq, e.at, e.attempt, e.type, e.phase,
                 json.dumps(e.details, sort_keys=True)) for e in events]
        with self._write() as conn:
            before = conn.total_changes
            conn.executemany("INSERT OR IGNORE INTO events VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
            return conn.total_changes - before

    def marks(self, session_id: str | None = None) -> dict:
        """High-water marks of every session (or one): per source, the record count and the
        last (generation, offset); and the last event seq."""
        from .base import group_marks

        return group_marks(self.conn.execute("""
            SELECT s.id, s.harness, s.updated_at, o.relpath,
                   (SELECT COUNT(*) FROM records r WHERE r.source_id = o.id),
                   (SELECT generation FROM records r WHERE r.source_id = o.id
                    ORDER BY generation DESC, offset DESC LIMIT 1),
                   (SELECT offset FROM records r WHERE r.source_id = o.id
                    ORDER BY generation DESC, offset DESC LIMIT 1),
                   (SELECT MAX(seq) FROM events e WHERE e.session_id = s.id)
            FROM sessions s LEFT JOIN sources o ON o.session_id = s.id
            WHERE ? IS NULL OR s.id = ? ORDER BY s.created_at, s.id, o.rowid""",
            [session_id, session_id]))

    def high_water(self, session_id: str) -> dict:
        found = self.marks(session_id).get(session_id)
        return found.sources if found else {}


def record_row(record: Record | tuple) -> tuple:
    """A record as the row tuple the log stores, its raw bytes encoded. The tailer passes
    ready tuples (built without a dataclass: this is the hot path of every import), already
    encoded when their codec slot is set."""
    row = record if isinstance(record, tuple) else tuple(getattr(record, c) for c in RECORD_COLUMNS)
    if row[4] is not None:
        return row
    raw, codec = encode_raw(row[3])
    return row[:3] + (raw, codec) + row[5:]


def encode_rows(rows: list[tuple]) -> list[tuple]:
    """Encode a batch of row tuples; codec 0 marks a row already stored as it is."""
    out = []
    for row in rows:
        raw, codec = encode_raw(row[3])
        out.append(row[:3] + (raw, codec or 0) + row[5:])
    return out


def _column(name: str) -> str:
    """A column name from dh's own dataclasses, quoted (`offset` is an SQL keyword)."""
    if not name.isidentifier():
        raise ValueError(f"not a column name: {name!r}")
    return f'"{name}"'


def _like_prefix(ref: str) -> str:
    escaped = ref.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return escaped + "%"


def db_error(exc: sqlite3.Error, path: Path) -> LogDbError:
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
        return LogDbError(f"cannot write the log {path} ({text})",
                          hint="free some disk space; what is already logged is kept")
    return LogDbError(f"log database error: {text} ({path})")


def _position_range(after, upto) -> tuple[str, list]:
    """SQL for positions after `after` and up to `upto` (both (generation, offset) or None)."""
    clause, args = "", []
    if after is not None:
        clause += " AND (generation, offset) > (?, ?)"
        args += list(after)
    if upto is not None:
        clause += " AND (generation, offset) <= (?, ?)"
        args += list(upto)
    return clause, args
