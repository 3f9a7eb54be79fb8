"""Codex CLI: a rollout JSONL per thread under `$CODEX_HOME/sessions/YYYY/MM/DD/`, each line
`{timestamp, ordinal, type, payload[, metadata]}`. Tool calls and outputs are Responses-API
items joined by `call_id`; a turn is bracketed by event_msg task_started / task_complete.

What `codex exec resume <id>` / `codex resume <id>` reads (0.171.0), and what dh does:
- the rollout `sessions/YYYY/MM/DD/rollout-<time>-<id>.jsonl`, looked up through the
  `threads` row of `state_5.sqlite` and, without one, by its file name: mirrored, rebuilt
  byte-exact at its path (the file name carries the id);
- `state_5.sqlite` (`threads.rollout_path`), `thread_history_1.sqlite` (byte offsets into
  the rollout), `logs_2`/`goals_1`/`memories_1`/`queue_1.sqlite`: Codex's own indexes of
  the rollouts. dh does not write them; with them gone Codex rebuilds them from the rollout
  (seen: the whole `$CODEX_HOME` deleted but `config.toml`, the rebuilt rollout alone
  resumed the thread with no finished reply asked again);
- `config.toml` (the user's provider and policy), `installation_id`, `skills/.system/`,
  `shell_snapshots/`: config, or made anew at start."""

from __future__ import annotations

import json
import os
import re
import time
import uuid
from pathlib import Path

from .. import paths
from ..models import Parsed, Record, ToolCall, ToolResult
from ..tokens import counts, whole
from .base import (UUID_SHAPE, LaunchPlan, NativeSession, NativeSource, Wrapper, load_json, regular_file,
                   split_args, text_of)
from .common import (iso_now, json_line, json_objects, kept_flags, options, parse_argv,
                     prompt_tail, stdout_object)
from .codex_grants import CodexGrants
from .codex_index import CodexSessionPlaces
from .identity import modified_since, same_dir
from .limits import Limit, limit, reset_after

CALL_TYPES = {"function_call", "custom_tool_call", "local_shell_call"}
OUTPUT_TYPES = {"function_call_output", "custom_tool_call_output", "local_shell_call_output"}
# output item for each call item (a local shell call is answered like a function call)
OUTPUT_FOR = {"function_call": ("function_call_output", "fco"),
              "custom_tool_call": ("custom_tool_call_output", "ctco"),
              "local_shell_call": ("function_call_output", "fco")}
VALUE_FLAGS = frozenset({
    "-m", "--model", "-c", "--config", "-C", "--cd", "-s", "--sandbox", "-p", "--profile",
    "-i", "--image", "-o", "--output-last-message", "--output-schema", "--color", "--add-dir",
    "-a", "--ask-for-approval", "--local-provider", "--enable", "--disable", "--remote",
    "--remote-auth-token-env", "--thread-source", "--cyber-access-program"})  # 0.171.0's --help
EXEC_WORDS = {"exec", "e"}
# The TUI (0.157 on) runs its agent in one app-server daemon per Codex home, which every TUI of
# that home shares and which outlives them (seen with 0.171.0: a second TUI attached to the
# first one's daemon, and with dh and the TUI killed the daemon ran the rest of the turn
# alone). Under dh the agent runs in the TUI's own process: it ends with the TUI, and one
# TUI's crash cuts no other session's turn. A command line that names the feature keeps it.
AGENT_IN_PROCESS = ["-c", "features.daemon_auto_start=false"]
# --last/--all pick a session themselves; images belong to the prompt already in the history
RESUME_DROP = {"--last", "--all", "-i", "--image"}
# the records that carry the cwd, and the keys under which they do (carries_cwd)
CODEX_META = {"session_meta", "turn_context", "world_state", "event_msg"}
CODEX_KEYS = {"cwd", "runtime_workspace_roots", "writable_roots", "workspace_roots", "filesystem"}
ROLLOUT_RE = re.compile(r"rollout-.*-([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})\.jsonl$")


