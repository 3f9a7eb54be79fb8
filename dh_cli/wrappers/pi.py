"""Pi: one session JSONL, line 1 a `session` header, then entries `{type, id, parentId, …}`.
The leaf is the last entry in file order. Messages are written only once complete.

What `pi --session <file>` reads (0.73.1 and 1.6.0), and what dh does: the session file alone
(its header's cwd must exist; provider and model come back from it): mirrored, rebuilt
(re-serialized lines are accepted too). `models.json` and `settings.json` are the user's
config; `auth.json` is made anew (`{}`). With the agent dir deleted but `models.json`, the
rebuilt file resumed the conversation.

A provider's limit (a loopback server refusing from the 2nd model request on; 0.73.1 and
1.6.0, `-p --mode json`, the Messages API with the unified headers and Chat Completions):
- 0.73.1 retries in its SDK, sleeping whatever `retry-after` says (400 s: no request and
  nothing written or printed for the 100 s watched), 3 requests, then its own agent retry
  (2, 4, 8 s) of those 3 each: with `retry-after: 2` it gave up after 12 refusals, 34 s.
  A truthful `retry-after` is waited out silently and the turn completes (exit 0).
- 1.6.0 does not retry in the SDK (and fails at once past a 60 s `retry-after`): its agent
  retry alone, 2, 4, 8 s, so it gave up after 4 refusals, 14 s, whatever the header said.
- Giving up, both write each refusal as an assistant message with `stopReason: "error"` and
  `errorMessage` the SDK's "429 {body}" (0.x) or "429: {body}" (1.x), 1.6.0 a `context_edit`
  after each retried one; the same `agent_end` in stdout; exit 0. No header is kept: a reset
  is known only from an OpenAI body's "Please try again in 20s" (`limit_from`)."""

from __future__ import annotations

import json
import os
import secrets
import time
import uuid
from pathlib import Path

from .. import paths
from ..models import Parsed, Record, ToolCall, ToolResult
from ..tokens import counts
from .base import (UUID_SHAPE, LaunchPlan, NativeSession, NativeSource, Relaunch, Wrapper, regular_file,
                   split_args, text_of)
from .common import (PRINT_FLAGS, headless_flags, iso_now, json_line, json_objects, options,
                     parse_argv, stdout_object, with_flags)
from .grants import ALL, Grant
from .identity import modified_since
from .limits import Limit, api_limit_kind, limit, wait_told
from .relaunch import typed_prompt_lost

FINAL_STOPS = {"stop", "length"}
VALUE_FLAGS = frozenset({
    "--provider", "--model", "--mode", "--session", "--session-dir", "--api-key",
    "--system-prompt", "--append-system-prompt", "--thinking", "--tools", "--models",
    "--export", "-e", "--extension", "--fork"})
RESUMING_FLAGS = {"--continue", "-c", "--resume", "-r"}
APPEND_SYSTEM = "--append-system-prompt"  # text (or a file's) added to the system prompt
# flags that choose the session file; dh passes --session <path> itself
SESSION_FLAGS = RESUMING_FLAGS | {"--session", "--no-session", "--fork"}


def pi_session_dir_name(cwd: str) -> str:
    """Pi's default folder for a cwd: leading '/' dropped, '/', '\\' and ':' become '-'."""
    inner = cwd.lstrip("/")
    for ch in "/\\:":
        inner = inner.replace(ch, "-")
    return f"--{inner}--"


def read_header(path: Path) -> dict:
    if not regular_file(path):
        return {}
    try:
        with open(path, "rb") as handle:
            obj = json.loads(handle.readline())
    except (OSError, ValueError):
        return {}
    return obj if isinstance(obj, dict) and obj.get("type") == "session" else {}


