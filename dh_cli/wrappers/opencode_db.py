"""Read-only access to OpenCode's database. Opened with `mode=ro` so dh never takes a write
lock: in WAL mode a reader never blocks the harness, and the harness never blocks us for long."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from ..errors import NativeStateError
from .opencode_rows import error_state

# (table, column that ties a row to a session) in the order rows are logged.
SESSION_TABLES = [("session", "id"), ("message", "session_id"), ("part", "session_id"),
                  ("todo", "session_id"), ("event_sequence", "aggregate_id"),
                  ("event", "aggregate_id")]


def connect_ro(db: Path) -> sqlite3.Connection:
    if not db.exists():
        raise NativeStateError(f"OpenCode database {db} does not exist")
    try:
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=2.0)
        conn.row_factory = sqlite3.Row
        conn.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchone()
    except sqlite3.DatabaseError as exc:
        raise NativeStateError(f"cannot read OpenCode database {db}: {exc}") from None
    return conn


def _tables(conn: sqlite3.Connection) -> set[str]:
    return {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}


def list_sessions(db: Path) -> list[tuple[str, str | None]]:
    conn = connect_ro(db)
    try:
        if "session" not in _tables(conn):
            raise NativeStateError(f"{db} has no `session` table: unknown OpenCode schema")
        return [(r["id"], r["directory"]) for r in
                conn.execute("SELECT id, directory FROM session ORDER BY time_created, id")]
    except sqlite3.DatabaseError as exc:
        raise NativeStateError(f"cannot read OpenCode database {db}: {exc}") from None
    finally:
        conn.close()


def in_wal_mode(db: Path) -> bool:
    """Whether the database file's header says WAL (bytes 18 and 19 are 2), read without
    SQLite, so without a lock. OpenCode switches a new database to WAL at its start, before it
    sets a busy timeout: a reader's lock in that moment made it fail with "database is locked"
    (seen twice in the e2e suite, dh looking for the session a starting OpenCode makes)."""
    try:
        with open(db, "rb") as file:
            header = file.read(20)
    except OSError:
        return False
    return len(header) == 20 and header[18] == 2 and header[19] == 2


def sessions_since(db: Path, since_ms: int) -> list[tuple[str, str | None, int | None]]:
    """(id, directory, time_updated) of the sessions updated at or after since_ms (less a
    second of slack), oldest first by creation. These are the looks while OpenCode may be
    starting: a database not yet in WAL mode is not opened (in_wal_mode)."""
    if not in_wal_mode(db):
        raise NativeStateError(f"{db} is not in WAL mode yet (OpenCode is starting)")
    conn = connect_ro(db)
    try:
        if "session" not in _tables(conn):
            raise NativeStateError(f"{db} has no `session` table yet")
        return [(r["id"], r["directory"], r["time_updated"]) for r in conn.execute(
            "SELECT id, directory, time_updated FROM session WHERE time_updated >= ?"
            " ORDER BY time_created, id", [since_ms - 1000])]
    except sqlite3.DatabaseError as exc:
        raise NativeStateError(f"cannot read OpenCode database {db}: {exc}") from None
    finally:
        conn.close()


# Tables whose rows carry `time_updated`: after the first read only rows updated since the
# last read (less a margin for clock steps and same-millisecond writes) are fetched again.
UPDATED_TABLES = {"session", "message", "part"}
MARGIN_MS = 5000


def session_rows(db: Path, session_id: str, since_ms: int | None = None) -> list[bytes]:
    """The session's rows, each as one JSON line `{"table": …, <columns>}`: all of them, or
    with since_ms, the session, message and part rows that may have changed since (plus the
    small event and todo tables, read whole; unchanged rows are dropped by the caller)."""
    conn = connect_ro(db)
    try:
        present = _tables(conn)
        if "session" not in present:
            raise NativeStateError(f"{db} has no `session` table: unknown OpenCode schema")
        lines = []
        for table, column in SESSION_TABLES:
            if table in present:
                lines.extend(_table_rows(conn, table, column, session_id, since_ms))
        return lines
    except sqlite3.DatabaseError as exc:
        raise NativeStateError(f"cannot read OpenCode database {db}: {exc}") from None
    finally:
        conn.close()


def _table_rows(conn, table: str, column: str, session_id: str, since_ms: int | None) -> list[bytes]:
    sql, args = f'SELECT * FROM "{table}" WHERE "{column}" = ?', [session_id]
    if since_ms is not None and table in UPDATED_TABLES:
        sql += " AND time_updated >= ?"
        args.append(since_ms - MARGIN_MS)
    return [row_line(table, dict(row)) for row in conn.execute(sql + " ORDER BY rowid", args)]


def row_line(table: str, row: dict) -> bytes:
    return (json.dumps({"table": table, **row}, ensure_ascii=False) + "\n").encode()


def set_tool_error(db: Path, session_id: str, call_id: str, text: str) -> bool:
    """Close a tool part left pending/running by a killed OpenCode: status error with dh's
    text, in OpenCode's own part format. Only called while no OpenCode process runs."""
    conn = sqlite3.connect(db, timeout=10)
    try:
        for part_id, data in conn.execute("SELECT id, data FROM part WHERE session_id = ?", [session_id]):
            part = json.loads(data)
            if part.get("type") != "tool" or part.get("callID") != call_id:
                continue
            part["state"] = error_state(part.get("state") or {}, text)
            with conn:
                conn.execute("UPDATE part SET data = ? WHERE id = ?", [json.dumps(part), part_id])
            return True
        return False
    finally:
        conn.close()
