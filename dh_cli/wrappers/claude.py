"""Claude Code: one transcript JSONL per session under `projects/<slug>/<id>.jsonl` in
`$CLAUDE_CONFIG_DIR` (or ~/.claude), plus subagent transcripts beside it. A streamed assistant
message is one row per content block, all sharing `message.id` and the final usage.

What `claude --resume <id>` reads (2.1.197 and 2.1.332, headless and TUI), and what dh does:
- `projects/<slug>/<id>.jsonl`, found by the cwd's slug (resume must run in that cwd): mirrored
  line by line, rebuilt byte-exact;
- `projects/<slug>/<id>/subagents/agent-<n>.jsonl` and `.meta.json` (an Agent's own
  transcript, to go on with it) and `projects/<slug>/<id>/tool-results/<call>.txt` (outputs
  too large for the transcript, named by `persistedOutputPath`): mirrored as they appear,
  rebuilt;
- `tasks/<id>/<n>.json`, the TaskCreate/TaskUpdate list (2.1.197; 2.1.332 headless offers
  no TaskCreate): mirrored whole on each change, rebuilt (its empty `.lock` Claude makes);
- `.claude.json` and `settings.json`: the user's own config (onboarding, trust, keys), never
  mirrored; `sessions/<pid>.json`, `session-env/`, `shell-snapshots/`, `backups/`: made anew
  by every start. With the whole config home deleted, the rebuilt files are enough: the
  conversation goes on (tests/e2e/test_whole_home_lost.py)."""

from __future__ import annotations

import os
import re
import shlex
import uuid
from pathlib import Path

from .. import paths
from ..errors import NativeStateError
from ..models import Parsed, Record, ToolCall, ToolResult
from ..tokens import counts, whole
from .base import UUID_SHAPE, LaunchPlan, NativeSession, NativeSource, Wrapper, load_json, text_of
from .common import (PRINT_FLAGS, flag_name, headless_flags, options, parse_argv, prompt_tail,
                     stdout_object, with_flags)
from .claude_folders import ClaudeSessionPlaces, first_cwd
from .claude_prompts import project_slug
from .claude_repair import repair_lines
from .claude_tui import ClaudeTuiResume
from .claude_settings import PERMISSION_MODES, settings_grant
from .grants import ALL, ASK, AUTO, EDITS, Grant, switch, tools_named, value_level
from .identity import modified_since
from .limits import Limit, limit, reset_after

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
# Claude Code's names of a plan's limits (its binary's strings, 2.1.197/2.1.332): the words of
# "You've hit your <name>" -> (the limit as the service names it, dh's label)
PLAN_LIMITS = {"session limit": ("five_hour", "5-hour"), "weekly limit": ("seven_day", "weekly"),
               "opus limit": ("seven_day_opus", "weekly Opus"), "sonnet limit": ("seven_day_sonnet", "weekly Sonnet"),
               "monthly spend limit": ("monthly_spend", "monthly spend"), "usage limit": ("usage", "usage")}
MAX_SLUG = 200


def _plan_limit(text: str) -> tuple[str, str]:
    """(which, label) of a limit row's text: the plan's limit it names, else the API's rate limit."""
    lower = text.lower()
    if "you've hit your " in lower:
        named = lower.split("you've hit your ", 1)[1]
        for words, found in PLAN_LIMITS.items():
            if named.startswith(words):
                return found
    return "rate_limit", "rate"


def claude_usage(usage: dict) -> dict:
    """Anthropic's usage in dh's vocabulary (tokens.py): `input_tokens` is already the uncached
    input; `cache_creation_input_tokens` is every cache write, of which
    `cache_creation.ephemeral_1h_input_tokens` were written for an hour."""
    writes = whole(usage.get("cache_creation_input_tokens"))
    split = usage.get("cache_creation") if isinstance(usage.get("cache_creation"), dict) else {}
    hour = min(writes, whole(split.get("ephemeral_1h_input_tokens")))
    return counts(input=usage.get("input_tokens", 0), cache_read=usage.get("cache_read_input_tokens", 0),
                  cache_write=writes - hour, cache_write_1h=hour, output=usage.get("output_tokens", 0))


