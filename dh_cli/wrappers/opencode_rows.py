"""OpenCode's rows as dh logs them: one JSON line `{"table": …, <columns>}` per version of a
row; the latest version of a row is its current state. Shared by the OpenCode wrapper (its
parsing) and the OpenCode store (tailing, export, restore). Pure: no SQL, no files."""

from __future__ import annotations

import copy
import json
import time

from ..models import Record

OPEN_TOOL_STATES = {"pending", "running"}


def row_key(row: dict) -> str:
    ident = row.get("id") or row.get("aggregate_id") or row.get("session_id") or ""
    return f"{row.get('table')}/{ident}" if row.get("table") != "todo" else \
        f"todo/{row.get('session_id')}/{row.get('position')}"


def latest_rows(records: list[Record]) -> list[dict]:
    """The current version of every row, in first-seen order, with the creation time its
    first version had: `opencode import` (a rebuilt database) stamps every part it inserts
    with the time of the import, which would put a restored turn's parts after the turns
    that followed it."""
    rows: dict[str, dict] = {}
    for record in records:
        try:
            row = json.loads(record.raw)
        except ValueError:
            continue
        if isinstance(row, dict):
            key = row_key(row)
            first = rows.get(key, {}).get("time_created")
            if _earlier(first, row.get("time_created")):
                row = {**row, "time_created": first}
            rows[key] = row
    return list(rows.values())


def _earlier(first, then) -> bool:
    return type(first) in (int, float) and type(then) in (int, float) and first < then


def row_data(row: dict) -> dict:
    try:
        data = json.loads(row.get("data") or "{}")
    except (TypeError, ValueError, RecursionError):
        return {}
    return data if isinstance(data, dict) else {}


def row_order(row: dict) -> tuple:
    """Creation time, then id; a value of another type (a damaged row) sorts first."""
    created, ident = row.get("time_created"), row.get("id")
    return (created if type(created) in (int, float) else 0, ident if type(ident) is str else "")




# ---- repairing an export before `opencode import` --------------------------------------------

def repair_export(export: dict, call_id: str, text: str) -> dict:
    """A copy of the export with the tool part of `call_id` closed as an error carrying
    dh's text, so the resumed model reads it instead of OpenCode's own "[Tool execution was
    interrupted]". Only an open part (pending/running) or one OpenCode itself marked
    interrupted is touched: a finished result is never overwritten."""
    repaired = copy.deepcopy(export)
    for message in repaired.get("messages") or []:
        for part in message.get("parts") or []:
            if part.get("type") == "tool" and part.get("callID") == call_id and _open(part):
                part["state"] = error_state(part.get("state") or {}, text)
    return repaired


def _open(part: dict) -> bool:
    state = part.get("state") or {}
    interrupted = (state.get("metadata") or {}).get("interrupted")
    return state.get("status") in OPEN_TOOL_STATES or \
        (state.get("status") == "error" and bool(interrupted))


def error_state(state: dict, text: str) -> dict:
    """OpenCode's error state: input and start time kept, the end stamped now if unknown.
    Both times must be numbers: a part closed while still `pending` has none, and
    `opencode import` refuses a null one ("Expected number, got null at state.time.start",
    1.18.33), so a session whose home is lost would not come back."""
    times = state.get("time") or {}
    now = time.time_ns() // 1_000_000
    start = _ms(times.get("start"), now)
    return {"status": "error", "input": state.get("input") or {}, "error": text,
            "time": {"start": start, "end": _ms(times.get("end"), max(now, start))}}


def _ms(value, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def numbered_tool_times(export: dict) -> dict:
    """The export (changed in place) with each closed tool part's missing times filled from
    its message's creation: a log may hold parts an earlier dh closed while pending, with
    null times, which `opencode import` refuses."""
    for message in export.get("messages") or []:
        created = _ms(((message.get("info") or {}).get("time") or {}).get("created"), 0)
        for part in message.get("parts") or []:
            state = part.get("state")
            if part.get("type") != "tool" or not isinstance(state, dict) or \
                    state.get("status") not in ("error", "completed"):
                continue
            times = state.get("time") if isinstance(state.get("time"), dict) else {}
            start = _ms(times.get("start"), created)
            state["time"] = {**times, "start": start, "end": _ms(times.get("end"), start)}
    return export


def drop_empty_assistant(export: dict) -> dict:
    """A copy of the export without its trailing assistant messages that hold only a
    `step-start` part: the step a kill cut before any output. OpenCode skips them on
    resume anyway; dropping them keeps the rebuilt session clean."""
    trimmed = copy.deepcopy(export)
    messages = trimmed.get("messages") or []
    while messages and _empty_assistant(messages[-1]):
        messages.pop()
    return trimmed


def _empty_assistant(message: dict) -> bool:
    info = message.get("info") or {}
    kinds = {p.get("type") for p in message.get("parts") or []}
    return info.get("role") == "assistant" and kinds <= {"step-start"}