class PiWrapper(Wrapper):
    name = "pi"
    native_id_shape = UUID_SHAPE  # the session header's id (UUIDv7)
    binary = "pi"
    # 0.73.1 is the last @mariozechner release; the project goes on as @earendil-works (1.x,
    # needs Node >= 22.19). Binary `pi` -> dist/cli.js (0.x) or dist/bundle/cli.js (1.x).
    tried_versions = ("0.73.1", "1.6.0")
    packages = ("@mariozechner/pi-coding-agent", "@earendil-works/pi-coding-agent")
    entry_points = ("dist/cli.js", "dist/bundle/cli.js")
    layout_depth = (3, "sessions")  # sessions/--<cwd>--/<time>_<id>.jsonl
    safe_tools = frozenset({"read", "grep", "find", "ls"})

    def moved_relpath(self, relpath: str, cwd: str) -> str:
        """Pi keeps a session in `sessions/--<cwd>--/` (a --session-dir file stays put)."""
        parts = relpath.split("/")
        if len(parts) == 3 and parts[0] == "sessions" and parts[1].startswith("--"):
            parts[1] = pi_session_dir_name(cwd)
        return "/".join(parts)

    def carries_cwd(self, obj: dict, path: tuple) -> bool:
        return obj.get("type") == "session" and path == ("cwd",)

    def first_record_ok(self, obj: dict) -> bool:
        return obj.get("type") == "session"  # the header Pi writes first

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

    def recent_sessions(self, home: Path, cwd: str, since: float) -> list[NativeSession]:
        """Files in the cwd's folder under `sessions/` written since `since`, oldest first
        (for -c/-r, which pick their file themselves; new sessions get --session PATH)."""
        folder = home / "sessions" / pi_session_dir_name(os.path.realpath(cwd))
        found = sorted(p for p in folder.glob("*.jsonl") if modified_since(p, since))
        return [s for p in found for s in self._sessions_at(home, p)]

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
            # pi-ai's `input` is the uncached input already, for every provider it speaks to
            parsed.usage = counts(input=usage.get("input", 0), output=usage.get("output", 0),
                                  cache_read=usage.get("cacheRead", 0),
                                  cache_write=usage.get("cacheWrite", 0))

    def is_complete(self, parsed: list[Parsed]) -> bool:
        turns = [p for p in parsed if p.kind in ("user", "assistant", "tool_call", "tool_result")]
        return bool(turns) and turns[-1].kind == "assistant" and turns[-1].stop_reason in FINAL_STOPS

    def limit_from(self, records: list[Record], now: float) -> Limit | None:
        """The last message is an assistant `stopReason: "error"` whose `errorMessage` is a
        429 (see the module's notes); its reset only from an OpenAI "try again in Ns",
        counted from the message's time."""
        message = next((obj["message"] for obj in reversed(json_objects(records))
                        if obj.get("type") == "message" and isinstance(obj.get("message"), dict)), {})
        if message.get("role") != "assistant" or message.get("stopReason") != "error":
            return None
        text = str(message.get("errorMessage") or "")
        kind = api_limit_kind(text)
        if kind is None:
            return None
        told, at = wait_told(text), message.get("timestamp")
        reset = at / 1000 + told if told is not None and type(at) in (int, float) else None
        return limit(*kind, reset, "session: assistant message stopReason error", text)

    # launching and resuming ----------------------------------------------------------------
    value_flags = VALUE_FLAGS
    travels = frozenset({"-p", "--print", "--mode", "--provider", "--model", "--thinking"})
    # Pi asks before nothing: its flags only take tools away (--tools, --no-tools)
    base_grant = Grant(ALL)

    def is_headless(self, args: list[str]) -> bool:
        groups, _ = parse_argv(args, self.value_flags)
        return bool(PRINT_FLAGS & options(groups).keys())

    def plan_launch(self, args: list[str], cwd: str, home: Path) -> LaunchPlan:
        """Pi's id cannot be chosen but its file can: `--session <new path>` names the file
        in Pi's own layout before launch. Pi writes nothing until the first reply, so the
        prompt is kept for a replay. Messages are separate prompts to Pi, hence the blank
        line between them."""
        groups, words = parse_argv(args, self.value_flags)
        opts = options(groups)
        prompt = "\n\n".join(words) or None
        if SESSION_FLAGS & opts.keys():
            path, resuming = self._chosen_session(opts, cwd)
            return LaunchPlan(list(args), self.is_headless(args), native_path=path,
                              prompt=prompt, resuming=resuming)
        path = new_session_path(home, cwd, opts.get("--session-dir"))
        return LaunchPlan(with_flags(args, ["--session", str(path)]), self.is_headless(args),
                          native_path=path, prompt=prompt)

    @staticmethod
    def _chosen_session(opts: dict, cwd: str) -> tuple[Path | None, bool]:
        """(file, resuming) for the user's own session flags. A --session value that is not
        a path is an id prefix Pi looks up; -c/-r continue one Pi picks."""
        value = opts.get("--session")
        if value and ("/" in value or value.endswith(".jsonl")):
            path = Path(cwd, os.path.expanduser(value))
            return path, path.exists()
        return None, bool(value) or bool(RESUMING_FLAGS & opts.keys())

    def id_from_output(self, line: bytes) -> str | None:
        """`--mode json` prints the session header first; its id is the session's."""
        obj = stdout_object(line, b'"session"')
        if not obj or obj.get("type") != "session":
            return None
        sid = obj.get("id")
        return sid if isinstance(sid, str) and sid else None

    def resume_args(self, original: list[str], native_id: str, native_path: str | None,
                    prompt: str | None, headless: bool) -> list[str]:
        """`[flags…] --session <file> <prompt>`. Always the full path when known: an id
        prefix can match a session in another project and open an interactive fork
        question. Headless Pi needs the prompt, or it does nothing."""
        groups, _ = parse_argv(original, self.value_flags)
        flags = headless_flags(groups, SESSION_FLAGS, headless)
        session = str(native_path) if native_path else native_id
        return [*flags, "--session", session, *([prompt] if prompt else [])]

    def restart_unstarted(self, original: list[str], native_id: str | None,
                          native_path: str | None) -> Relaunch | None:
        """Pi writes nothing before its first answer is complete (0.73.1 and newer): a TUI
        killed during its first model call leaves no file, and the prompt typed into its
        editor is nowhere dh can read (Pi keeps its prompt history in memory). A prompt in
        argv goes again with the original command; a typed one is lost, and dh says so
        rather than leave the user before an idle editor."""
        _, words = parse_argv(original, self.value_flags)
        if words:
            return None
        return Relaunch(list(original), note=typed_prompt_lost(self.name))

    def with_note(self, args: list[str], note: str) -> list[str] | None:
        """Pi sends each positional word as a message of its own, after the `@file` words it
        attaches (`pi [options] [@files...] [messages...]`): the note ends the first message,
        each word kept in its place (its text starts as before, so it parses as before).
        With no message (a prompt typed into the TUI, which dh cannot send again) the note
        goes into the system prompt of the relaunched Pi (`--append-system-prompt`), so the
        model reads it with the prompt the user types again. Pi writes nothing before its
        first answer is complete, and the TUI runs that answer's tool call first: seen in
        the soak, a step ran twice with no file holding the first run."""
        _, positional = split_args(args, self.value_flags)
        first = next((i for i in positional if not args[i].startswith("@")), None)
        if first is None:
            return [APPEND_SYSTEM, note, *args]
        return [*args[:first], f"{args[first]}\n\n{note}", *args[first + 1:]]

    def fork_copy(self, native_path: str | None, home: Path, cwd: str) -> Path | None:
        """What `pi --fork <file>` writes (SessionManager.forkFrom, 0.73.1): a new header (new
        id, this cwd, `parentSession` the file it came from), then every entry of the file.
        Pi's --fork picks the new file's name itself and cannot be combined with --session,
        so dh writes the copy where it chooses and resumes it with `--session <file>`."""
        header = read_header(Path(native_path)) if native_path else {}
        if not header:
            return None
        target = new_session_path(home, cwd)
        head = {"type": "session", "version": header.get("version"), "id": target.stem.split("_", 1)[1],
                "timestamp": iso_now(), "cwd": cwd, "parentSession": str(native_path)}
        entries = Path(native_path).read_bytes().partition(b"\n")[2]
        target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as out:
            out.write(json_line(head) + entries)
        return target

    # repairing a cut tool call -------------------------------------------------------------
    def repair_lines(self, records: list[Record], call: ToolCall, text: str) -> list[bytes]:
        """A `toolResult` message entry (isError) for the dangling call, as the new last
        line: Pi's leaf is the last line, so the result must extend the path that holds
        the call. Without it Pi sends "No result provided" on every later request. Nothing
        when the leaf has moved past the call (a later prompt already follows it)."""
        entries = [e for e in json_objects(records) if e.get("type") != "session"]
        source = next((e for e in entries if _holds_call(e, call.id)), None)
        if source is None or not entries or not _leaf_follows(entries, source):
            return []
        taken = {e.get("id") for e in entries}
        return [json_line(_result_entry(entries[-1]["id"], taken, call, source, text))]