class ClaudeWrapper(ClaudeSessionPlaces, ClaudeTuiResume, Wrapper):
    name = "claude-code"
    native_id_shape = UUID_SHAPE  # a transcript's file name and sessionId
    aliases = ("claude",)
    binary = "claude"
    # releases dh was tried with (oldest, newest): 2.1.197 pinned, 2.1.332 newest on npm
    tried_versions = ("2.1.197", "2.1.332")
    side_sources = True  # subagents/, tool-results/, tasks/<id>/
    packages = ("@anthropic-ai/claude-code",)
    layout_depth = (3, "projects")  # projects/<slug of cwd>/<id>.jsonl
    safe_tools = frozenset({"read", "grep", "glob", "ls", "todowrite", "todoread", "webfetch",
                            "websearch", "notebookread", "exitplanmode", "taskcreate",
                            "taskupdate", "tasklist", "taskget"})

    def moved_relpath(self, relpath: str, cwd: str) -> str:
        """Claude Code keeps a session in `projects/<slug of cwd>/`."""
        parts = relpath.split("/")
        if len(parts) >= 3 and parts[0] == "projects":
            slug = project_slug(cwd)
            if len(slug) > MAX_SLUG:
                raise NativeStateError(f"cannot move the session to {cwd}: Claude Code shortens "
                                       "project folders this long with a hash dh does not compute",
                                       hint="pick a shorter checkout path")
            parts[1] = slug
        return "/".join(parts)

    def carries_cwd(self, obj: dict, path: tuple) -> bool:
        return path == ("cwd",)

    def first_record_ok(self, obj: dict) -> bool:
        # every row carries sessionId; older transcripts may start with a summary row
        return isinstance(obj.get("type"), str) and (
            "sessionId" in obj or obj["type"] in ("summary", "file-history-snapshot"))

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
        results = transcript.with_suffix("") / "tool-results"  # large outputs, by path
        for extra in [*sorted(side.glob("*")), *sorted(results.glob("*"))]:
            kind = "jsonl" if extra.suffix == ".jsonl" else "file"
            sources.append(NativeSource(kind, extra, str(extra.relative_to(home))))
        tasks = home / "tasks" / transcript.stem  # TaskCreate/TaskUpdate: one <n>.json a task
        for task in sorted(tasks.glob("*.json")) if tasks.is_dir() else []:
            sources.append(NativeSource("file", task, str(task.relative_to(home))))
        return NativeSession(transcript.stem, home, first_cwd(transcript), sources)

    def watch_root(self, home: Path) -> Path:
        return home / "projects"

    def _sessions_at(self, home: Path, path: Path) -> list[NativeSession]:
        return [self._session(home, path)]

    def recent_sessions(self, home: Path, cwd: str, since: float) -> list[NativeSession]:
        """Transcripts in the cwd's project folder written since `since`, oldest first (for
        a `--continue` that picks its session itself; new sessions get --session-id)."""
        folder = home / "projects" / project_slug(os.path.realpath(cwd))
        found = [p for p in folder.glob("*.jsonl") if modified_since(p, since)]
        found.sort(key=lambda p: (p.stat().st_mtime_ns, p.name))
        return [self._session(home, p) for p in found]

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
        if _local_command(content):
            parsed.kind = "meta"  # the user's own terminal command: never sent to the model
            return
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
            parsed.usage = claude_usage(usage)

    def subagent_calls(self, files: dict[str, bytes]) -> dict[str, str]:
        """A subagent's `agent-<id>.meta.json` names the Agent/Task call that started it
        (`toolUseId`); its records are in the `agent-<id>.jsonl` next to it."""
        out = {}
        for relpath, data in files.items():
            if relpath.endswith(".meta.json"):
                meta, _ = load_json(data)
                if isinstance(meta, dict) and isinstance(meta.get("toolUseId"), str):
                    out[relpath[: -len(".meta.json")] + ".jsonl"] = meta["toolUseId"]
        return out

    document_tools = frozenset({"TodoWrite", "TaskCreate", "TaskUpdate"})  # wrappers/documents.py

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

    def limit_from(self, records: list[Record], now: float) -> Limit | None:
        """Claude Code (2.1.197 and 2.1.332, `-p` with an API key, against a loopback server
        answering 429 `rate_limit_error` with `retry-after` and the unified headers
        `anthropic-ratelimit-unified-status: rejected`, `-reset`, `-representative-claim`):
        - a `retry-after` of 30 s or 40 s is waited out by Claude itself (a stream-json
          `system` `api_retry` line, `retry_delay_ms` the header's, `max_retries: 10`, in
          its output only, not the transcript; the next request went through and the turn
          completed, exit 0): no limit for dh;
        - with `retry-after: 400` (or 3600) it makes one request, writes a synthetic
          assistant row (`model: "<synthetic>"`, `"error": "rate_limit"`; 2.1.332 adds
          `isApiErrorMessage`, `apiErrorStatus: 429`, `apiErrorType`) with the text "API
          Error: Request rejected (429) · This request would exceed your account's rate
          limit. Please try again later.", prints a result with `is_error: true,
          api_error_status: 429` and exits 1. No reset time is written anywhere.
        - Signed in to a plan, the same row carries the plan's text instead (from the
          binary, not run here): "You've hit your session limit · resets 3pm (Europe/Paris)",
          "weekly limit", "Opus limit", … with the reset as a local time to the minute
          ("3:30pm"), or "Dec 5, 3pm" beyond a day; that reset is read."""
        row = self.last_rows(records, ("user", "assistant"))
        if row is None or row.get("type") != "assistant" or row.get("error") != "rate_limit":
            return None
        text = text_of((row.get("message") or {}).get("content"))
        which, label = _plan_limit(text)
        return limit(which, label, reset_after(text, ("resets",), now), "transcript: assistant error rate_limit", text)

    # launching and resuming ----------------------------------------------------------------
    value_flags = VALUE_FLAGS
    variadic_flags = VARIADIC_FLAGS
    travels = frozenset({"-p", "--print", "--model", "--fallback-model", "--output-format",
                         "--input-format", "--verbose", "--include-partial-messages"})
    # 2.1.197's --help. --allow-dangerously-skip-permissions only offers bypass mode, but the
    # user may have switched to it in the TUI, which no flag shows: read as granted.
    grant_table = {
        "--dangerously-skip-permissions": switch(ALL),
        "--allow-dangerously-skip-permissions": switch(ALL),
        "--permission-mode": value_level(PERMISSION_MODES),
        "--allowedTools": lambda values: Grant(ASK, tools_named(values)),
        "--allowed-tools": lambda values: Grant(ASK, tools_named(values))}
    grant_flags = {ALL: ("--dangerously-skip-permissions",), AUTO: ("--permission-mode", "auto"),
                   EDITS: ("--permission-mode", "acceptEdits"), "tools": ("--allowedTools",)}

    settings_level_flags = frozenset({"--dangerously-skip-permissions", "--permission-mode",
                                      "--allow-dangerously-skip-permissions"})

    def settings_grant(self, env: dict, args: list[str], needed: bool = False) -> Grant | None:
        return settings_grant(self.home(env), needed)

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
        # one word, `--resume=<id>` (commander takes it): an id can never be read as a flag
        return [*flags, f"--resume={native_id}", *prompt_tail(prompt)]

    def fork_args(self, original: list[str], native_id: str, native_path: str | None,
                  prompt: str | None, headless: bool) -> list[str]:
        """`--resume=<id> --fork-session`: Claude Code writes a new session file (the id
        plan_launch pins with --session-id) holding the conversation's rows under the new id,
        and leaves the resumed file as it was (2.1.197 and 2.1.332)."""
        groups, _ = self._split(original)
        flags = headless_flags(groups, SESSION_FLAGS, headless)
        return [*flags, f"--resume={native_id}", "--fork-session", *prompt_tail(prompt)]

    # the harness's tool commands -----------------------------------------------------
    def tool_command(self, argv: list[str]) -> str:
        """Claude Code (2.1.197, 2.1.332) runs a Bash tool's command as `bash -c "source
        <shell snapshot> … && eval '<command>' < /dev/null && pwd -P >| <cwd file>"`: the
        command is the word after `eval`. With a long home the whole line's clip had cut it
        out (seen under pytest-xdist's longer temp folders)."""
        if len(argv) < 3 or argv[1] != "-c" or "eval " not in argv[2]:
            return " ".join(argv)
        try:
            words = shlex.split(argv[2])
        except ValueError:  # not the shape above
            return " ".join(argv)
        at = words.index("eval") if "eval" in words else -1
        return words[at + 1] if 0 <= at < len(words) - 1 else " ".join(argv)

    # repairing a cut tool call -------------------------------------------------------------
    def repair_lines(self, records: list[Record], call: ToolCall, text: str) -> list[bytes]:
        """A `user` tool_result row (is_error) for a dangling tool_use: see claude_repair.py."""
        return repair_lines(records, call, text)


# what a built-in slash command (`/exit`, `/cost`, ...) leaves in the transcript, in 2.1.197
# and 2.1.332 alike: a caveat row, the command, its output, none of them sent to the model.
# (`rowSource: local` in 2.1.332 marks every row the user typed, prompts too: no help here.)
LOCAL_OUTPUT_TAGS = ("<local-command-stdout>", "<local-command-stderr>", "<local-command-caveat>")
LOCAL_COMMAND = re.compile(r"\s*<command-name>/(exit|quit|cost|status|help|doctor|config)</command-name>")


def _local_command(content) -> bool:
    if not isinstance(content, str):
        return False
    return content.lstrip().startswith(LOCAL_OUTPUT_TAGS) or bool(LOCAL_COMMAND.match(content))