def _session_meta(path: Path) -> dict:
    if not regular_file(path):
        return {}
    try:
        with open(path, "rb") as handle:
            obj = json.loads(handle.readline())
    except (OSError, ValueError):
        return {}
    return obj.get("payload", {}) if isinstance(obj, dict) and obj.get("type") == "session_meta" else {}


def codex_usage(usage: dict) -> dict:
    """OpenAI's usage in dh's vocabulary (tokens.py): `input_tokens` counts the cached reads and
    writes too, and `output_tokens` the reasoning ones, so both are taken out once here."""
    read, write = whole(usage.get("cached_input_tokens")), whole(usage.get("cache_write_input_tokens"))
    return counts(input=max(0, whole(usage.get("input_tokens")) - read - write), cache_read=read,
                  cache_write=write, output=whole(usage.get("output_tokens")),
                  reasoning=whole(usage.get("reasoning_output_tokens")))


class CodexWrapper(CodexSessionPlaces, CodexGrants, Wrapper):
    name = "codex"
    native_id_shape = UUID_SHAPE  # the thread id (a UUIDv7 in the pinned 0.171)
    binary = "codex"

    def first_record_ok(self, obj: dict) -> bool:
        return obj.get("type") == "session_meta"  # a rollout starts with it

    tried_versions = ("0.171.0", "0.171.0")  # also the newest on npm here (2026-12-01)
    packages = ("@openai/codex",)
    layout_depth = (5, "sessions")  # sessions/YYYY/MM/DD/rollout-….jsonl
    safe_tools = frozenset({"update_plan", "view_image", "get_goal"})

    def carries_cwd(self, obj: dict, path: tuple) -> bool:
        """Settings records (session_meta, turn_context, world_state, event_msg): values under a
        cwd or workspace-roots key; and the environment_context message sent to the model."""
        if obj.get("type") in CODEX_META:
            return any(key in CODEX_KEYS for key in path if isinstance(key, str))
        payload = obj.get("payload") if isinstance(obj.get("payload"), dict) else {}
        return obj.get("type") == "response_item" and payload.get("type") == "message" and \
            path[:2] == ("payload", "content") and path[-1:] == ("text",)

    def home(self, env: dict | None = None) -> Path:
        return paths.codex_home(env)

    def discover(self, home: Path) -> list[NativeSession]:
        found = []
        for rollout in sorted((home / "sessions").glob("*/*/*/rollout-*.jsonl")):
            found.extend(self._sessions_at(home, rollout))
        return found

    def _sessions_at(self, home: Path, path: Path) -> list[NativeSession]:
        match, meta = ROLLOUT_RE.search(path.name), _session_meta(path)
        thread = meta.get("id") or (match.group(1) if match else path.stem)
        rel = str(path.relative_to(home)) if path.is_relative_to(home) else path.name
        return [NativeSession(thread, home, meta.get("cwd"), [NativeSource("jsonl", path, rel)])]

    def watch_folders(self, home: Path) -> list[Path]:
        """`sessions/` and the dated folders a rollout started now goes into (local date,
        YYYY/MM/DD): the rollout is three folders down, where a watch on `sessions/` alone
        sees nothing (seen: 2 of 16 records logged 0.5 s after they were written, the rest
        only at the next 5 s poll). Dated folders created later are watched as they appear."""
        root = self.watch_root(home)
        chain = [root]
        for part in time.strftime("%Y/%m/%d").split("/"):
            chain.append(chain[-1] / part)
        return [folder for folder in chain if folder.is_dir()] or [root]

    def recent_sessions(self, home: Path, cwd: str, since: float) -> list[NativeSession]:
        """Rollouts in the dated folders of yesterday, today and tomorrow (Codex names them
        by local date) written since `since`, for cwd (the session_meta line's), oldest
        first by the creation time in their names."""
        now, found = time.time(), []
        for day in {time.strftime("%Y/%m/%d", time.localtime(now + d * 86400)) for d in (-1, 0, 1)}:
            for rollout in (home / "sessions" / day).glob("rollout-*.jsonl"):
                if modified_since(rollout, since):
                    found.extend(s for s in self._sessions_at(home, rollout) if same_dir(s.cwd, cwd))
        return sorted(found, key=lambda s: s.sources[0].path.name)

    def find(self, home: Path, ref: str) -> NativeSession | None:
        for rollout in sorted((home / "sessions").glob(f"*/*/*/rollout-*-{ref}.jsonl")):
            return self._sessions_at(home, rollout)[0]
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
            # not turn_aborted: Codex writes it for any interruption, and when dh was killed
            # under `codex exec` it wrote "The user interrupted the previous turn on purpose"
            # too (0.171.0, seen in the soak): the turn was cut, and `dh resume` goes on
            parsed.turn_end = subtype == "task_complete"
            if subtype == "task_complete":
                parsed.text = payload.get("last_agent_message") or ""
        elif kind == "token_usage_record":
            usage = payload.get("usage") or {}
            parsed.msg_id = payload.get("response_id")
            parsed.usage = codex_usage(usage)
        elif kind == "turn_context":  # the model of the turn's calls (token records lack it)
            parsed.model = payload.get("model")
        elif kind == "compacted":
            parsed.kind = "compaction"
        return parsed

    def _item(self, payload: dict, parsed: Parsed) -> None:
        item = payload.get("type")
        if item == "message":
            role = payload.get("role")
            parsed.role = role
            parsed.text = text_of(payload.get("content"))
            context = parsed.text.startswith(("<environment_context>", "<turn_aborted>"))
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

    document_tools = frozenset({"update_plan"})  # wrappers/documents.py

    def document_edit(self, call: ToolCall, result: ToolResult):
        from .documents import codex_edit

        return codex_edit(call, result)

    def is_complete(self, parsed: list[Parsed]) -> bool:
        """The turn ended: task_complete, or — if Codex died before writing that — its last
        model response finished (its token usage was recorded) with an answer and no tool call."""
        for p in reversed(parsed):
            if p.turn_end:
                return True
            if p.turn_start:
                return False
            if p.usage is not None:
                return self._final_response(parsed[:parsed.index(p)])
            if p.kind in ("tool_call", "tool_result"):
                return False
        return False

    def limit_from(self, records: list[Record], now: float) -> Limit | None:
        """Codex 0.171.0 (`exec --json`, `request_max_retries = 0` as the tests configure it;
        Codex's own default retries a 429 four times first):
        - the ChatGPT-plan 429 `{"error":{"type":"usage_limit_reached","resets_at":…,
          "resets_in_seconds":…}}`: no retry; it prints `{"type":"error","message":"You’ve
          hit your usage limit. … try again at 2:16 PM."}` and `turn.failed`, writes a
          `task_complete` event whose `error` is that message with `"codex_error_info":
          "usage_limit_exceeded"`, and exits 1. The reset is only in the message, as a local
          time rounded down to the minute ("%-I:%M %p", or "%b %-d %-I:%M %p" on another
          day); its `token_count` events' `rate_limits` stay null against this server.
        - the API's 429 `rate_limit_exceeded` with `retry-after`: "exceeded retry limit, last
          status: 429 Too Many Requests" in the same two places, `codex_error_info:
          {"response_too_many_failed_attempts": {"http_status_code": 429}}`, exit 1; no reset."""
        payload = _last_step(records)
        error = payload.get("error") if payload.get("type") == "task_complete" else None
        if not isinstance(error, dict):
            return None
        info, text = error.get("codex_error_info"), str(error.get("message") or "")
        if info == "usage_limit_exceeded":
            return limit(info, "usage", reset_after(text, ("try again at",), now),
                         "rollout: task_complete error", text)
        failed = info.get("response_too_many_failed_attempts") if isinstance(info, dict) else None
        if isinstance(failed, dict) and failed.get("http_status_code") == 429:
            return limit("rate_limit", "rate", None, "rollout: task_complete error", text)
        return None

    @staticmethod
    def _final_response(before: list[Parsed]) -> bool:
        """The items of the response whose usage record follows `before`."""
        for p in reversed(before):
            if p.usage is not None or p.turn_start or p.kind in ("tool_result", "user"):
                return False
            if p.kind == "tool_call":
                return False
            if p.kind == "assistant":
                return True
        return False

    # launching and resuming ----------------------------------------------------------------
    value_flags = VALUE_FLAGS
    travels = frozenset({"-m", "--model", "--json", "--color"})
    command_words = frozenset(EXEC_WORDS | {"resume"})

    def _command(self, args: list[str]) -> tuple[int | None, list[str]]:
        """The index of the subcommand word (`exec`, `e` or `resume`; None for a plain
        interactive launch) and the positional words after it."""
        _, positional = split_args(args, self.value_flags)
        words = [args[i] for i in positional]
        if words and words[0] in EXEC_WORDS | {"resume"}:
            return positional[0], words[1:]
        return None, words

    def is_headless(self, args: list[str]) -> bool:
        index, _ = self._command(args)
        return index is not None and args[index] in EXEC_WORDS

    def plan_launch(self, args: list[str], cwd: str, home: Path) -> LaunchPlan:
        """Codex cannot be given a thread id: it is read later from `thread.started` or
        the new rollout. A user's own `resume <id>` names it, though."""
        if not self.is_headless(args) and not any("daemon_auto_start" in arg for arg in args):
            args = [*AGENT_IN_PROCESS, *args]
        index, words = self._command(args)
        headless, command = self.is_headless(args), args[index] if index is not None else None
        if headless and words[:1] == ["resume"]:
            command, words = "resume", words[1:]
        if command != "resume":
            return LaunchPlan(list(args), headless, prompt=" ".join(words) or None)
        by_last = "--last" in options(parse_argv(args, self.value_flags)[0])
        native_id = None if by_last or not words else words.pop(0)
        return LaunchPlan(list(args), headless, native_id, prompt=" ".join(words) or None,
                          resuming=True)

    def id_from_output(self, line: bytes) -> str | None:
        """`exec --json` prints `thread.started` first, before any model call."""
        obj = stdout_object(line, b"thread.started")
        if not obj or obj.get("type") != "thread.started":
            return None
        thread = obj.get("thread_id")
        return thread if isinstance(thread, str) and thread else None

    def resume_args(self, original: list[str], native_id: str, native_path: str | None,
                    prompt: str | None, headless: bool) -> list[str]:
        """Headless `exec <exec flags> resume <id> <prompt>` (exec options must come before
        `resume`); interactive `resume <flags> <id>`. Flags written before the subcommand
        stay there. Codex finds the rollout by id, so the path is not passed."""
        index, _ = self._command(original)
        cut = len(original) if index is None else index
        pre = kept_flags(parse_argv(original[:cut], self.value_flags)[0], RESUME_DROP)
        post = kept_flags(parse_argv(original[cut + 1:], self.value_flags)[0], RESUME_DROP)
        if index is None:
            pre, post = [], pre
        command = ["exec", *post, "resume"] if headless else ["resume", *post]
        return [*pre, *command, native_id, *prompt_tail(prompt)]

    # the harness's own processes ---------------------------------------------------------
    def harness_part(self, command: str, home: Path) -> bool:
        """The 0.171 TUI runs its agent in an app-server daemon it starts from
        `$CODEX_HOME/packages/app-server-daemon/releases/<version>/…/codex app-server …`
        (with a `daemon pid-update-loop` beside it), each in its own session, no tty. It is
        the harness, not a tool: killed with the TUI, the daemon ran the cut turn on unseen
        (seen: reply #1 completed, the write and read tools ran and the final reply came, all
        with no TUI), and `codex resume <id> <prompt>` attached to the live daemon and aborted
        that turn anyway. So dh freezes it (SIGSTOP) the moment the TUI is seen dead and ends it
        once the commands it runs had their grace: the turn is cut where the TUI was killed,
        as with the other harnesses, dh's repair tells the model how the cut command ended,
        and the resumed TUI starts a fresh daemon that reads the rollout. dh's own launches
        keep the agent in the TUI (AGENT_IN_PROCESS); this is for a user who keeps the daemon."""
        program, _, rest = command.partition(" ")
        daemons = str(Path(home) / "packages" / "app-server-daemon") + os.sep
        return program.startswith(daemons) and rest.startswith("app-server")

    # repairing a cut tool call -------------------------------------------------------------
    def repair_lines(self, records: list[Record], call: ToolCall, text: str) -> list[bytes]:
        """A `response_item` output for the dangling call with dh's text, next ordinal and
        history_sequence, so Codex sends it instead of its own synthetic "aborted".
        Nothing when a later user message shows the thread already moved past the call."""
        rows = json_objects(records)
        at = next((i for i, r in enumerate(rows) if _is_call(r, call.id)), None)
        if at is None or any(_is_user_message(r) for r in rows[at + 1:]):
            return []
        return [json_line(_output_record(rows, rows[at], text))]


