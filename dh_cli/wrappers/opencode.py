"""OpenCode: every session lives in one SQLite database (`opencode.db`, WAL). dh logs each
version of each row of the session (`session`, `message`, `part`, `event`, …) as one record:
a JSON line `{"table": …, <columns>}`. The latest version of a row is its current state.

What `opencode run --session <id>` / `opencode -s <id>` reads (1.18.33), and what dh does:
- the `session`, `message` and `part` rows of the session and the `project` row of its
  directory, in `opencode.db` (+ `-wal`, `-shm`): every row version mirrored; a database
  that lost the session gets it back through OpenCode's own `opencode import` of the
  export built from the log, run from the session's directory (dh does not write those
  tables);
- the `todo` rows (the todowrite list): mirrored; import drops them (2 rows before, 0
  after), so dh writes them back after the import, into the columns the table has, while
  no OpenCode runs (stores/opencode_restore.py);
- `event`/`event_sequence`: mirrored, not restored: import writes none and a resume did
  not miss them;
- `opencode.json` and the `@opencode-ai/plugin` install in the config dir: the user's config.
  With the data, state and cache dirs deleted, the import and the todo rows were enough.

A provider's limit (1.18.33, `run --format json`, a loopback server refusing from the 2nd
model request on; Chat Completions through @ai-sdk/openai-compatible, the Messages API
through @ai-sdk/anthropic): OpenCode retries by itself (SessionRetry), 5 times, each after
the `retry-after` the refusal named, however long (400 s: nothing written or printed in the
60 s watched; without the header 2, 4, 8 … s, at most 30 s). A truthful `retry-after` is
waited out and the turn completes (exit 0), with nothing about it in the session's rows.
When the refusals outlast the retries (`retry-after: 2`: 6 refusals, 10 s), it writes the
assistant message's `error`: `{"name": "APIError", "data": {"message", "statusCode": 429,
"isRetryable", "responseHeaders", "responseBody"}}`, prints the same as a `{"type": "error"}`
line, and exits 1. The reset: the headers' `anthropic-ratelimit-unified-reset` (epoch
seconds), else their `retry-after` from the message's `time.completed` (`limit_from`)."""

from __future__ import annotations

import re
from pathlib import Path

from .. import paths
from ..models import Parsed, Record, ToolCall, ToolResult
from ..tokens import counts, whole
from .base import (LaunchPlan, NativeSession, NativeSource, Relaunch, TurnState, Wrapper,
                   last_opener, split_args)
from .common import kept_flags, options, parse_argv, prompt_tail, stdout_object
from .identity import pick_launched, same_dir
from .limits import CLAIMS, Limit, api_limit_kind, limit, retry_after
from .opencode_grants import OpenCodeGrants
from .opencode_rows import latest_rows, row_data, row_key, row_order

FINAL_FINISH = {"stop", "length", "end_turn"}
VALUE_FLAGS = frozenset({
    "-s", "--session", "-m", "--model", "--agent", "--format", "--title", "-f", "--file",
    "--variant", "--port", "--attach", "--log-level", "--dir", "--command", "--prompt",
    "--hostname"})
RESUMING_FLAGS = {"-s", "--session", "-c", "--continue"}
# what picks or names the session, or belongs to the first message only (files, a command)
RESUME_DROP = RESUMING_FLAGS | {"--fork", "--title", "-f", "--file", "--command", "--prompt"}


def opencode_usage(tokens: dict, cache: dict) -> dict:
    """OpenCode's message tokens in dh's vocabulary (tokens.py): `input` is the uncached input
    and `reasoning` is kept apart from `output` (its `total` adds the two), so the output
    billed is their sum."""
    reasoning = whole(tokens.get("reasoning"))
    return counts(input=whole(tokens.get("input")), cache_read=whole(cache.get("read")),
                  cache_write=whole(cache.get("write")),
                  output=whole(tokens.get("output")) + reasoning, reasoning=reasoning)

