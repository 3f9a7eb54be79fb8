"""Closing a tool call a crash cut in a Claude Code transcript: a `user` tool_result row
(is_error) chained after the current leaf, in the field order of Claude's own rows, so
Claude keeps the step instead of dropping the call and asking the model again
(ClaudeWrapper.repair_lines)."""

from __future__ import annotations

import uuid

from ..models import Record, ToolCall
from .common import iso_now, json_line, json_objects

SESSION_FIELDS = ("userType", "entrypoint", "cwd", "sessionId", "version", "gitBranch")


def repair_lines(records: list[Record], call: ToolCall, text: str) -> list[bytes]:
    """The tool_result row for the dangling call, as one JSONL line. Nothing when the call
    is on a branch the conversation has left."""
    rows = [r for r in json_objects(records) if r.get("uuid")]
    source = next((r for r in rows if _holds_tool_use(r, call.id)), None)
    if source is None or not _leaf_follows(rows, source):
        return []
    return [json_line(_result_row(rows, source, call.id, text))]


def _result_row(rows: list[dict], source: dict, call_id: str, text: str) -> dict:
    """The row in the field order of Claude's own tool_result rows."""
    row = {"parentUuid": rows[-1]["uuid"], "isSidechain": source.get("isSidechain", False)}
    prompt_id = _prompt_id(rows, source)
    if prompt_id:
        row["promptId"] = prompt_id
    row.update({"type": "user", "message": {"role": "user", "content": [
        {"tool_use_id": call_id, "type": "tool_result", "content": text, "is_error": True}]},
        "uuid": str(uuid.uuid4()), "timestamp": iso_now(), "toolUseResult": f"Error: {text}",
        "sourceToolAssistantUUID": source["uuid"]})
    row.update({k: source[k] for k in SESSION_FIELDS if k in source})
    return row


def _blocks(row: dict) -> list[dict]:
    content = (row.get("message") or {}).get("content")
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


def _holds_tool_use(row: dict, call_id: str) -> bool:
    return row.get("type") == "assistant" and any(
        b.get("type") == "tool_use" and b.get("id") == call_id for b in _blocks(row))


def _is_turn_row(row: dict) -> bool:
    """A row that moves the conversation on: an assistant row, a user prompt or a
    compaction. Tool results, attachments and other system rows do not."""
    if row.get("type") == "assistant" or row.get("subtype") == "compact_boundary":
        return True
    return row.get("type") == "user" and not any(b.get("type") == "tool_result"
                                                 for b in _blocks(row))


def _leaf_follows(rows: list[dict], source: dict) -> bool:
    """True when the leaf (the last row) is the tool message itself or follows it only
    through tool results and side rows. Claude drops a dangling call on resume and carries
    on from its text row; a result written then would make the dead branch the leaf again."""
    by_uuid = {r["uuid"]: r for r in rows}
    message_id = (source.get("message") or {}).get("id")
    current, seen = rows[-1], set()
    while current is not None and current["uuid"] not in seen:
        if current is source or (current.get("type") == "assistant" and message_id and
                                 (current.get("message") or {}).get("id") == message_id):
            return True
        if _is_turn_row(current):
            return False
        seen.add(current["uuid"])
        current = by_uuid.get(current.get("parentUuid"))
    return False


def _prompt_id(rows: list[dict], source: dict) -> str | None:
    """The promptId of the turn holding the call: assistant rows lack it, so take the last
    user row written before the call."""
    if source.get("promptId"):
        return source["promptId"]
    before = rows[:rows.index(source)]
    return next((r["promptId"] for r in reversed(before)
                 if r.get("type") == "user" and r.get("promptId")), None)