def _last_step(records: list[Record]) -> dict:
    """The payload of the rollout's last item or event that is not a token count."""
    for record in reversed(records):
        obj, _ = load_json(record.raw)
        payload = obj.get("payload") if isinstance(obj, dict) else None
        if isinstance(payload, dict) and payload.get("type") != "token_count":
            return payload
    return {}


def _is_call(row: dict, call_id: str) -> bool:
    payload = row.get("payload") or {}
    return row.get("type") == "response_item" and payload.get("type") in CALL_TYPES \
        and payload.get("call_id") == call_id


def _is_user_message(row: dict) -> bool:
    payload = row.get("payload") or {}
    return row.get("type") == "response_item" and payload.get("type") == "message" \
        and payload.get("role") == "user" \
        and not text_of(payload.get("content")).startswith("<environment_context>")


def _output_record(rows: list[dict], call_row: dict, text: str) -> dict:
    """The output line in the shape Codex writes: ids and turn from the call, counters
    one past the highest in the file."""
    call = call_row["payload"]
    kind, prefix = OUTPUT_FOR.get(call.get("type"), OUTPUT_FOR["function_call"])
    turn = (call.get("internal_chat_message_metadata_passthrough") or {}).get("turn_id")
    payload = {"type": kind, "id": f"{prefix}_{uuid.uuid4()}", "call_id": call.get("call_id"),
               "output": text}
    if turn:
        payload["internal_chat_message_metadata_passthrough"] = {"turn_id": turn,
                                                                 "create_time": time.time()}
    ordinal = max((r["ordinal"] for r in rows if isinstance(r.get("ordinal"), int)), default=-1)
    return {"timestamp": iso_now(), "ordinal": ordinal + 1, "type": "response_item",
            "payload": payload, "metadata": _output_metadata(rows, call_row)}


def _output_metadata(rows: list[dict], call_row: dict) -> dict:
    """history_sequence continues the file's count; the rest copies what Codex put on the
    call and on its last output."""
    metas = [r["metadata"] for r in rows if isinstance(r.get("metadata"), dict)]
    sequence = max((m["history_sequence"] for m in metas
                    if isinstance(m.get("history_sequence"), int)), default=0)
    call_meta = call_row.get("metadata") or {}
    meta = {"history_sequence": sequence + 1}
    if "sampled_through_sequence" in call_meta:
        meta["sampled_through_sequence"] = call_meta["sampled_through_sequence"]
    meta["client_authored"] = False
    limits = [m["fallback_token_limit_override"] for m in metas
              if "fallback_token_limit_override" in m]
    if limits:
        meta["fallback_token_limit_override"] = limits[-1]
    meta["model_search_state"] = call_meta.get("model_search_state", "unused")
    return meta
