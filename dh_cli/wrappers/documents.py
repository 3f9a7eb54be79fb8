"""Each harness's tool calls that edit typed session state, read as document edits
(dh_cli/documents). Formats as the pinned versions write them (tests/fixtures/real):

- Claude Code: TodoWrite {todos: [{content, status, activeForm}]} replaces the todo list;
  TaskCreate {subject, description, activeForm} adds a task whose id is in the result text
  ("Task #1 created successfully: …"); TaskUpdate {taskId, status, subject, …} changes one
  (status "deleted" removes it). The same tasks are in the home's tasks/<session>/<id>.json.
- Codex: update_plan {explanation, plan: [{step, status}]} replaces the plan. Codex 0.171.0
  in exec mode does not offer the tool and answers a call "unsupported call: update_plan":
  such an edit is kept in the history as refused and changes nothing.
- OpenCode: todowrite {todos: [{id, content, status, priority}]} replaces the list (its `todo`
  table holds the same rows afterwards).
- Pi has no todo or plan tool (its tools: read, bash, edit, write, grep, find, ls)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from ..documents.models import Edit, Item
from ..models import ToolCall, ToolResult

TASK_CREATED = re.compile(r"Task #(\S+) created")
TASK_FIELDS = {"subject": "content", "status": "status", "activeForm": "active_form",
               "description": "description"}


def _args(call: ToolCall) -> dict:
    value = call.input
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return {}
    return value if isinstance(value, dict) else {}


def _text(value) -> str | None:
    return value if isinstance(value, str) else None


def _items(rows, content: str, **extra) -> list[Item]:
    out = []
    for row in rows if isinstance(rows, list) else []:
        if isinstance(row, dict) and isinstance(row.get(content), str):
            out.append(Item(content=row[content], status=_text(row.get("status")) or "pending",
                            **{k: _text(row.get(v)) for k, v in extra.items()}))
    return out


def claude_edit(call: ToolCall, result: ToolResult) -> Edit | None:
    args, refused = _args(call), result.is_error
    why = result.text[:200] if refused else None
    if call.name == "TodoWrite":
        return Edit(kind="todos", op="replace", tool=call.name, call_id=call.id, accepted=not refused,
                    why=why, items=_items(args.get("todos"), "content", active_form="activeForm"))
    if call.name == "TaskCreate":
        found = TASK_CREATED.search(result.text or "")
        item = Item(id=found.group(1) if found else None, content=_text(args.get("subject")) or "",
                    description=_text(args.get("description")),
                    active_form=_text(args.get("activeForm")))
        return Edit(kind="tasks", op="create", tool=call.name, call_id=call.id, items=[item],
                    accepted=not refused and found is not None, why=why)
    if call.name == "TaskUpdate":
        changes = {TASK_FIELDS[k]: v for k, v in args.items() if k in TASK_FIELDS and isinstance(v, str)}
        return Edit(kind="tasks", op="update", tool=call.name, call_id=call.id,
                    item_id=str(args.get("taskId")), changes=changes, accepted=not refused, why=why)
    return None


def codex_edit(call: ToolCall, result: ToolResult) -> Edit | None:
    if call.name != "update_plan":
        return None
    args = _args(call)
    refused = result.is_error or (result.text or "").startswith("unsupported call")
    return Edit(kind="plan", op="replace", tool=call.name, call_id=call.id,
                items=_items(args.get("plan"), "step"), explanation=_text(args.get("explanation")),
                accepted=not refused, why=result.text[:200] if refused else None)


def opencode_edit(call: ToolCall, result: ToolResult) -> Edit | None:
    if call.name != "todowrite":
        return None
    args = _args(call)
    items = _items(args.get("todos"), "content", id="id", priority="priority")
    return Edit(kind="todos", op="replace", tool=call.name, call_id=call.id, items=items,
                accepted=not result.is_error, why=result.text[:200] if result.is_error else None)


def write_claude_tasks(home: Path, native_id: str, document) -> list[str]:
    """tasks/<session>/<id>.json as Claude Code 2.1.197 writes them (2-space JSON, an empty
    .lock beside), only when the session's folder is missing: the harness's live files win."""
    from ..pathrule import under  # home/relpath, refused when it leaves home

    folder = under(home, f"tasks/{native_id}")
    if folder.exists():
        return []
    doc = document()
    if doc is None or not doc.items:
        return []
    folder.mkdir(parents=True)
    (folder / ".lock").touch()
    written = []
    for item in doc.items:
        if not item.id:
            continue
        body = {"id": item.id, "subject": item.content, "description": item.description or "",
                "activeForm": item.active_form or "", "status": item.status,
                "blocks": item.blocks, "blockedBy": item.blocked_by}
        target = under(folder, f"{item.id}.json")
        target.write_text(json.dumps(body, indent=2, ensure_ascii=False))
        written.append(f"tasks/{native_id}/{item.id}.json")
    return written


def write_opencode_todos(db: Path, native_id: str, document) -> list[str]:
    """OpenCode's `todo` rows of the session (`opencode import` brings back the session, its
    messages and parts, not its todos), only when the database holds the session and no todo
    of it. The list is the document's; the rows' times are now."""
    import sqlite3
    import time

    if not db.is_file():
        return []
    now = int(time.time() * 1000)
    conn = sqlite3.connect(db, timeout=5.0)
    try:
        with conn:
            if not conn.execute("SELECT 1 FROM session WHERE id = ?", [native_id]).fetchone() or \
                    conn.execute("SELECT 1 FROM todo WHERE session_id = ?", [native_id]).fetchone():
                return []
            doc = document()
            if doc is None or not doc.items:
                return []
            conn.executemany(
                "INSERT INTO todo (session_id, content, status, priority, position, time_created,"
                " time_updated) VALUES (?, ?, ?, ?, ?, ?, ?)",
                [(native_id, i.content, i.status, i.priority or "medium", n, now, now)
                 for n, i in enumerate(doc.items)])
    except sqlite3.Error:
        return []  # an OpenCode whose schema differs: its todos stay in the log only
    finally:
        conn.close()
    return [f"todo/{native_id}/{n}" for n in range(len(doc.items))]
