"""The local world: one SQLite file (WAL, 0600) shared by every dh process on the machine.

LocalWorld is put together from focused parts: the connection and its write transaction
(local_conn.py), the records (local_records.py), what is about this machine only
(local_places.py), the workspace snapshots (local_workspace.py) and, here, the sessions,
sources, events and the World interface's copy methods. The row layout and codecs are in rows.py. A batch of records and the source's new
offset are committed together, so a killed dh replays at most one batch and the replay is a
no-op."""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING

from ..errors import AmbiguousSession, SessionNotFound
from ..models import Event, Record, Session, Source
from ..util import new_session_id, now_iso
from .base import group_marks
from .local_conn import LocalConnection, db_error
from .local_places import LocalPlaces, check_ref
from .local_records import READ_ROWS, LocalRecords, insert_rows
from .local_resumes import LocalResumes
from .local_views import LocalViews
from .local_workspace import LocalWorkspace
from .rows import (DEFLATE, LZ4, RECORD_COLUMNS, SESSION_COLUMNS, SOURCE_COLUMNS, STORED_RAW, column,
                   decode_raw, encode_raw, encode_rows, record_row)

if TYPE_CHECKING:
    from .search import Hit

# LocalWorld, and the names the mirror, the views and the tests imported from here before the
# split into rows.py / local_conn.py / local_records.py (new code imports them from there).
__all__ = ["LocalWorld", "db_error", "check_ref", "READ_ROWS", "DEFLATE", "LZ4", "RECORD_COLUMNS",
           "SESSION_COLUMNS", "SOURCE_COLUMNS", "STORED_RAW", "decode_raw", "encode_raw", "encode_rows",
           "record_row"]

# What a commit of the mirror changes in its source's row. Setting only these (not the session,
# kind, relpath and path, which are indexed) keeps the (session_id, relpath) index page out of
# every commit: 16 KiB less WAL and 23 % less CPU per live commit (66 -> 51 us, one record).
PROGRESS_COLUMNS = ["generation", "offset", "size", "inode", "head_hash", "tail_hash",
                    "pending", "status", "updated_at"]
_UPDATE_PROGRESS = "UPDATE sources SET {} WHERE id = ?".format(
    ", ".join(f'"{c}" = ?' for c in PROGRESS_COLUMNS))
_UPDATE_SOURCE = "UPDATE sources SET {} WHERE id = ?".format(
    ", ".join(f'"{c}" = ?' for c in SOURCE_COLUMNS[1:]))


def _decide_place(conn, session_id: str, home: str | None, cwd: str | None,
                  argv: str | None = None) -> None:
    """The session's place here; argv only when dh creates the session here (the user's own
    command line), kept when the place moves."""
    if home:
        conn.execute("INSERT INTO places (session_id, home, cwd, decided_at, argv) VALUES (?, ?, ?, ?, ?)"
                     " ON CONFLICT (session_id) DO UPDATE SET home = excluded.home, cwd = excluded.cwd,"
                     " decided_at = excluded.decided_at, argv = coalesce(excluded.argv, places.argv)",
                     [session_id, home, cwd, now_iso(), argv])


class LocalWorld(LocalRecords, LocalViews, LocalResumes, LocalPlaces, LocalWorkspace, LocalConnection):
    """The SQLite log. `path=None` means `$DH_HOME/dh.db`."""

    name = "local"

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
        self.conn.execute(f"INSERT INTO sessions ({', '.join(map(column, row))})"
                          f" VALUES ({', '.join('?' * len(row))})", list(row.values()))
        _decide_place(self.conn, session.id, session.home, session.cwd, session.argv)
        return session

    def update_session(self, session_id: str, **values) -> Session:
        """The session as updated. Only this machine calls it (a pull goes through
        put_session): a home or cwd given here is where the session lives on this machine
        (see confine.py)."""
        values["updated_at"] = now_iso()
        with self._write() as conn:
            conn.execute(f"UPDATE sessions SET {', '.join(f'{column(k)} = ?' for k in values)}"
                         " WHERE id = ?", [*values.values(), session_id])
            if "home" in values or "cwd" in values:
                row = conn.execute("SELECT home, cwd FROM sessions WHERE id = ?", [session_id]).fetchone()
                if row:
                    _decide_place(conn, session_id, *row)
        return self.get_session(session_id)

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

    def session_count(self) -> int:
        return self.conn.execute("SELECT COUNT(*) FROM sessions").fetchone()[0]

    def search(self, text: str, harness: str | None = None, since: str | None = None,
               limit: int = 50, session: str | None = None) -> list[Hit]:
        """Records whose text holds every word of `text`, best first (see search.py)."""
        from .search import search

        return search(self.conn, text, harness, since, limit, session)

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
            conn.execute(f"INSERT OR IGNORE INTO sources ({', '.join(map(column, values))})"
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

    def commit(self, source: Source, records: list[Record], events: list[tuple] = (),
               moved: bool = False) -> int:
        """Append records, save the source's new position and journal what happened to it
        (`events`: (type, details) pairs), all in one transaction. Only the progress columns
        are saved, unless `moved` (the source got a new relpath or path)."""
        source.updated_at = now_iso()
        columns, update = (SOURCE_COLUMNS[1:], _UPDATE_SOURCE) if moved else (
            PROGRESS_COLUMNS, _UPDATE_PROGRESS)
        with self._write() as conn:
            added = insert_rows(conn, [record_row(r) for r in records])
            for type_, details in events:
                self._insert_event(conn, source.session_id, type_, details, None, "info")
            conn.execute(update, [getattr(source, c) for c in columns] + [source.id])
        return added


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


def _like_prefix(ref: str) -> str:
    escaped = ref.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return escaped + "%"

