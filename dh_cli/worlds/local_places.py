"""The parts of the local log that are about THIS machine (issue 14): where a session lives
here (the `places` table), which files the mirror read (`mirrored_paths`), the native-session
locks, removing a session, and checks on what the command line names. A world push or pull
never touches these tables: only LocalWorld's own writes (create_session, update_session,
add_source) fill them."""

from __future__ import annotations

import os
from dataclasses import fields

from ..errors import LogDbError, SessionNotFound, UsageError
from ..models import Session
from ..util import now_iso

MAX_REF = 256  # longer than any dh id or harness id: refused before it reaches SQL's LIKE


def check_ref(ref) -> None:
    """A session reference from the command line: never empty (it would match every
    session), never longer than an id can be (SQLite calls a 100k LIKE pattern corrupt)."""
    if not isinstance(ref, str) or not ref.strip():
        raise UsageError("no session given (an empty session name matches nothing)",
                         hint="give a dh id, a unique prefix of it, or the harness's own id")
    if len(ref) > MAX_REF:
        raise SessionNotFound(f"no session matches {ref[:40]!r}… ({len(ref)} characters: longer "
                              "than any session id)")



SESSION_COLUMNS = [f.name for f in fields(Session)]


class LocalPlaces:
    """Mixed into LocalWorld: needs self.conn, self.path, self._identity, self._write()."""

    def check_in_place(self) -> None:
        """Raise LogDbError when the log file this connection writes to was deleted or
        replaced (what it logged since went to a file nobody will read again)."""
        try:
            now = os.stat(self.path)
        except OSError:
            now = None
        if now is None or (now.st_dev, now.st_ino) != self._identity:
            how = "deleted" if now is None else "replaced"
            raise LogDbError(f"the log {self.path} was {how} while dh was writing to it: what "
                             "this run logged is not in it", hint="keep DH_HOME in place while dh runs; "
                             "`dh import` can backfill the session from the harness's own files")

    def remove_session(self, session_id: str) -> int:
        """Remove a session, its sources, records, events and workspace snapshots (their
        objects may be shared) from this log, in one transaction; the number of records
        removed. (A world keeps its own copy.)"""
        with self._write() as conn:
            sources = "SELECT id FROM sources WHERE session_id = ?"
            removed = conn.execute(f"DELETE FROM records WHERE source_id IN ({sources})",
                                   [session_id]).rowcount
            conn.execute(f"DELETE FROM mirrored_paths WHERE source_id IN ({sources})", [session_id])
            for table in ("sources", "events", "places", "session_worlds", "forks", "ws_snapshots"):
                conn.execute(f"DELETE FROM {table} WHERE session_id = ?", [session_id])
            conn.execute("DELETE FROM sessions WHERE id = ?", [session_id])
        return removed

    def masked_records(self, session_id: str) -> int:
        """Records of the session that came from a world that masked credentials in them."""
        return self.conn.execute(
            "SELECT COUNT(*) FROM records r JOIN sources o ON o.id = r.source_id WHERE"
            " o.session_id = ? AND ',' || r.flags || ',' LIKE '%,masked,%'", [session_id]).fetchone()[0]

    def place(self, session_id: str) -> tuple[str, str | None] | None:
        """(home, cwd) of the session on this machine, as dh decided them here; None for a
        session that came from elsewhere and was not adopted yet."""
        row = self.conn.execute("SELECT home, cwd FROM places WHERE session_id = ?",
                                [session_id]).fetchone()
        return (row[0], row[1]) if row else None

    def own_argv(self, session_id: str) -> str | None:
        """The args (JSON) the session was started with by dh on this machine; None for a
        session from elsewhere (pulled, imported or adopted), whose argv is data."""
        row = self.conn.execute("SELECT argv FROM places WHERE session_id = ?", [session_id]).fetchone()
        return row[0] if row else None

    def remember_world(self, session_id: str, world: str, url: str | None) -> None:
        """The session replicates to this world (url: without its password)."""
        with self._write() as conn:
            conn.execute("INSERT OR REPLACE INTO session_worlds VALUES (?, ?, ?, ?)",
                         [session_id, world, url, now_iso()])

    def remembered_world(self, session_id: str) -> tuple[str, str | None] | None:
        """(world, url without password) the session replicated to from here, or None."""
        row = self.conn.execute("SELECT world, url FROM session_worlds WHERE session_id = ?",
                                [session_id]).fetchone()
        return (row[0], row[1]) if row else None

    def remember_fork(self, session_id: str, forked_from: str) -> None:
        with self._write() as conn:
            conn.execute("INSERT OR REPLACE INTO forks VALUES (?, ?, ?)",
                         [session_id, forked_from, now_iso()])

    def forks(self) -> dict[str, str]:
        """session id -> the session it was forked from here (few rows: one read for a list)."""
        return dict(self.conn.execute("SELECT session_id, forked_from FROM forks"))

    def mirrored_path(self, source_id: int) -> str | None:
        """The file this machine mirrored the source from (None: it never did)."""
        row = self.conn.execute("SELECT path FROM mirrored_paths WHERE source_id = ?",
                                [source_id]).fetchone()
        return row[0] if row else None

    def native_mains(self, session_ids: list[str] | None = None) -> dict[str, tuple]:
        """session id -> (harness, harness id, home, kind, path, logged size, argv) of the first
        source of every session placed on this machine (or of those named, up to 500), its
        path the one this machine's mirror read: one query for a whole list, to tell which
        sessions the harness lost."""
        named = session_ids is not None and len(session_ids) <= 500  # SQLite's bound values
        where = f"WHERE session_id IN ({', '.join('?' * len(session_ids))})" if named else ""
        rows = self.conn.execute(
            "SELECT o.session_id, s.harness, s.harness_session_id, p.home, o.kind, m.path, o.offset,"
            f" p.argv FROM (SELECT MIN(rowid) AS first FROM sources {where} GROUP BY session_id) f"
            " JOIN sources o ON o.rowid = f.first JOIN places p ON p.session_id = o.session_id"
            " JOIN sessions s ON s.id = o.session_id JOIN mirrored_paths m ON m.source_id = o.id",
            session_ids if named else [])
        return {row[0]: tuple(row[1:]) for row in rows}

    def sessions_with_event(self, type_: str, session_ids: list[str]) -> set[str]:
        """Those of the named sessions with an event of this type (by the events' key)."""
        found: set[str] = set()
        for at in range(0, len(session_ids), 500):  # SQLite's bound values
            ids = session_ids[at:at + 500]
            found.update(row[0] for row in self.conn.execute(
                f"SELECT DISTINCT session_id FROM events WHERE session_id IN ({', '.join('?' * len(ids))})"
                " AND type = ?", [*ids, type_]))
        return found

    def lock_native(self, harness: str, key: str):
        """An exclusive, non-blocking lock on a native session's id or file."""
        from .locks import NativeLock

        return NativeLock(self.path.parent, harness, key).acquire()

    def find_by_path(self, harness: str, path: str) -> Session | None:
        """The session of this harness whose native file (as recorded here) is path."""
        real = os.path.realpath(path)
        row = self.conn.execute(
            f"SELECT {', '.join('s.' + c for c in SESSION_COLUMNS)} FROM sessions s WHERE s.harness = ?"
            " AND (s.native_path IN (?, ?) OR s.id IN (SELECT o.session_id FROM sources o JOIN"
            " mirrored_paths m ON m.source_id = o.id WHERE m.path IN (?, ?)))"
            " ORDER BY s.created_at LIMIT 1", [harness, path, real, path, real]).fetchone()
        return Session(*row) if row else None
