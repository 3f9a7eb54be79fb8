"""Claude Code: one transcript JSONL per session under `projects/<slug>/<id>.jsonl` in
`$CLAUDE_CONFIG_DIR` (or ~/.claude), plus subagent transcripts beside it. A streamed assistant
message is one row per content block, all sharing `message.id` and the final usage."""

from __future__ import annotations

import json
import re
from pathlib import Path

from .. import paths
from ..models import Parsed, ToolCall, ToolResult
from .base import NativeSession, NativeSource, Wrapper, text_of

META_TYPES = {"queue-operation", "last-prompt", "mode", "attachment", "file-history-snapshot",
              "custom-title", "ai-title", "progress", "permission-mode", "tag", "agent-name"}
FINAL_STOPS = {"end_turn", "stop_sequence", "max_tokens", "refusal"}


def project_slug(cwd: str) -> str:
    """Claude's folder name for a cwd: every character outside [A-Za-z0-9] becomes '-'."""
    return re.sub(r"[^A-Za-z0-9]", "-", cwd)


def first_cwd(path: Path, max_lines: int = 50) -> str | None:
    try:
        with open(path, "rb") as handle:
            for _, line in zip(range(max_lines), handle):
                try:
                    obj = json.loads(line)
                except ValueError:
                    continue
                if isinstance(obj, dict) and isinstance(obj.get("cwd"), str):
                    return obj["cwd"]
    except OSError:
        return None
    return None


class ClaudeWrapper(Wrapper):
    name = "claude-code"
    aliases = ("claude",)
    binary = "claude"

    def home(self, env: dict | None = None) -> Path:
        return paths.claude_home(env)

    def discover(self, home: Path) -> list[NativeSession]:
        found = []
        for transcript in sorted((home / "projects").glob("*/*.jsonl")):
            found.append(self._session(home, transcript))
        return found

    def _session(self, home: Path, transcript: Path) -> NativeSession:
        sources = [NativeSource("jsonl", transcript, str(transcript.relative_to(home)))]
        side = transcript.with_suffix("") / "subagents"
        for extra in sorted(side.glob("*")) if side.is_dir() else []:
            kind = "jsonl" if extra.suffix == ".jsonl" else "file"
            sources.append(NativeSource(kind, extra, str(extra.relative_to(home))))
        return NativeSession(transcript.stem, home, first_cwd(transcript), sources)

    def watch_root(self, home: Path) -> Path:
        return home / "projects"

    def _sessions_at(self, home: Path, path: Path) -> list[NativeSession]:
        return [self._session(home, path)]

    def find(self, home: Path, ref: str) -> NativeSession | None:
        for transcript in (home / "projects").glob(f"*/{ref}.jsonl"):
            return self._session(home, transcript)
        return super().find(home, ref) if Path(ref).exists() else None

    def parse_obj(self, obj: dict) -> Parsed:
        kind = obj.get("type")
        parsed = Parsed(native_id=obj.get("uuid"), parent_id=obj.get("parentUuid"),
                        ts=obj.get("timestamp"))
        if kind == "user":
            self._user(obj, parsed)
        elif kind == "assistant":
            self._assistant(obj, parsed)
        elif kind == "summary" or (kind == "system" and obj.get("subtype") == "compact_boundary"):
            parsed.kind = "compaction"
        else:
            parsed.kind = "meta"
        return parsed

    def _user(self, obj: dict, parsed: Parsed) -> None:
        message = obj.get("message") or {}
        content = message.get("content")
        parsed.role = "user"
        parsed.synthetic = bool(obj.get("isMeta"))
        blocks = content if isinstance(content, list) else []
        for block in blocks:
            if isinstance(block, dict) and block.get("type") == "tool_result":
                parsed.tool_results.append(ToolResult(
                    block.get("tool_use_id", ""), bool(block.get("is_error")),
                    text_of(block.get("content"))))
        parsed.kind = "tool_result" if parsed.tool_results else "user"
        parsed.text = text_of(content) if not parsed.tool_results else ""
        parsed.turn_start = parsed.kind == "user" and not parsed.synthetic

    def _assistant(self, obj: dict, parsed: Parsed) -> None:
        message = obj.get("message") or {}
        parsed.role = "assistant"
        parsed.model = message.get("model")
        parsed.msg_id = message.get("id")
        parsed.stop_reason = message.get("stop_reason")
        parsed.synthetic = parsed.model == "<synthetic>"
        for block in message.get("content") or []:
            if isinstance(block, dict) and block.get("type") == "tool_use":
                parsed.tool_calls.append(ToolCall(block.get("id", ""), block.get("name", ""),
                                                  block.get("input")))
        parsed.text = text_of(message.get("content"))
        parsed.kind = "tool_call" if parsed.tool_calls else "assistant"
        usage = message.get("usage")
        if isinstance(usage, dict) and not parsed.synthetic:
            parsed.usage = {"input": usage.get("input_tokens", 0), "output": usage.get("output_tokens", 0),
                            "cache_read": usage.get("cache_read_input_tokens", 0),
                            "cache_write": usage.get("cache_creation_input_tokens", 0)}

    def is_complete(self, parsed: list[Parsed]) -> bool:
        turns = [p for p in parsed if p.kind in ("user", "assistant", "tool_call", "tool_result")]
        if not turns:
            return False
        last = turns[-1]
        return last.kind == "assistant" and (last.stop_reason in FINAL_STOPS or last.synthetic)