def new_session_path(home: Path, cwd: str, session_dir: str | None = None) -> Path:
    """A new file in Pi's own layout: `<ISO time, ':' and '.' as '-'>_<uuid>.jsonl` in the
    cwd's folder under `sessions/` (or flat in --session-dir, as Pi uses it)."""
    now = iso_now()
    name = f"{now.replace(':', '-').replace('.', '-')}_{uuid.uuid4()}.jsonl"
    if session_dir:
        return Path(cwd, os.path.expanduser(session_dir)) / name
    return Path(home) / "sessions" / pi_session_dir_name(os.path.realpath(cwd)) / name


def _message(entry: dict) -> dict:
    message = entry.get("message") if entry.get("type") == "message" else None
    return message if isinstance(message, dict) else {}


def _holds_call(entry: dict, call_id: str) -> bool:
    message = _message(entry)
    return message.get("role") == "assistant" and any(
        isinstance(b, dict) and b.get("type") == "toolCall" and b.get("id") == call_id
        for b in message.get("content") or [])


def _moves_on(entry: dict) -> bool:
    """An entry that changes what the model sees next: any message but a tool result, or a
    summary. Labels, model and thinking changes and the like do not."""
    if entry.get("type") in ("compaction", "branch_summary"):
        return True
    return entry.get("type") == "message" and _message(entry).get("role") != "toolResult"


def _leaf_follows(entries: list[dict], source: dict) -> bool:
    """True when the last line is the call's assistant entry or hangs from it through tool
    results and side entries only: then a result appended as the new leaf keeps the whole
    context. After a later prompt it would cut that prompt off the path."""
    by_id = {e.get("id"): e for e in entries}
    current, steps = entries[-1], 0
    while current is not None and steps <= len(entries):
        if current is source:
            return True
        if _moves_on(current):
            return False
        current, steps = by_id.get(current.get("parentId")), steps + 1
    return False


def _result_entry(parent: str, taken: set, call: ToolCall, source: dict, text: str) -> dict:
    """The entry in Pi's field order, with a fresh 8-hex id."""
    entry_id = secrets.token_hex(4)
    while entry_id in taken:
        entry_id = secrets.token_hex(4)
    name = next((b.get("name") for b in _message(source).get("content") or []
                 if isinstance(b, dict) and b.get("id") == call.id), call.name)
    return {"type": "message", "id": entry_id, "parentId": parent, "timestamp": iso_now(),
            "message": {"role": "toolResult", "toolCallId": call.id, "toolName": name,
                        "content": [{"type": "text", "text": text}], "isError": True,
                        "timestamp": time.time_ns() // 1_000_000}}
