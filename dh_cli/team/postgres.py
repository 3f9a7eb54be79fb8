"""The PostgreSQL world: the same logical tables as the local log, in schema `dh`, shared by
every machine of a team. dh creates and migrates the schema itself (named migrations recorded
in `dh.migrations`, listed in postgres_schema.py; a shipped one is never edited, a change is a
new entry at the end).

Records keep their raw bytes exactly as the local log stores them (compressed when codec is set),
so push and pull move bytes without re-encoding. Bulk appends use COPY; a chunk that collides
with rows already there (a second pusher, a gap being filled) falls back to an insert that
skips what exists, so every append stays idempotent on the natural keys.

Every psycopg error leaves this module as a WorldError of one sentence, with the URL's password
masked (postgres_url.py): psycopg's own messages can quote the connection string."""

from __future__ import annotations

import json
import logging
import os
import socket
from contextlib import contextmanager
from dataclasses import replace
from typing import Iterator

import psycopg
from psycopg.adapt import PyFormat

from ..errors import SessionLocked, SessionNotFound, WorldError

# psycopg logs "error ignored terminating <Copy>" when a server dies mid-COPY; with no handler
# Python would print it to stderr beside dh's own one-line error, which already says it all.
logging.getLogger("psycopg").addHandler(logging.NullHandler())
from ..models import Event, Record, Session, Source
from ..worlds.base import CHUNK, Mark, Position, SessionMarks, group_marks
from ..worlds.local_places import check_ref
from .postgres_leases import PgLeases
from .world_rows import details_of
from .protocol import only_match
from .postgres_schema import MIGRATIONS, RECORD_TYPES  # noqa: F401 - re-exported
from .postgres_url import URL_VARIABLES, resolve_url, scrub, world_error  # noqa: F401 - re-exported
from ..worlds.rows import (RECORD_COLUMNS, SESSION_COLUMNS, SOURCE_COLUMNS, decode_raw, position_range,
                    stored_rows)

MIGRATION_LOCK = 0x64680001  # advisory lock key: one dh migrates at a time
PROGRESS_COLUMNS = [c for c in SOURCE_COLUMNS if c not in ("id", "session_id", "relpath")]


def cols(names: list[str], prefix: str = "") -> str:
    return ", ".join(f'{prefix}"{n}"' for n in names)


_RECORDS = cols(RECORD_COLUMNS)
_SESSIONS = cols(SESSION_COLUMNS)
_SOURCES = cols(SOURCE_COLUMNS)
_SET_PROGRESS = ", ".join(f'"{c}" = %s' for c in PROGRESS_COLUMNS)


def _range(after: Position | None, upto: Position | None) -> tuple[str, list]:
    """rows.position_range in PostgreSQL's spelling (%s placeholders, "offset" quoted)."""
    clause, args = position_range(after, upto)
    return clause.replace("?", "%s").replace("offset", '"offset"'), args


def _sanitize(rows: list[tuple]) -> list[tuple]:
    """PostgreSQL text cannot hold NUL: blank it in the extracted columns (raw keeps it)."""
    return [tuple(v.replace("\x00", "\ufffd") if isinstance(v, str) else v for v in row)
            for row in rows]


