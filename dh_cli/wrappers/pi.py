"""Pi: one session JSONL, line 1 a `session` header, then entries `{type, id, parentId, …}`.
The leaf is the last entry in file order. Messages are written only once complete."""

from __future__ import annotations

import json
from pathlib import Path

from .. import paths
from ..models import Parsed, ToolCall, ToolResult
from .base import NativeSession, NativeSource, Wrapper, text_of

FINAL_STOPS = {"stop", "length"}


def pi_session_dir_name(cwd: str) -> str:
    """Pi's default folder for a cwd: leading '/' dropped, '/', '\\' and ':' become '-'."""
    inner = cwd.lstrip("/")
    for ch in "/\\:":
        inner = inner.replace(ch, "-")
    return f"--{inner}--"


def read_header(path: Path) -> dict:
    try:
        with open(path, "rb") as handle:
            obj = json.loads(handle.readline())
    except (OSError, ValueError):
        return {}
    return obj if isinstance(obj, dict) and obj.get("type") == "session" else {}


class PiWrapper(Wrapper):
    name = "pi"
    binary = "pi"

    def home(self, env: dict | None = None) -> Path:
        return paths.pi_home(env)

    def discover(self, home: Path) -> list[NativeSession]:
        found = []
        for path in sorted((home / "sessions").glob("*/*.jsonl")):
            header = read_header(path)
            native = header.get("id") or path.stem.rsplit("_", 1)[-1]
            source = NativeSource("jsonl", path, str(path.relative_to(home)))
            found.append(NativeSession(native, home, header.get("cwd"), [source]))
        return found

    def _sessions_at(self, home: Path, path: Path) -> list[NativeSession]:
        header = read_header(path)
        rel = str(path.relative_to(home)) if path.is_relative_to(home) else path.name
        native = header.get("id") or path.stem.rsplit("_", 1)[-1]
        return [NativeSession(native, home, header.get("cwd"), [NativeSource("jsonl", path, rel)])]

    def parse_obj(self, obj: dict) -> Parsed:
        kind = obj.get("type")
        parsed = Parsed(kind="meta", native_id=obj.get("id"), parent_id=obj.get("parentId"),
                        ts=obj.get("timestamp"))
        if kind == "message" and isinstance(obj.get("message"), dict):
            self._message(obj["message"], parsed)
        elif kind in ("compaction", "branch_summary"):
            parsed.kind = "compaction"
            parsed.text = obj.get("summary") or ""
        return parsed

    def _message(self, message: dict, parsed: Parsed) -> None:
        role = message.get("role")
        parsed.role = role
        content = message.get("content")
        parsed.text = text_of(content)
        if role == "user":
            parsed.kind = "user"
            parsed.turn_start = True
        elif role == "assistant":
            self._assistant(message, parsed)
        elif role == "toolResult":
            parsed.kind = "tool_result"
            parsed.tool_results.append(ToolResult(message.get("toolCallId", ""),
                                                  bool(message.get("isError")), parsed.text))
        else:
            parsed.kind = "other"

    def _assistant(self, message: dict, parsed: Parsed) -> None:
        for block in message.get("content") or []:
            if isinstance(block, dict) and block.get("type") == "toolCall":
                parsed.tool_calls.append(ToolCall(block.get("id", ""), block.get("name", ""),
                                                  block.get("arguments")))
        parsed.kind = "tool_call" if parsed.tool_calls else "assistant"
        parsed.model = message.get("model")
        parsed.msg_id = message.get("responseId")
        parsed.stop_reason = message.get("stopReason")
        usage = message.get("usage")
        if isinstance(usage, dict):
            parsed.usage = {"input": usage.get("input", 0), "output": usage.get("output", 0),
                            "cache_read": usage.get("cacheRead", 0),
                            "cache_write": usage.get("cacheWrite", 0)}

    def is_complete(self, parsed: list[Parsed]) -> bool:
        turns = [p for p in parsed if p.kind in ("user", "assistant", "tool_call", "tool_result")]
        return bool(turns) and turns[-1].kind == "assistant" and turns[-1].stop_reason in FINAL_STOPS
