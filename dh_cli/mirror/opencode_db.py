"""Read-only access to OpenCode's database. Opened with `mode=ro` so dh never takes a write
lock: in WAL mode a reader never blocks the harness, and the harness never blocks us for long."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from ..errors import NativeStateError

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


def session_rows(db: Path, session_id: str) -> list[bytes]:
    """Every row of the session, each as one JSON line `{"table": …, <columns>}`."""
    conn = connect_ro(db)
    try:
        present = _tables(conn)
        if "session" not in present:
            raise NativeStateError(f"{db} has no `session` table: unknown OpenCode schema")
        lines = []
        for table, column in SESSION_TABLES:
            if table not in present:
                continue
            order = "rowid"
            for row in conn.execute(f'SELECT * FROM "{table}" WHERE "{column}" = ? ORDER BY {order}',
                                    [session_id]):
                lines.append(row_line(table, dict(row)))
        return lines
    except sqlite3.DatabaseError as exc:
        raise NativeStateError(f"cannot read OpenCode database {db}: {exc}") from None
    finally:
        conn.close()


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
            state = part.get("state") or {}
            start = (state.get("time") or {}).get("start")
            part["state"] = {"status": "error", "input": state.get("input") or {}, "error": text,
                             "time": {"start": start, "end": start}}
            with conn:
                conn.execute("UPDATE part SET data = ? WHERE id = ?", [json.dumps(part), part_id])
            return True
        return False
    finally:
        conn.close()
