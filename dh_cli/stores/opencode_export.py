"""Build the JSON that `opencode export` prints (and `opencode import` loads) from the latest
version of each logged row: `{"info": <session>, "messages": [{"info", "parts"}]}`."""

from __future__ import annotations

import json

from ..errors import NativeStateError
from ..models import Record
from ..wrappers.opencode_rows import latest_rows, row_data


def _json_or(value, fallback=None):
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return fallback
    return value if value is not None else fallback


def _number(value):
    return int(value) if isinstance(value, float) and value.is_integer() else value


def session_info(row: dict) -> dict:
    info = {"id": row["id"], "slug": row.get("slug"), "projectID": row.get("project_id")}
    optional = {"workspaceID": row.get("workspace_id"), "parentID": row.get("parent_id")}
    info.update({k: v for k, v in optional.items() if v is not None})
    info.update({"directory": row.get("directory"), "path": row.get("path"), "title": row.get("title")})
    for key in ("agent",):
        if row.get(key) is not None:
            info[key] = row[key]
    if row.get("model") is not None:
        info["model"] = _json_or(row["model"])
    info["version"] = row.get("version")
    info["summary"] = {"additions": row.get("summary_additions") or 0,
                       "deletions": row.get("summary_deletions") or 0,
                       "files": row.get("summary_files") or 0}
    if row.get("summary_diffs") is not None:
        info["summary"]["diffs"] = _json_or(row["summary_diffs"])
    info["cost"] = _number(row.get("cost") or 0)
    info["tokens"] = {"input": row.get("tokens_input") or 0, "output": row.get("tokens_output") or 0,
                      "reasoning": row.get("tokens_reasoning") or 0,
                      "cache": {"read": row.get("tokens_cache_read") or 0,
                                "write": row.get("tokens_cache_write") or 0}}
    _copy_json(row, info, {"share_url": "share", "metadata": "metadata", "revert": "revert",
                           "permission": "permission"})
    info["time"] = {"created": row.get("time_created"), "updated": row.get("time_updated")}
    for column, key in (("time_compacting", "compacting"), ("time_archived", "archived")):
        if row.get(column) is not None:
            info["time"][key] = row[column]
    return info


def _copy_json(row: dict, info: dict, mapping: dict) -> None:
    for column, key in mapping.items():
        if row.get(column) is None:
            continue
        value = row[column]
        info[key] = {"url": value} if column == "share_url" else _json_or(value, value)


def build_export(records: list[Record], session_id: str) -> dict:
    rows = latest_rows(records)
    session = next((r for r in rows if r.get("table") == "session" and r.get("id") == session_id), None)
    if session is None:
        raise NativeStateError(f"no session row for OpenCode session {session_id!r} in the log")
    messages = sorted((r for r in rows if r.get("table") == "message"),
                      key=lambda r: (r.get("time_created") or 0, r["id"]))
    parts = sorted((r for r in rows if r.get("table") == "part"), key=lambda r: r["id"])
    by_message: dict[str, list] = {}
    for part in parts:
        by_message.setdefault(part["message_id"], []).append(
            {**row_data(part), "id": part["id"], "sessionID": part["session_id"],
             "messageID": part["message_id"]})
    return {"info": session_info(session),
            "messages": [{"info": {**row_data(m), "id": m["id"], "sessionID": m["session_id"]},
                          "parts": by_message.get(m["id"], [])} for m in messages]}
