"""Claude Code: one transcript JSONL per session under `projects/<slug>/<id>.jsonl` in
`$CLAUDE_CONFIG_DIR` (or ~/.claude), plus subagent transcripts beside it. A streamed assistant
message is one row per content block, all sharing `message.id` and the final usage."""

from __future__ import annotations

import json
import os
import re
import uuid
from pathlib import Path

from .. import paths
from ..models import Parsed, Record, ToolCall, ToolResult
from .base import LaunchPlan, NativeSession, NativeSource, Wrapper, regular_file, text_of
from .common import (PRINT_FLAGS, flag_name, headless_flags, iso_now, json_line, json_objects,
                     options, parse_argv, prompt_tail, stdout_object, with_flags)

META_TYPES = {"queue-operation", "last-prompt", "mode", "attachment", "file-history-snapshot",
              "custom-title", "ai-title", "progress", "permission-mode", "tag", "agent-name"}
FINAL_STOPS = {"end_turn", "stop_sequence", "max_tokens", "refusal"}
VALUE_FLAGS = frozenset({
    "--model", "--output-format", "--input-format", "--session-id", "--resume", "-r",
    "--permission-mode", "--allowedTools", "--allowed-tools", "--disallowedTools",
    "--disallowed-tools", "--append-system-prompt", "--system-prompt", "--max-turns",
    "--mcp-config", "--settings", "--add-dir", "--fallback-model", "--agents", "--agent",
    "--betas", "--setting-sources", "--max-budget-usd", "--json-schema", "--resume-session-at",
    "--tools", "--plugin-dir", "--permission-prompt-tool", "--append-system-prompt-file",
    "--system-prompt-file"})
# commander `<values...>` options: they also take the bare words that follow them
VARIADIC_FLAGS = frozenset({"--allowedTools", "--allowed-tools", "--disallowedTools",
                            "--disallowed-tools", "--add-dir", "--mcp-config", "--betas",
                            "--tools", "--plugin-dir"})
RESUMING_FLAGS = {"--resume", "-r", "--continue", "-c"}
# flags that pick or fork the session: a relaunch names the session itself instead
SESSION_FLAGS = RESUMING_FLAGS | {"--session-id", "--fork-session", "--resume-session-at"}
MAX_SLUG = 200
SESSION_FIELDS = ("userType", "entrypoint", "cwd", "sessionId", "version", "gitBranch")


def project_slug(cwd: str) -> str:
    """Claude's folder name for a cwd: every character outside [A-Za-z0-9] becomes '-'."""
    return re.sub(r"[^A-Za-z0-9]", "-", cwd)


def first_cwd(path: Path, max_lines: int = 50) -> str | None:
    if not regular_file(path):
        return None
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

    def document_edit(self, call: ToolCall, result: ToolResult):
        from .documents import claude_edit

        return claude_edit(call, result)

    def write_documents(self, home: Path, native_id: str, document) -> list[str]:
        from .documents import write_claude_tasks

        return write_claude_tasks(home, native_id, lambda: document("tasks"))

    def is_complete(self, parsed: list[Parsed]) -> bool:
        turns = [p for p in parsed if p.kind in ("user", "assistant", "tool_call", "tool_result")]
        if not turns:
            return False
        last = turns[-1]
        return last.kind == "assistant" and (last.stop_reason in FINAL_STOPS or last.synthetic)

    # launching and resuming ----------------------------------------------------------------
    value_flags = VALUE_FLAGS

    def _split(self, args: list[str]) -> tuple[list[list[str]], list[str]]:
        return parse_argv(args, self.value_flags, VARIADIC_FLAGS)

    def is_headless(self, args: list[str]) -> bool:
        return any(flag_name(g) in PRINT_FLAGS for g in self._split(args)[0])

    def plan_launch(self, args: list[str], cwd: str, home: Path) -> LaunchPlan:
        """Pin the session id up front with --session-id, so the transcript path is known
        before launch; a user who resumes (and does not fork) keeps the session they named."""
        groups, words = self._split(args)
        opts = options(groups)
        resuming = bool(RESUMING_FLAGS & opts.keys()) and "--fork-session" not in opts
        native_id = opts.get("--session-id") or \
            ((opts.get("--resume") or opts.get("-r")) if resuming else None)
        argv = list(args)
        if native_id is None and not resuming:
            native_id = str(uuid.uuid4())
            argv = with_flags(args, ["--session-id", native_id])
        return LaunchPlan(argv, self.is_headless(args), native_id,
                          self.transcript_path(home, cwd, native_id), " ".join(words) or None,
                          resuming)

    @staticmethod
    def transcript_path(home: Path, cwd: str, native_id: str | None) -> Path | None:
        """Where Claude writes the session. Slugs over 200 characters get a hash suffix dh
        does not recompute: None, and the caller globs `projects/*/<id>.jsonl`."""
        slug = project_slug(os.path.realpath(cwd))
        if native_id is None or len(slug) > MAX_SLUG:
            return None
        return Path(home) / "projects" / slug / f"{native_id}.jsonl"

    def id_from_output(self, line: bytes) -> str | None:
        """stream-json's first line, `system/init`, names the session."""
        obj = stdout_object(line, b'"init"')
        if not obj or obj.get("type") != "system" or obj.get("subtype") != "init":
            return None
        sid = obj.get("session_id")
        return sid if isinstance(sid, str) and sid else None

    def resume_args(self, original: list[str], native_id: str, native_path: str | None,
                    prompt: str | None, headless: bool) -> list[str]:
        """`[flags…] --resume <id> <prompt>`: the user's flags minus the ones that chose or
        forked a session, and minus the old prompt. Claude finds the file by cwd, so the
        path is not passed; headless it needs a prompt."""
        groups, _ = self._split(original)
        flags = headless_flags(groups, SESSION_FLAGS, headless)
        return [*flags, "--resume", native_id, *prompt_tail(prompt)]

    # repairing a cut tool call -------------------------------------------------------------
    def repair_lines(self, records: list[Record], call: ToolCall, text: str) -> list[bytes]:
        """A `user` tool_result row (is_error) for a dangling tool_use, chained after the
        current leaf so Claude keeps the step instead of dropping the call and asking the
        model again. Nothing when the call is on a branch the conversation has left."""
        rows = [r for r in json_objects(records) if r.get("uuid")]
        source = next((r for r in rows if _holds_tool_use(r, call.id)), None)
        if source is None or not _leaf_follows(rows, source):
            return []
        return [json_line(self._result_row(rows, source, call.id, text))]

    @staticmethod
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