class OpenCodeWrapper(OpenCodeGrants, Wrapper):
    name = "opencode"
    native_id_shape = re.compile(r"ses_[0-9A-Za-z]{12,64}")  # ses_ + 12 hex + 14 base62 today
    binary = "opencode"
    tried_versions = ("1.18.33", "1.18.33")  # also the newest on npm here (2026-12-01)
    packages = ("opencode-ai", "opencode")  # opencode-linux-x64… when install scripts were skipped
    # `opencode run --session` of a session whose `directory` is not the run's cwd (imported
    # from elsewhere, or made with --dir) serves the whole turn, logs "exiting loop" and then
    # never exits: it boots a second instance for the session's directory and disposes only
    # its own (seen with 1.18.33: 3 of 3 such runs still there after 60 s). dh imports from
    # the session's directory so its own resumes do not meet this; a session the user points
    # at does. Once the turn is complete in the log and the process has been quiet this long
    # (its own exit takes < 1 s after the final step), dh ends it.
    linger_after_turn = 10.0
    source_kind = "opencode"
    store = "opencode"  # dh_cli/stores/opencode.py
    safe_tools = frozenset({"read", "grep", "glob", "list", "codesearch", "todowrite", "todoread",
                            "webfetch", "websearch", "todo"})

    def source_file(self, home: Path, relpath: str) -> Path:
        """OpenCode's source is its database, which is the home itself."""
        return home

    def carries_cwd(self, obj: dict, path: tuple) -> bool:
        """The session row's directory; a message's (or an event's session info's) path.cwd
        and path.root. Tool parts keep the paths the model and the tools used."""
        if obj.get("table") == "session":
            return path == ("directory",)
        if obj.get("table") == "message":
            return path in (("data", "<json>", "path", "cwd"), ("data", "<json>", "path", "root"))
        if obj.get("table") == "event":
            return path[:3] == ("data", "<json>", "info") and \
                path[3:] in (("directory",), ("path", "cwd"), ("path", "root"))
        return False

    def home(self, env: dict | None = None) -> Path:
        """For OpenCode the 'home' is its database file."""
        return paths.opencode_db(env)

    def watch_root(self, home: Path) -> Path:
        return self.db_file(home).parent

    def locate(self, home: Path, native_id: str | None, native_path: Path | None):
        """None while the database does not exist: not created yet, or lost (a resume then
        restores the session through `opencode import`)."""
        if not native_id or not self.db_file(home).exists():
            return None
        return self.find(home, native_id)

    @staticmethod
    def db_file(home: Path) -> Path:
        return home / "opencode.db" if home.is_dir() else home

    def discover(self, home: Path) -> list[NativeSession]:
        from .opencode_db import list_sessions

        db = self.db_file(home)
        return [NativeSession(sid, db, directory, [NativeSource("opencode", db, "opencode.db")])
                for sid, directory in list_sessions(db)]

    def recent_sessions(self, home: Path, cwd: str, since: float) -> list[NativeSession]:
        """Session rows for cwd (`session.directory`) updated since `since`, oldest first.
        OpenCode's TUI prints no id, and `run` prints one only with the first model reply."""
        from ..errors import NativeStateError
        from .opencode_db import sessions_since

        db = self.db_file(home)
        if not db.exists():
            return []
        try:
            rows = sessions_since(db, int(since * 1000))
        except NativeStateError:
            return []  # created but not migrated yet: looked at again on the next change
        return [NativeSession(sid, db, directory, [NativeSource("opencode", db, "opencode.db")])
                for sid, directory, _ in rows if same_dir(directory, cwd)]

    def snapshot(self, home: Path, cwd: str) -> dict:
        from ..errors import NativeStateError
        from .opencode_db import sessions_since

        db = self.db_file(home)
        try:
            rows = sessions_since(db, 0) if db.exists() else []
        except NativeStateError:
            rows = []
        return {sid: updated for sid, directory, updated in rows if same_dir(directory, cwd)}

    def launched_session(self, home, cwd, since, before, resuming, claimed=lambda sid: False):
        """As for every harness, with the row's time_updated as the mark (the database file
        changes for every session in it)."""
        from .opencode_db import sessions_since

        db = self.db_file(home)
        try:
            rows = sessions_since(db, int(since * 1000)) if db.exists() else []
        except Exception:  # noqa: BLE001 - not readable yet: looked at again later
            rows = []
        updated = {sid: when for sid, _, when in rows}
        found = [NativeSession(sid, db, directory, [NativeSource("opencode", db, "opencode.db")])
                 for sid, directory, _ in rows if same_dir(directory, cwd)]
        return pick_launched(found, before, resuming, lambda s: updated.get(s.harness_session_id),
                             claimed)

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
            parsed.usage = opencode_usage(tokens, cache)

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
            if kind == "step-finish":  # written before the message's own finish, which a
                parsed.stop_reason = data.get("reason")  # kill can come between (1.18.33)

    def conversation(self, records: list[Record]) -> list[Parsed]:
        rows = [r for r in latest_rows(records) if r.get("table") in ("message", "part")]
        rows.sort(key=row_order)
        return [self.parse_safe(row) for row in rows]

    def turn_state(self, records: list[Record]) -> TurnState:
        parsed = self.conversation(records)
        dangling = [c for p in parsed for c in p.tool_calls if not p.tool_results]
        started = any(p.kind == "user" for p in parsed)
        return TurnState(self.is_complete(parsed) and not dangling, dangling, started,
                         last_opener(parsed))

    document_tools = frozenset({"todowrite"})  # wrappers/documents.py

    def document_edit(self, call: ToolCall, result: ToolResult):
        from .documents import opencode_edit

        return opencode_edit(call, result)

    def write_documents(self, home: Path, native_id: str, document) -> list[str]:
        from .documents import write_opencode_todos

        return write_opencode_todos(home, native_id, lambda: document("todos"))

    def limit_from(self, records: list[Record], now: float) -> Limit | None:
        """The session's last message is an assistant whose `error` is an APIError 429 (see
        the module's notes), with the reset its response headers give."""
        messages = sorted((r for r in latest_rows(records) if r.get("table") == "message"), key=row_order)
        data = row_data(messages[-1]) if messages else {}
        error = data.get("error")
        info = error.get("data") if isinstance(error, dict) and error.get("name") == "APIError" else None
        if data.get("role") != "assistant" or not isinstance(info, dict):
            return None
        text = str(info.get("message") or "")
        kind = api_limit_kind(f"{info.get('statusCode')} {info.get('responseBody') or text}")
        if kind is None:
            return None
        headers = info.get("responseHeaders") if isinstance(info.get("responseHeaders"), dict) else {}
        claim = headers.get("anthropic-ratelimit-unified-representative-claim")
        if claim in CLAIMS:
            kind = (claim, CLAIMS[claim])
        return limit(*kind, _reset(headers, data), "message: assistant error APIError 429", text)

    def is_complete(self, parsed: list[Parsed]) -> bool:
        """The last message is the assistant's, finished: by its own `finish`, or by the
        step-finish part OpenCode writes first (its TUI killed 2 s after a final answer had
        the part with reason stop and the message still without a finish)."""
        marks = [p for p in parsed if p.kind in ("user", "assistant") or p.stop_reason]
        return bool(marks) and marks[-1].kind != "user" and marks[-1].stop_reason in FINAL_FINISH

    # launching and resuming ----------------------------------------------------------------
    value_flags = VALUE_FLAGS
    travels = frozenset({"-m", "--model", "--format", "--variant"})
    command_words = frozenset({"run"})

    def _run_index(self, args: list[str]) -> int | None:
        """The index of the `run` subcommand, when the first positional word is `run`."""
        _, positional = split_args(args, self.value_flags)
        return positional[0] if positional and args[positional[0]] == "run" else None

    def is_headless(self, args: list[str]) -> bool:
        return self._run_index(args) is not None

    def plan_launch(self, args: list[str], cwd: str, home: Path) -> LaunchPlan:
        """OpenCode cannot be given a session id: dh reads `sessionID` from the JSON events
        or the newest session row. `run` joins its message words with spaces; the TUI takes
        its first prompt from --prompt."""
        groups, words = parse_argv(args, self.value_flags)
        opts = options(groups)
        headless = self.is_headless(args)
        prompt = " ".join(words[1:]) if headless else opts.get("--prompt")
        resuming = bool(RESUMING_FLAGS & opts.keys()) and "--fork" not in opts
        native_id = (opts.get("--session") or opts.get("-s")) if resuming else None
        return LaunchPlan(list(args), headless, native_id, prompt=prompt or None,
                          resuming=resuming)

    def id_from_output(self, line: bytes) -> str | None:
        """Every `run --format json` event carries `sessionID` (the first comes with the
        first model reply)."""
        obj = stdout_object(line, b'"sessionID"')
        sid = obj.get("sessionID") if obj else None
        return sid if isinstance(sid, str) and sid else None

    def resume_args(self, original: list[str], native_id: str, native_path: str | None,
                    prompt: str | None, headless: bool) -> list[str]:
        """Headless `run <flags> --session <id> <prompt>`; the TUI `<flags> [project]
        --session <id>` with the prompt as --prompt. The title, files and command of the
        first message are not sent again."""
        index = self._run_index(original)
        cut = len(original) if index is None else index
        pre, words = parse_argv(original[:cut], self.value_flags)
        post, _ = parse_argv(original[cut + 1:], self.value_flags)
        flags = kept_flags(pre, RESUME_DROP)
        if headless:
            # `--session=<id>` as one word (yargs takes it): an id can never be read as a flag
            return [*flags, "run", *kept_flags(post, RESUME_DROP), f"--session={native_id}",
                    *prompt_tail(prompt)]
        tui_prompt = ["--prompt", prompt] if prompt else []
        return [*flags, *kept_flags(post, RESUME_DROP), *words, f"--session={native_id}",
                *tui_prompt]

    def interactive_resume(self, original: list[str], native_id: str, native_path: str | None,
                           prompt: str | None, records: list[Record], notes: bool = False) -> Relaunch:
        """The 1.18.33 TUI takes `--prompt` only for a new session: with `--session <id>` it
        opened the session with an empty composer and sent nothing (seen). So the TUI is
        resumed with no prompt and dh types the continuation into it once its footer
        (`ctrl+p commands`, drawn once the composer takes keys) is on screen; a bracketed
        paste then Enter was sent as one message (seen)."""
        argv = self.resume_args(original, native_id, native_path, None, False)
        if not prompt:
            return Relaunch(argv)
        return Relaunch(argv, continues="typed", typed=prompt, ready=b"ctrl+p")


def _reset(headers: dict, message: dict) -> float | None:
    """The epoch seconds a refusal's headers name for its reset."""
    unified = headers.get("anthropic-ratelimit-unified-reset")
    if unified is not None:
        try:
            return float(unified)
        except (TypeError, ValueError):
            pass
    completed = (message.get("time") or {}).get("completed")
    if "retry-after" not in headers or type(completed) not in (int, float):
        return None
    return retry_after(headers["retry-after"], completed / 1000)
