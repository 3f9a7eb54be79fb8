"""Put an OpenCode session back into OpenCode's database from the log (the "machine lost"
case: the database was deleted, or the session is resumed on a new machine). OpenCode keeps
every session in one SQLite database that dh never writes wholesale: the session goes back
through OpenCode's own `opencode import` of the export JSON built from the log, run from the
session's working directory (import binds the session to the directory it runs in)."""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import subprocess
import tempfile
from pathlib import Path

from ..errors import NativeStateError
from ..models import Session
from .files import safe_target
from ..wrappers.opencode_db import list_sessions
from .opencode_export import build_export
from ..wrappers.opencode_rows import (drop_empty_assistant, latest_rows, numbered_tool_times,
                                      row_data)

IMPORT_TIMEOUT = 120.0


def session_in_db(db: Path, session_id: str | None) -> bool:
    try:
        return any(sid == session_id for sid, _ in list_sessions(db))
    except NativeStateError:
        return False


def sessions_in_db(db: Path) -> set[str] | None:
    """The ids of the sessions the database holds: empty when it is gone, None when it
    cannot be read (not known to be lost)."""
    if not db.exists():
        return set()
    try:
        return {sid for sid, _ in list_sessions(db)}
    except NativeStateError:
        return None


def settle_database(db: Path) -> None:
    """Fold into the database the write-ahead log that a killed OpenCode left, before it starts
    again. OpenCode 1.18.33 runs `PRAGMA journal_mode = WAL` before it sets a busy timeout: if
    dh's mirror is just then recovering that log (the first reader after a crash does), the new
    OpenCode fails at once with "database is locked" (seen in about one resume in ten). After
    this checkpoint there is nothing left to recover. Only called while no OpenCode of this
    session runs; others sharing the database just wait a moment (busy timeout)."""
    if not db.is_file():
        return
    try:
        conn = sqlite3.connect(db, timeout=5.0)
        try:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
        finally:
            conn.close()
    except sqlite3.Error:
        pass  # best effort: OpenCode recovers the log itself when nothing else reads it


def import_dir(session: Session, records) -> str:
    """Where `opencode import` runs: it binds the session to that directory, and a later
    `opencode run --session` from any other directory never exits (see
    OpenCodeWrapper.linger_after_turn). That is the directory OpenCode itself recorded for
    the session (differs from dh's cwd under `opencode --dir`), when this machine recorded it
    and it exists; else the session's cwd. A log pulled from elsewhere never picks it."""
    if session.host == socket.gethostname():
        rows = [r for r in latest_rows(records) if r.get("table") == "session"
                and r.get("id") == session.harness_session_id]
        directory = rows[-1].get("directory") if rows else None
        if isinstance(directory, str) and os.path.isabs(directory) and os.path.isdir(directory):
            return directory
    return session.cwd or os.getcwd()


def import_command(binary: list[str], export_file: Path) -> list[str]:
    return [*binary, "import", str(export_file)]


def restore_opencode(world, session: Session, source, binary: list[str], env: dict) -> int | None:
    """Import the session when OpenCode's database lacks it; the size of the export
    imported, or None when the database already holds the session."""
    db = Path(source.path)
    if session_in_db(db, session.harness_session_id):
        return None
    records = list(world.records(session.id, source.id))
    export = drop_empty_assistant(build_export(records, session.harness_session_id))
    export = numbered_tool_times(export)  # rows an earlier dh closed while pending
    cwd = import_dir(session, records)
    if not os.path.isdir(cwd):
        raise NativeStateError(f"cannot restore OpenCode session {session.harness_session_id}: "
                               f"its working directory {cwd} does not exist")
    with tempfile.TemporaryDirectory(prefix="dh-opencode-") as folder:
        # the id comes from the log (maybe pulled): it must name a file in this folder
        export_file = safe_target(Path(folder), f"{session.harness_session_id}.json")
        data = json.dumps(export, ensure_ascii=False).encode()
        export_file.write_bytes(data)
        try:
            done = subprocess.run(import_command(binary, export_file), cwd=cwd, env=env,
                                  stdin=subprocess.DEVNULL, capture_output=True, text=True,
                                  errors="replace", timeout=IMPORT_TIMEOUT)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise NativeStateError(f"`opencode import` failed: {exc}") from None
    if done.returncode != 0 or not session_in_db(db, session.harness_session_id):
        tail = " ".join((done.stderr or done.stdout).strip().splitlines()[-3:])
        raise NativeStateError(
            f"`opencode import` did not restore session {session.harness_session_id} into {db} "
            f"(exit {done.returncode}): {tail}",
            hint="check that OpenCode's data dir (XDG_DATA_HOME / OPENCODE_DB) is the one the "
                 "session was recorded with")
    settle_database(db)  # the import may leave its log behind, like a killed OpenCode
    restore_todos(db, session.harness_session_id, records)
    return len(data)


def current_todos(records, session_id: str) -> list[dict]:
    """The session's todo list as the log last saw it. OpenCode's todowrite replaces the
    whole list (rows at positions 0..n-1); the log keeps every row it ever saw, so a row at
    a position past the newest todowrite's list is one a later write dropped."""
    latest = latest_rows(records)
    rows = [r for r in latest if r.get("table") == "todo" and r.get("session_id") == session_id
            and isinstance(r.get("position"), int)]
    parts = [r for r in latest if r.get("table") == "part" and r.get("session_id") == session_id]
    parts.sort(key=lambda r: r.get("time_created") if isinstance(r.get("time_created"), int) else 0)
    writes = [row_data(r) for r in parts]
    lists = [(w.get("state") or {}).get("input", {}).get("todos") for w in writes
             if w.get("type") == "tool" and w.get("tool") == "todowrite"
             and (w.get("state") or {}).get("status") == "completed"]
    lists = [todos for todos in lists if isinstance(todos, list)]
    keep = len(lists[-1]) if lists else None
    return sorted((r for r in rows if keep is None or r["position"] < keep),
                  key=lambda r: r["position"])


def restore_todos(db: Path, session_id: str, records) -> int:
    """Put the session's todo rows back: `opencode export`/`import` carry none (2 rows
    before, 0 after, seen with 1.18.33). Written like set_tool_error, into the session dh
    just imported while no OpenCode runs; only into the columns the table has, and never
    over a row OpenCode holds already."""
    todos = current_todos(records, session_id)
    if not todos:
        return 0
    conn = sqlite3.connect(db, timeout=10)
    try:
        columns = [r[1] for r in conn.execute('PRAGMA table_info("todo")')]
        if not columns:
            return 0  # a release without the table: nothing to give back
        with conn:
            for row in todos:
                names = [c for c in columns if c in row]
                conn.execute(f'INSERT OR IGNORE INTO "todo" ({", ".join(map(_quoted, names))}) '
                             f'VALUES ({", ".join("?" * len(names))})', [row[c] for c in names])
        return len(todos)
    except sqlite3.Error as exc:
        raise NativeStateError(f"cannot restore the todo list of {session_id} in {db}: {exc}") from None
    finally:
        conn.close()


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'