class PostgresWorld(PgLeases):
    name = "postgres"
    url: str
    shown: str  # the URL with its password masked
    url_variable = URL_VARIABLES[0]  # a child dh (the worker's) reads the URL from there
    resolve_url = staticmethod(resolve_url)

    def __init__(self, url: str | None = None, migrate: bool = True, connect_timeout: int = 10):
        self.url = resolve_url(url)
        self.shown = scrub(self.url, self.url)
        self.connect_timeout = connect_timeout
        self.conn = self._connect()
        if migrate:
            self.migrate()

    def _connect(self) -> psycopg.Connection:
        # Keepalives turn a server that vanished without a word into an error within a minute.
        try:
            conn = psycopg.connect(
                self.url, autocommit=True, connect_timeout=self.connect_timeout,
                application_name=f"dh@{socket.gethostname()}:{os.getpid()}"[:63],
                keepalives=1, keepalives_idle=20, keepalives_interval=5, keepalives_count=4)
        except psycopg.Error as exc:
            raise world_error(exc, self.url, connecting=True) from None
        # COPY's bytea columns would otherwise go through psycopg's pure-Python DB-API dumper
        # (it is the last one registered for bytea): the plain bytes dumper is C and faster.
        conn.adapters.register_dumper(bytes, psycopg.adapters.get_dumper(bytes, PyFormat.BINARY))
        return conn

    @contextmanager
    def _errors(self):
        try:
            yield
        except psycopg.Error as exc:
            raise world_error(exc, self.url) from None

    def close(self) -> None:
        self.conn.close()

    def _rows(self, query: str, args=()) -> list[tuple]:
        with self._errors():
            return self.conn.execute(query, args).fetchall()

    # schema -------------------------------------------------------------------------------
    def applied(self) -> list[str]:
        if self._rows("SELECT to_regclass('dh.migrations')")[0][0] is None:
            return []
        return [r[0] for r in self._rows("SELECT name FROM dh.migrations ORDER BY name")]

    def pending(self) -> list[str]:
        done = set(self.applied())
        return [name for name, _ in MIGRATIONS if name not in done]

    def migrate(self) -> None:
        if not self.pending():
            self._check_not_newer(self.applied())
            return
        with self._errors(), self.conn.transaction():
            self.conn.execute("SELECT pg_advisory_xact_lock(%s)", [MIGRATION_LOCK])
            self.conn.execute("CREATE SCHEMA IF NOT EXISTS dh")
            self.conn.execute("CREATE TABLE IF NOT EXISTS dh.migrations (name text PRIMARY KEY,"
                              " applied_at timestamptz NOT NULL DEFAULT now())")
            done = [r[0] for r in self.conn.execute("SELECT name FROM dh.migrations")]
            self._check_not_newer(done)
            for name, statements in MIGRATIONS:
                if name not in done:
                    self.conn.execute(statements)
                    self.conn.execute("INSERT INTO dh.migrations (name) VALUES (%s)", [name])

    def _check_not_newer(self, applied: list[str]) -> None:
        unknown = sorted(set(applied) - {name for name, _ in MIGRATIONS})
        if unknown:
            raise WorldError(f"the schema dh at {self.shown} was written by a newer dh ({unknown[-1]})",
                             hint="upgrade dh on this machine")

    # settings -----------------------------------------------------------------------------
    @property
    def masks_records(self) -> bool:
        """Whether a push masks credentials in the records it sends here (the default)."""
        rows = self._rows("SELECT value FROM dh.settings WHERE name = 'records'")
        return not rows or rows[0][0] != "raw"

    def set_records_mode(self, mode: str) -> None:
        self._rows("INSERT INTO dh.settings VALUES ('records', %s) ON CONFLICT (name) DO UPDATE"
                   " SET value = EXCLUDED.value RETURNING 1", [mode])

    # sessions -----------------------------------------------------------------------------
    def put_session(self, session: Session) -> str | None:
        values = [getattr(session, c) for c in SESSION_COLUMNS]
        updates = ", ".join(f'"{c}" = EXCLUDED."{c}"' for c in SESSION_COLUMNS[1:])
        rows = self._rows(
            f"INSERT INTO dh.sessions ({_SESSIONS}) VALUES ({', '.join(['%s'] * len(values))})"
            f" ON CONFLICT (id) DO UPDATE SET {updates}"
            " WHERE dh.sessions.updated_at < EXCLUDED.updated_at RETURNING (xmax = 0)", values)
        return None if not rows else ("added" if rows[0][0] else "updated")

    def get_session(self, session_id: str) -> Session:
        rows = self._rows(f"SELECT {_SESSIONS} FROM dh.sessions WHERE id = %s", [session_id])
        if not rows:
            raise SessionNotFound(f"no session {session_id!r} in the PostgreSQL world")
        return Session(*rows[0])

    def find_session(self, ref: str) -> Session:
        """A dh id, a unique prefix of one, or the harness's own session id."""
        check_ref(ref)
        prefix = ref.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        rows = self._rows(f"SELECT {_SESSIONS} FROM dh.sessions WHERE id = %s OR harness_session_id = %s"
                          " OR id LIKE %s OR harness_session_id LIKE %s", [ref, ref, prefix, prefix])
        matches = [r for r in rows if ref in (r[0], r[2])] or rows
        return Session(*only_match(matches, ref, "PostgreSQL", self.name))

    def sessions(self, harness: str | None = None) -> list[Session]:
        rows = self._rows(f"SELECT {_SESSIONS} FROM dh.sessions WHERE %(h)s::text IS NULL"
                          " OR harness = %(h)s ORDER BY created_at, id", {"h": harness})
        return [Session(*row) for row in rows]

    # sources ------------------------------------------------------------------------------
    def get_source(self, session_id: str, relpath: str) -> Source | None:
        rows = self._rows(f"SELECT {_SOURCES} FROM dh.sources WHERE session_id = %s AND relpath = %s",
                          [session_id, relpath])
        return Source(*rows[0]) if rows else None

    def put_source(self, source: Source, update: bool = False) -> Source:
        names = SOURCE_COLUMNS[1:]
        with self._errors(), self.conn.transaction():
            self.conn.execute(
                f"INSERT INTO dh.sources ({cols(names)}) VALUES ({', '.join(['%s'] * len(names))})"
                " ON CONFLICT (session_id, relpath) DO NOTHING", [getattr(source, c) for c in names])
            if update:
                self.conn.execute(
                    f"UPDATE dh.sources SET {_SET_PROGRESS}"
                    " WHERE session_id = %s AND relpath = %s",
                    [getattr(source, c) for c in PROGRESS_COLUMNS] + [source.session_id, source.relpath])
        return self.get_source(source.session_id, source.relpath)

    def sources(self, session_id: str) -> list[Source]:
        rows = self._rows(f"SELECT {_SOURCES} FROM dh.sources WHERE session_id = %s ORDER BY id",
                          [session_id])
        return [Source(*row) for row in rows]

    # records ------------------------------------------------------------------------------
    def append_rows(self, rows: list[tuple]) -> int:
        """Stored rows (source_id already this world's), COPYed in one transaction."""
        if not rows:
            return 0
        with self._errors():
            try:
                with self.conn.transaction():
                    self._copy_in("dh.records", rows)
                return len(rows)
            except psycopg.errors.UniqueViolation:
                return self._merge(rows)  # some are there already: add only the others
            except psycopg.errors.CharacterNotInRepertoire:
                return self._merge(_sanitize(rows))

    def _copy_in(self, table: str, rows: list[tuple]) -> None:
        with self.conn.cursor().copy(f"COPY {table} ({_RECORDS}) FROM STDIN (FORMAT BINARY)") as copy:
            copy.set_types(RECORD_TYPES)
            for row in rows:
                copy.write_row(row)

    def _merge(self, rows: list[tuple]) -> int:
        with self.conn.transaction():
            self.conn.execute("CREATE TEMP TABLE IF NOT EXISTS incoming (LIKE dh.records)"
                              " ON COMMIT DELETE ROWS")
            self._copy_in("incoming", rows)
            return self.conn.execute(f"INSERT INTO dh.records ({_RECORDS}) SELECT {_RECORDS}"
                                     " FROM incoming ON CONFLICT DO NOTHING").rowcount

    def append_records(self, source: Source, records: list[Record]) -> int:
        return self.append_rows(stored_rows(source, records))

    def read_rows(self, source: Source, after: Position | None = None,
                  upto: Position | None = None, as_source_id: int | None = None,
                  chunk: int = CHUNK) -> Iterator[list[tuple]]:
        """Stored rows of a source in order, `as_source_id` in their source_id column; one COPY
        streams them all."""
        clause, args = _range(after, upto)
        query = (f"COPY (SELECT %s::int8, {cols(RECORD_COLUMNS[1:])} FROM dh.records"
                 f' WHERE source_id = %s{clause} ORDER BY generation, "offset") TO STDOUT (FORMAT BINARY)')
        sid = source.id if as_source_id is None else as_source_id
        with self._errors(), self.conn.cursor().copy(query, [sid, source.id] + args) as copy:
            copy.set_types(RECORD_TYPES)
            batch = []
            for row in copy.rows():
                batch.append(row)
                if len(batch) >= chunk:
                    yield batch
                    batch = []
            if batch:
                yield batch

    def read_records(self, session_id: str, relpath: str, after: Position | None = None,
                     limit: int | None = None) -> list[Record]:
        source = self.get_source(session_id, relpath)
        if source is None:
            return []
        clause, args = _range(after, None)
        rows = self._rows(f"SELECT {_RECORDS} FROM dh.records WHERE source_id = %s{clause}"
                          ' ORDER BY generation, "offset" LIMIT %s', [source.id] + args + [limit])
        return [replace(Record(*row), raw=decode_raw(row[3], row[4])) for row in rows]

    def count_upto(self, source: Source, last: Position) -> int:
        return self._rows('SELECT COUNT(*) FROM dh.records WHERE source_id = %s'
                          ' AND (generation, "offset") <= (%s, %s)', [source.id, *last])[0][0]

    # events -------------------------------------------------------------------------------
    def append_events(self, events: list[Event]) -> int:
        if not events:
            return 0
        columns = list(zip(*[(e.session_id, e.seq, e.at, e.attempt, e.type, e.phase,
                              json.dumps(e.details, sort_keys=True)) for e in events]))
        with self._errors():
            return self.conn.execute(
                "INSERT INTO dh.events SELECT * FROM unnest(%s::text[], %s::int[], %s::text[],"
                " %s::int[], %s::text[], %s::text[], %s::text[]) ON CONFLICT DO NOTHING",
                [list(c) for c in columns]).rowcount

    def events(self, session_id: str, after_seq: int = 0) -> list[Event]:
        rows = self._rows("SELECT session_id, seq, at, attempt, type, phase, details FROM dh.events"
                          " WHERE session_id = %s AND seq > %s ORDER BY seq", [session_id, after_seq])
        return [Event(*row[:6], details_of(row[6], row[1])) for row in rows]

    # marks and locks ----------------------------------------------------------------------
    def marks(self, session_id: str | None = None) -> dict[str, SessionMarks]:
        return group_marks(self._rows("""
            SELECT s.id, s.harness, s.updated_at, o.relpath, c.n, h.generation, h."offset",
                   (SELECT MAX(seq) FROM dh.events e WHERE e.session_id = s.id)
            FROM dh.sessions s
            LEFT JOIN dh.sources o ON o.session_id = s.id
            LEFT JOIN LATERAL (SELECT COUNT(*) AS n FROM dh.records r WHERE r.source_id = o.id) c ON true
            LEFT JOIN LATERAL (SELECT generation, "offset" FROM dh.records r WHERE r.source_id = o.id
                               ORDER BY generation DESC, "offset" DESC LIMIT 1) h ON true
            WHERE %(sid)s::text IS NULL OR s.id = %(sid)s
            ORDER BY s.created_at, s.id, o.id""", {"sid": session_id}))

    def high_water(self, session_id: str) -> dict[str, Mark]:
        found = self.marks(session_id).get(session_id)
        return found.sources if found else {}

    # workspace objects and snapshots (m019, m020) -------------------------------------------
    def ws_known(self, hashes: list[str]) -> set[str]:
        return {r[0] for r in self._rows("SELECT hash FROM dh.ws_objects WHERE hash = ANY(%s)", [hashes])}

    def ws_put(self, objects: list[tuple], snapshots: list[tuple]) -> int:
        with self._errors(), self.conn.transaction(), self.conn.cursor() as cur:
            before = cur.execute("SELECT count(*) FROM dh.ws_objects WHERE hash = ANY(%s)",
                                 [[o[0] for o in objects]]).fetchone()[0] if objects else 0
            cur.executemany("INSERT INTO dh.ws_objects (hash, kind, size, codec, data) VALUES"
                            " (%s, %s, %s, %s, %s) ON CONFLICT DO NOTHING", objects)
            cur.executemany(f"INSERT INTO dh.ws_snapshots VALUES ({', '.join(['%s'] * 12)})"
                            " ON CONFLICT DO NOTHING", snapshots)
        return len(objects) - before

    def ws_snapshot_rows(self, session_id: str, after_seq: int = 0) -> list[tuple]:
        return self._rows("SELECT * FROM dh.ws_snapshots WHERE session_id = %s AND seq > %s"
                          " ORDER BY seq", [session_id, after_seq])

    def ws_object_rows(self, hashes: list[str]) -> list[tuple]:
        return [(h, k, s, c, bytes(d)) for h, k, s, c, d in self._rows(
            "SELECT hash, kind, size, codec, data FROM dh.ws_objects WHERE hash = ANY(%s)", [hashes])]

    def lock_session(self, session_id: str) -> "PgSessionLock":
        """An exclusive, non-blocking lock on the session across every machine using this
        server (raises SessionLocked). It lives on its own connection, so it dies with the
        process that holds it."""
        return PgSessionLock(self, session_id).acquire()


class PgSessionLock:
    def __init__(self, world: PostgresWorld, session_id: str):
        self.world, self.session_id = world, session_id
        self.conn: psycopg.Connection | None = None

    def acquire(self) -> "PgSessionLock":
        # Advisory locks are re-entrant on one connection: each lock needs its own.
        conn = self.world._connect()
        with self.world._errors():
            got = conn.execute("SELECT pg_try_advisory_lock(hashtextextended(%s, 0))",
                               ["dh:session:" + self.session_id]).fetchone()[0]
        if not got:
            conn.close()
            raise SessionLocked(f"session {self.session_id} is in use by another dh"
                                f" (locked in the PostgreSQL world at {self.world.shown})",
                                hint="wait for that dh to finish, or stop it")
        self.conn = conn
        return self

    def release(self) -> None:
        if self.conn is not None:
            self.conn.close()  # closing the connection ends the advisory lock with it
            self.conn = None

    def __enter__(self) -> "PgSessionLock":
        return self

    def __exit__(self, *exc) -> None:
        self.release()
