"""Session state beside the transcript (issue 20), on the real captures: Claude Code's
TaskCreate list `tasks/<session-id>/<n>.json` is part of the session (mirrored, rebuilt), and
OpenCode's todo rows, which its export/import drops, are written back after an import: the
rows of the newest todowrite, never over a row OpenCode holds. End to end with the real
programs: tests/e2e/test_whole_home_lost.py."""

from __future__ import annotations

import json
import sqlite3

from dh_cli.models import Record
from dh_cli.stores.opencode_restore import current_todos, restore_todos
from dh_cli.wrappers import get

from .conftest import FIXTURES, fixture_home

SID = "ses_dd9b3ee01ffeavu65Bcb9NtGc8"


def test_claude_tasks_are_sources_of_the_session(tmp_path):
    home = fixture_home("claude-code", "subagent-tasks", tmp_path)
    (session,) = get("claude").discover(home)
    rel = {s.relpath: s.kind for s in session.sources}
    assert rel[f"tasks/{session.harness_session_id}/1.json"] == "file"
    assert not any(r.endswith(".lock") for r in rel)  # Claude makes its lock itself


def todo_records() -> list[Record]:
    lines = (FIXTURES / "opencode" / "todowrite" / "db" / "rows.jsonl").read_bytes().splitlines()
    return [Record(source_id=1, generation=0, offset=i, raw=line) for i, line in enumerate(lines)]


def empty_db(tmp_path):
    db = tmp_path / "opencode.db"
    conn = sqlite3.connect(db)
    conn.executescript((FIXTURES / "opencode" / "todowrite" / "db" / "opencode.db.schema.sql").read_text())
    conn.close()
    return db


def test_the_newest_todowrite_is_the_list(tmp_path):
    records = todo_records()
    assert [t["content"] for t in current_todos(records, SID)] == ["Write a.txt", "Report back"]
    # an older write's row at a position the newest list no longer has is not brought back
    stale = {"table": "todo", "session_id": SID, "content": "Old", "status": "pending",
             "priority": "low", "position": 2, "time_created": 1, "time_updated": 1}
    records.append(Record(source_id=1, generation=0, offset=99, raw=json.dumps(stale).encode()))
    assert len(current_todos(records, SID)) == 2


def test_todo_rows_are_written_back_after_an_import(tmp_path):
    db = empty_db(tmp_path)
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA foreign_keys=OFF")
    assert restore_todos(db, SID, todo_records()) == 2
    rows = conn.execute("SELECT content, status, priority, position FROM todo ORDER BY position").fetchall()
    assert rows == [("Write a.txt", "completed", "high", 0), ("Report back", "in_progress", "medium", 1)]
    conn.execute("UPDATE todo SET status = 'completed' WHERE position = 1")
    conn.commit()
    restore_todos(db, SID, todo_records())  # never over what OpenCode holds
    assert conn.execute("SELECT status FROM todo WHERE position = 1").fetchone() == ("completed",)
    conn.close()
