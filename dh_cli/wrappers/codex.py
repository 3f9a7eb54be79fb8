"""Codex CLI: a rollout JSONL per thread under `$CODEX_HOME/sessions/YYYY/MM/DD/`, each line
`{timestamp, ordinal, type, payload[, metadata]}`. Tool calls and outputs are Responses-API
items joined by `call_id`; a turn is bracketed by event_msg task_started / task_complete."""

from __future__ import annotations

import json
import re
from pathlib import Path

from .. import paths
from ..models import Parsed, ToolCall, ToolResult
from .base import NativeSession, NativeSource, Wrapper, text_of

CALL_TYPES = {"function_call", "custom_tool_call", "local_shell_call"}
OUTPUT_TYPES = {"function_call_output", "custom_tool_call_output", "local_shell_call_output"}
ROLLOUT_RE = re.compile(r"rollout-.*-([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})\.jsonl$")


def _session_meta(path: Path) -> dict:
    try:
        with open(path, "rb") as handle:
            obj = json.loads(handle.readline())
    except (OSError, ValueError):
        return {}
    return obj.get("payload", {}) if isinstance(obj, dict) and obj.get("type") == "session_meta" else {}


class CodexWrapper(Wrapper):
    name = "codex"
    binary = "codex"

    def home(self, env: dict | None = None) -> Path:
        return paths.codex_home(env)

    def discover(self, home: Path) -> list[NativeSession]:
        found = []
        for rollout in sorted((home / "sessions").glob("*/*/*/rollout-*.jsonl")):
            match = ROLLOUT_RE.search(rollout.name)
            meta = _session_meta(rollout)
            thread = meta.get("id") or (match.group(1) if match else rollout.stem)
            source = NativeSource("jsonl", rollout, str(rollout.relative_to(home)))
            found.append(NativeSession(thread, home, meta.get("cwd"), [source]))
        return found

    def find(self, home: Path, ref: str) -> NativeSession | None:
        for rollout in sorted((home / "sessions").glob(f"*/*/*/rollout-*-{ref}.jsonl")):
            meta = _session_meta(rollout)
            return NativeSession(ref, home, meta.get("cwd"),
                                 [NativeSource("jsonl", rollout, str(rollout.relative_to(home)))])
        return super().find(home, ref) if Path(ref).exists() else None

    def parse_obj(self, obj: dict) -> Parsed:
        payload = obj.get("payload") if isinstance(obj.get("payload"), dict) else {}
        parsed = Parsed(kind="meta", ts=obj.get("timestamp"), native_id=payload.get("id"))
        kind = obj.get("type")
        if kind == "response_item":
            self._item(payload, parsed)
        elif kind == "event_msg":
            subtype = payload.get("type")
            parsed.turn_start = subtype == "task_started"
            parsed.turn_end = subtype in ("task_complete", "turn_aborted")
            if subtype == "task_complete":
                parsed.text = payload.get("last_agent_message") or ""
        elif kind == "token_usage_record":
            usage = payload.get("usage") or {}
            parsed.msg_id = payload.get("response_id")
            parsed.usage = {"input": usage.get("input_tokens", 0), "output": usage.get("output_tokens", 0),
                            "cache_read": usage.get("cached_input_tokens", 0),
                            "cache_write": usage.get("cache_write_input_tokens", 0)}
        elif kind == "compacted":
            parsed.kind = "compaction"
        return parsed

    def _item(self, payload: dict, parsed: Parsed) -> None:
        item = payload.get("type")
        if item == "message":
            role = payload.get("role")
            parsed.role = role
            parsed.text = text_of(payload.get("content"))
            context = parsed.text.startswith("<environment_context>")
            parsed.kind = {"user": "user", "assistant": "assistant"}.get(role, "meta")
            parsed.synthetic = context
            if context:
                parsed.kind = "meta"
        elif item in CALL_TYPES:
            parsed.kind = "tool_call"
            name = payload.get("name") or item
            args = payload.get("arguments", payload.get("input", payload.get("action")))
            parsed.tool_calls.append(ToolCall(payload.get("call_id", ""), name, args))
        elif item in OUTPUT_TYPES:
            parsed.kind = "tool_result"
            output = payload.get("output")
            text = output if isinstance(output, str) else json.dumps(output)
            parsed.tool_results.append(ToolResult(payload.get("call_id", ""), False, text))
        elif item == "reasoning":
            parsed.kind = "other"

    def is_complete(self, parsed: list[Parsed]) -> bool:
        for p in reversed(parsed):
            if p.turn_end:
                return True
            if p.turn_start:
                return False
        return False
