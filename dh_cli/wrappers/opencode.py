"""OpenCode: every session lives in one SQLite database (`opencode.db`, WAL). dh logs each
version of each row of the session (`session`, `message`, `part`, `event`, …) as one record:
a JSON line `{"table": …, <columns>}`. The latest version of a row is its current state."""

from __future__ import annotations

import json
from pathlib import Path

from .. import paths
from ..models import Parsed, Record, ToolCall, ToolResult
from .base import NativeSession, NativeSource, TurnState, Wrapper

FINAL_FINISH = {"stop", "length", "end_turn"}
OPEN_TOOL_STATES = {"pending", "running"}


def row_key(row: dict) -> str:
    ident = row.get("id") or row.get("aggregate_id") or row.get("session_id") or ""
    return f"{row.get('table')}/{ident}" if row.get("table") != "todo" else \
        f"todo/{row.get('session_id')}/{row.get('position')}"


def latest_rows(records: list[Record]) -> list[dict]:
    """The current version of every row, in first-seen order."""
    rows: dict[str, dict] = {}
    for record in records:
        try:
            row = json.loads(record.raw)
        except ValueError:
            continue
        if isinstance(row, dict):
            key = row_key(row)
            rows[key] = row
    return list(rows.values())


def row_data(row: dict) -> dict:
    try:
        data = json.loads(row.get("data") or "{}")
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


class OpenCodeWrapper(Wrapper):
    name = "opencode"
    binary = "opencode"
    source_kind = "opencode"

    def home(self, env: dict | None = None) -> Path:
        """For OpenCode the 'home' is its database file."""
        return paths.opencode_db(env)

    def watch_root(self, home: Path) -> Path:
        return self.db_file(home).parent

    def locate(self, home: Path, native_id: str | None, native_path: Path | None):
        return self.find(home, native_id) if native_id else None

    @staticmethod
    def db_file(home: Path) -> Path:
        return home / "opencode.db" if home.is_dir() else home

    def discover(self, home: Path) -> list[NativeSession]:
        from ..mirror.opencode_db import list_sessions

        db = self.db_file(home)
        return [NativeSession(sid, db, directory, [NativeSource("opencode", db, "opencode.db")])
                for sid, directory in list_sessions(db)]

    def find(self, home: Path, ref: str) -> NativeSession | None:
        return next((s for s in self.discover(home) if s.harness_session_id == ref), None)

    def parse_obj(self, obj: dict) -> Parsed:
        table = obj.get("table")
        parsed = Parsed(kind="meta", native_id=row_key(obj))
        if table == "message":
            self._message(obj, row_data(obj), parsed)
        elif table == "part":
            self._part(obj, row_data(obj), parsed)
        return parsed

    def _message(self, row: dict, data: dict, parsed: Parsed) -> None:
        parsed.role = data.get("role")
        parsed.msg_id = row.get("id")
        parsed.parent_id = data.get("parentID")
        parsed.ts = str(row.get("time_created"))
        if parsed.role == "user":
            parsed.kind, parsed.turn_start = "user", True
            return
        parsed.kind = "assistant"
        parsed.model = data.get("modelID")
        parsed.stop_reason = data.get("finish")
        tokens = data.get("tokens")
        if isinstance(tokens, dict):
            cache = tokens.get("cache") or {}
            parsed.usage = {"input": tokens.get("input", 0), "output": tokens.get("output", 0),
                            "cache_read": cache.get("read", 0), "cache_write": cache.get("write", 0)}

    def _part(self, row: dict, data: dict, parsed: Parsed) -> None:
        parsed.parent_id = row.get("message_id")
        parsed.ts = str(row.get("time_created"))
        kind = data.get("type")
        if kind == "text":
            parsed.kind, parsed.text = "text", data.get("text") or ""
        elif kind == "tool":
            state = data.get("state") or {}
            call = ToolCall(data.get("callID", ""), data.get("tool", ""), state.get("input"))
            parsed.kind = "tool_call"
            parsed.tool_calls.append(call)
            status = state.get("status")
            if status in ("completed", "error"):
                text = state.get("output") if status == "completed" else state.get("error")
                parsed.tool_results.append(ToolResult(call.id, status == "error", str(text or "")))
        else:
            parsed.kind = "other"

    def conversation(self, records: list[Record]) -> list[Parsed]:
        rows = [r for r in latest_rows(records) if r.get("table") in ("message", "part")]
        rows.sort(key=lambda r: (r.get("time_created") or 0, r.get("id") or ""))
        return [self.parse_obj(row) for row in rows]

    def turn_state(self, records: list[Record]) -> TurnState:
        parsed = self.conversation(records)
        dangling = [c for p in parsed for c in p.tool_calls if not p.tool_results]
        started = any(p.kind == "user" for p in parsed)
        return TurnState(self.is_complete(parsed) and not dangling, dangling, started)

    def is_complete(self, parsed: list[Parsed]) -> bool:
        messages = [p for p in parsed if p.kind in ("user", "assistant")]
        return bool(messages) and messages[-1].kind == "assistant" and \
            messages[-1].stop_reason in FINAL_FINISH
