"""Fake `claude` (Claude Code 2.1.197) for dh's tests.

Behaves like the real CLI where dh can see it (see /work/shared/docs/harnesses.md §1):

* flags: ``-p/--print [PROMPT]``, ``--session-id UUID``, ``-r/--resume ID``,
  ``--output-format stream-json|text|json``, ``--verbose``,
  ``--dangerously-skip-permissions``, ``--model M``, ``--version``, ``--fork-session``
  (with ``--resume``: a new session, ``--session-id`` or a new id, holding a copy of the
  resumed conversation under its own id); anything else
  is an error, as with the real commander-based parser.
* state: ``$CLAUDE_CONFIG_DIR`` (else ``~/.claude``); transcript
  ``projects/<slug(realpath(cwd))>/<id>.jsonl`` (mode 0600); ``sessions/<pid>.json``
  while running (left behind by a SIGKILL).
* records: queue-operation enqueue/dequeue, the prompt row, attachments on the
  first turn, one assistant row per content block (written only after the whole
  message streamed), tool_result rows with ``toolUseResult`` and
  ``sourceToolAssistantUUID``, then ``last-prompt`` (and ``mode`` on resumed runs).
* model: ``POST $ANTHROPIC_BASE_URL/v1/messages?beta=true`` (SSE), messages
  rebuilt from the uuid chain; the ``request-id`` header is kept as ``requestId``.
* resume quirks: same cwd required; prompt required; "Continue from where you left
  off." + "No response requested." rows after a tool_result; only the synthetic
  assistant row after a later turn's prompt row; a dangling tool_use is dropped
  (the model is asked for that step again).
* crashes: ``DH_FAKE_CRASH`` / ``DH_FAKE_CRASH_ONCE`` (see harness_common).
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
import sys
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.fakes.harness_common import (  # noqa: E402
    CrashPlan, fail, json_line, now_iso, now_ms, read_file_tool, resolve, run_shell,
    stream_sse, write_file_tool, write_record,
)

VERSION = "2.1.197"
DEFAULT_MODEL = "claude-opus-4-8"
TOOL_NAMES = ["Bash", "Edit", "Glob", "Grep", "Read", "Write"]
CONTINUE_TEXT = "Continue from where you left off."
NO_RESPONSE_TEXT = "No response requested."
FORMATS = ("text", "json", "stream-json")
VALUE_FLAGS = {"--session-id": "session_id", "--resume": "resume", "-r": "resume",
               "--output-format": "output_format", "--model": "model"}
BOOL_FLAGS = {"-p": "print", "--print": "print", "--verbose": "verbose", "--fork-session": "fork",
              "--dangerously-skip-permissions": "skip_permissions",
              "--version": "version", "-v": "version", "-h": "help", "--help": "help"}


# ---------------------------------------------------------------- arguments

def parse_args(argv: list[str]) -> dict:
    """Parse the claude command line into a dict; errors exit 1 like commander."""
    opts = {"print": False, "verbose": False, "skip_permissions": False, "version": False, "fork": False,
            "help": False, "session_id": None, "resume": None, "output_format": "text",
            "model": None, "prompt": None}
    positionals, i = [], 0
    while i < len(argv):
        tok = argv[i]
        name, eq, inline = tok.partition("=")
        if tok == "--":
            positionals += argv[i + 1:]
            break
        if name in VALUE_FLAGS:
            if eq:
                opts[VALUE_FLAGS[name]] = inline
            elif i + 1 < len(argv) and not argv[i + 1].startswith("-"):
                i += 1
                opts[VALUE_FLAGS[name]] = argv[i]
            elif name in ("-r", "--resume"):
                opts["resume"] = ""
            else:
                fail(f"error: option '{name} <value>' argument missing")
        elif tok in BOOL_FLAGS:
            opts[BOOL_FLAGS[tok]] = True
        elif tok.startswith("-") and tok != "-":
            fail(f"error: unknown option '{tok}'")
        else:
            positionals.append(tok)
        i += 1
    if len(positionals) > 1:
        fail(f"error: too many arguments. Expected 1 argument but got {len(positionals)}.")
    opts["prompt"] = positionals[0] if positionals else None
    return opts


def validate(opts: dict) -> None:
    if opts["output_format"] not in FORMATS:
        fail(f"error: option '--output-format <format>' argument '{opts['output_format']}' "
             f"is invalid. Allowed choices are {', '.join(FORMATS)}.")
    if opts["session_id"] is not None:
        try:
            uuid.UUID(opts["session_id"])
        except ValueError:
            fail("Error: Invalid session ID. Must be a valid UUID.")
        if opts["resume"] is not None and not opts["fork"]:
            fail("Error: --session-id can only be used with --continue or --resume "
                 "if --fork-session is also specified.")
    if opts["print"] and opts["output_format"] == "stream-json" and not opts["verbose"]:
        fail("Error: When using --print, --output-format=stream-json requires --verbose")
    if opts["skip_permissions"] and os.geteuid() == 0 and os.environ.get("IS_SANDBOX") != "1":
        fail("--dangerously-skip-permissions cannot be used with root/sudo privileges "
             "for security reasons")


# ---------------------------------------------------------------- paths

def config_home() -> Path:
    env = os.environ.get("CLAUDE_CONFIG_DIR")
    return Path(env) if env else Path.home() / ".claude"


def project_slug(cwd: str) -> str:
    slug = re.sub(r"[^A-Za-z0-9]", "-", os.path.realpath(cwd))
    if len(slug) <= 200:
        return slug
    h = 0
    for ch in slug:
        h = (h * 31 + ord(ch)) & 0xFFFFFFFF
    h = abs(h - (1 << 32) if h >= 1 << 31 else h)
    digits = ""
    while True:
        h, r = divmod(h, 36)
        digits = "0123456789abcdefghijklmnopqrstuvwxyz"[r] + digits
        if not h:
            break
    return slug[:200] + "-" + digits


def write_pid_file(home: Path, sid: str, cwd: str) -> Path:
    path = home / "sessions" / f"{os.getpid()}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        proc_start = Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[19]
    except OSError:
        proc_start = "0"
    info = {"pid": os.getpid(), "sessionId": sid, "cwd": cwd, "startedAt": now_ms(),
            "procStart": proc_start, "version": VERSION, "peerProtocol": 1,
            "kind": "interactive", "entrypoint": "sdk-cli",
            "name": f"{Path(cwd).name}-{sid[:2]}", "nameSource": "derived"}
    path.write_text(json.dumps(info, separators=(",", ":")))
    return path


def ensure_global_config(home: Path) -> None:
    cfg = home / ".claude.json"
    if not cfg.exists():
        home.mkdir(parents=True, exist_ok=True)
        cfg.write_text(json.dumps({"firstStartTime": now_iso(), "userID": uuid.uuid4().hex,
                                   "numStartups": 1}, indent=2))


# ---------------------------------------------------------------- transcript

class Transcript:
    """The session JSONL file: rows in file order, the chain, and appends."""

    def __init__(self, path: Path, plan: CrashPlan):
        self.path = path
        self.plan = plan
        self.rows: list[dict] = []
        self.leaf: str | None = None
        self.copied: list[dict] = []  # a fork's rows of the session it came from, written at its first turn

    def load(self) -> None:
        for line in self.path.read_bytes().splitlines():
            try:
                row = json.loads(line)
            except ValueError:
                continue  # the real reader skips torn or broken lines
            if isinstance(row, dict):
                self.rows.append(row)
        uuids = [r for r in self.rows if r.get("uuid")]
        self.leaf = uuids[-1]["uuid"] if uuids else None

    def append(self, row: dict) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        write_record(self.path, json_line(row), self.plan, mode=0o600)
        self.rows.append(row)
        if row.get("uuid"):
            self.leaf = row["uuid"]

    def by_uuid(self) -> dict[str, dict]:
        return {r["uuid"]: r for r in self.rows if r.get("uuid")}

    def chain(self, leaf: str | None = None) -> list[dict]:
        """Rows from the root to `leaf` (default: the current leaf)."""
        index, out, cur = self.by_uuid(), [], leaf or self.leaf
        while cur and cur in index:
            out.append(index[cur])
            cur = index[cur].get("parentUuid")
        return out[::-1]

    def answered_ids(self) -> set[str]:
        return {b.get("tool_use_id") for r in self.rows if r.get("type") == "user"
                for b in _blocks(r) if b.get("type") == "tool_result"}


def _blocks(row: dict) -> list[dict]:
    content = (row.get("message") or {}).get("content")
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


def is_tool_result_row(row: dict) -> bool:
    return row.get("type") == "user" and any(b.get("type") == "tool_result" for b in _blocks(row))


def is_prompt_row(row: dict) -> bool:
    return row.get("type") == "user" and not row.get("isMeta") and not is_tool_result_row(row)


def messages_from_chain(rows: list[dict]) -> list[dict]:
    """Anthropic `messages` from transcript rows; same-role neighbours are merged."""
    out: list[dict] = []
    last_msg_id = None
    for row in rows:
        if row.get("type") not in ("user", "assistant"):
            continue
        msg = row["message"]
        if row["type"] == "assistant" and out and msg.get("id") == last_msg_id:
            out[-1]["content"] += msg["content"]
            continue
        last_msg_id = msg.get("id") if row["type"] == "assistant" else None
        out.append({"role": msg["role"], "content": _as_list(msg["content"])
                    if row["type"] == "assistant" else msg["content"]})
    return _merge_same_role(out)


def _as_list(content) -> list:
    return [{"type": "text", "text": content}] if isinstance(content, str) else list(content)


def _merge_same_role(messages: list[dict]) -> list[dict]:
    merged: list[dict] = []
    for m in messages:
        if merged and merged[-1]["role"] == m["role"]:
            merged[-1]["content"] = _as_list(merged[-1]["content"]) + _as_list(m["content"])
        else:
            merged.append(dict(m))
    return merged


# ---------------------------------------------------------------- tools

TOOL_SCHEMAS = {
    "Bash": {"command": "string", "description": "string", "timeout": "number"},
    "Edit": {"file_path": "string", "old_string": "string", "new_string": "string",
             "replace_all": "boolean"},
    "Glob": {"pattern": "string", "path": "string"},
    "Grep": {"pattern": "string", "path": "string", "glob": "string", "output_mode": "string"},
    "Read": {"file_path": "string", "offset": "number", "limit": "number"},
    "Write": {"file_path": "string", "content": "string"},
}
REQUIRED = {"Bash": ["command"], "Edit": ["file_path", "old_string", "new_string"],
            "Glob": ["pattern"], "Grep": ["pattern"], "Read": ["file_path"],
            "Write": ["file_path", "content"]}
NEEDS_PERMISSION = {"Bash", "Edit", "Write"}


def tool_definitions() -> list[dict]:
    return [{"name": name, "description": f"{name} tool",
             "input_schema": {"type": "object", "additionalProperties": False,
                              "required": REQUIRED[name],
                              "properties": {k: {"type": t} for k, t in TOOL_SCHEMAS[name].items()}}}
            for name in TOOL_NAMES]


def run_tool(name: str, args: dict, cwd: str, plan: CrashPlan):
    """Run one tool; return (content, is_error or None, toolUseResult)."""
    handler = {"Bash": tool_bash, "Write": tool_write, "Read": tool_read, "Edit": tool_edit,
               "Glob": tool_glob, "Grep": tool_grep}.get(name)
    if handler is None:
        msg = f"<tool_use_error>Error: No such tool available: {name}</tool_use_error>"
        return msg, True, f"Error: No such tool available: {name}"
    try:
        return handler(args, cwd, plan)
    except (OSError, KeyError, ValueError, re.error) as exc:
        return f"<tool_use_error>{exc}</tool_use_error>", True, f"Error: {exc}"


def tool_bash(args, cwd, plan):
    code, out = run_shell(args["command"], cwd, plan)
    result = {"stdout": out.rstrip("\n"), "stderr": "", "interrupted": False, "isImage": False,
              "noOutputExpected": False}
    if code != 0:
        return f"Exit code {code}\n{out}".rstrip("\n"), True, f"Error: Exit code {code}"
    return (out.rstrip("\n") or "(Bash completed with no output)"), False, result


def tool_write(args, cwd, _plan):
    target = resolve(args["file_path"], cwd)
    original = target.read_text() if target.exists() else None
    info = write_file_tool(target, args["content"], cwd)
    kind = "create" if info["created"] else "update"
    text = (f"File created successfully at: {info['path']} (file state is current in your "
            f"context — no need to Read it back)" if info["created"]
            else f"The file {info['path']} has been updated successfully.")
    return text, None, {"type": kind, "filePath": info["path"], "content": args["content"],
                        "structuredPatch": [], "originalFile": original, "userModified": False}


def tool_read(args, cwd, _plan):
    path = str(resolve(args["file_path"], cwd))
    try:
        text = read_file_tool(path, cwd)
    except FileNotFoundError:
        return ("<tool_use_error>File does not exist.</tool_use_error>", True,
                "Error: File does not exist.")
    lines = text.split("\n")
    start = int(args.get("offset") or 1)
    chosen = lines[start - 1:start - 1 + int(args["limit"])] if args.get("limit") else lines[start - 1:]
    numbered = "\n".join(f"{start + i}\t{line}" for i, line in enumerate(chosen))
    return numbered, None, {"type": "text", "file": {
        "filePath": path, "content": text, "numLines": len(chosen), "startLine": start,
        "totalLines": len(lines)}}


def tool_edit(args, cwd, _plan):
    path = resolve(args["file_path"], cwd)
    original = read_file_tool(path, cwd)
    old, new = args["old_string"], args["new_string"]
    if old not in original:
        return ("<tool_use_error>String to replace not found in file.</tool_use_error>", True,
                "Error: String to replace not found in file.")
    updated = original.replace(old, new) if args.get("replace_all") else original.replace(old, new, 1)
    path.write_text(updated)
    return (f"The file {path} has been updated successfully.", None,
            {"filePath": str(path), "oldString": old, "newString": new, "originalFile": original,
             "structuredPatch": [], "userModified": False, "replaceAll": bool(args.get("replace_all"))})


def tool_glob(args, cwd, _plan):
    base = resolve(args.get("path") or ".", cwd)
    start = time.monotonic()
    names = sorted(str(p) for p in base.glob(args["pattern"]) if p.is_file())
    text = "\n".join(names) if names else "No files found"
    return text, None, {"filenames": names, "durationMs": int((time.monotonic() - start) * 1000),
                        "numFiles": len(names), "truncated": False}


def tool_grep(args, cwd, _plan):
    base = resolve(args.get("path") or ".", cwd)
    rx = re.compile(args["pattern"])
    files = [base] if base.is_file() else sorted(p for p in base.rglob("*") if p.is_file())
    if args.get("glob"):
        files = [p for p in files if fnmatch.fnmatch(p.name, args["glob"])]
    hits = [str(p) for p in files if rx.search(p.read_text(errors="replace"))]
    text = f"Found {len(hits)} file{'s' if len(hits) != 1 else ''}\n" + "\n".join(hits) \
        if hits else "No files found"
    return text, None, {"mode": "files_with_matches", "filenames": hits, "numFiles": len(hits)}


# ---------------------------------------------------------------- model client

class ModelError(Exception):
    pass


def base_url() -> str:
    return os.environ.get("ANTHROPIC_BASE_URL", "https://api.anthropic.com").rstrip("/")


def model_headers() -> dict:
    headers = {"anthropic-version": "2023-06-01", "x-app": "cli",
               "user-agent": f"claude-cli/{VERSION} (external, sdk-cli)",
               "anthropic-beta": "claude-code-20250219,interleaved-thinking-2025-05-14"}
    if os.environ.get("ANTHROPIC_API_KEY"):
        headers["x-api-key"] = os.environ["ANTHROPIC_API_KEY"]
    if os.environ.get("ANTHROPIC_AUTH_TOKEN"):
        headers["authorization"] = "Bearer " + os.environ["ANTHROPIC_AUTH_TOKEN"]
    return headers


def probe_server() -> None:
    """The real CLI sends one `HEAD /` at launch; failures are ignored."""
    req = urllib.request.Request(base_url() + "/", method="HEAD")
    try:
        urllib.request.build_opener(urllib.request.ProxyHandler({})).open(req, timeout=2).close()
    except (OSError, ValueError):
        pass


def stream_message(body: dict, plan: CrashPlan, on_block, headers: dict) -> dict:
    """Stream one assistant message; call on_block(msg, block) at each block stop.

    `headers` receives the response headers (``request-id``) before the first event.
    """
    msg: dict = {}
    blocks: dict[int, dict] = {}
    partial: dict[int, str] = {}
    try:
        for event, data in stream_sse(base_url() + "/v1/messages?beta=true", body,
                                      model_headers(), plan, headers):
            kind = data.get("type", event)
            if kind == "message_start":
                msg = dict(data["message"], content=[])
            elif kind == "content_block_start":
                blocks[data["index"]] = dict(data["content_block"])
                partial[data["index"]] = ""
            elif kind == "content_block_delta":
                _apply_delta(blocks[data["index"]], data["delta"], partial, data["index"])
            elif kind == "content_block_stop":
                block = _finish_block(blocks[data["index"]], partial[data["index"]])
                msg["content"].append(block)
                on_block(msg, block)
            elif kind == "message_delta":
                msg.update(data.get("delta") or {})
                msg.setdefault("usage", {}).update(data.get("usage") or {})
            elif kind == "message_stop":
                return msg
            elif kind == "error":
                raise ModelError(json.dumps(data.get("error", data)))
    except urllib.error.HTTPError as exc:
        raise ModelError(f"{exc.code} {exc.read().decode(errors='replace')}") from exc
    except (urllib.error.URLError, OSError) as exc:
        raise ModelError(f"Connection error. ({exc})") from exc
    raise ModelError("stream ended before message_stop")


def _apply_delta(block: dict, delta: dict, partial: dict, index: int) -> None:
    if delta.get("type") == "text_delta":
        block["text"] = block.get("text", "") + delta["text"]
    elif delta.get("type") == "input_json_delta":
        partial[index] += delta.get("partial_json", "")
    elif delta.get("type") == "thinking_delta":
        block["thinking"] = block.get("thinking", "") + delta["thinking"]


def _finish_block(block: dict, partial_json: str) -> dict:
    if block.get("type") == "tool_use":
        block["input"] = json.loads(partial_json) if partial_json.strip() else block.get("input", {})
    return block


def full_usage(usage: dict) -> dict:
    return {"input_tokens": usage.get("input_tokens", 0),
            "cache_creation_input_tokens": usage.get("cache_creation_input_tokens", 0),
            "cache_read_input_tokens": usage.get("cache_read_input_tokens", 0),
            "output_tokens": usage.get("output_tokens", 0),
            "server_tool_use": {"web_search_requests": 0, "web_fetch_requests": 0},
            "service_tier": "standard",
            "cache_creation": {"ephemeral_1h_input_tokens": 0, "ephemeral_5m_input_tokens": 0},
            "inference_geo": "", "iterations": [], "speed": "standard"}


# ---------------------------------------------------------------- output

class Output:
    """stdout in the chosen format: stream-json lines, text, json, or interactive."""

    def __init__(self, fmt: str, sid: str, interactive: bool):
        self.fmt, self.sid, self.interactive = fmt, sid, interactive

    def line(self, obj: dict) -> None:
        if self.fmt == "stream-json" and not self.interactive:
            sys.stdout.write(json.dumps(obj, separators=(",", ":"), ensure_ascii=False) + "\n")
            sys.stdout.flush()

    def init(self, cwd: str, model: str, mode: str) -> None:
        self.line({"type": "system", "subtype": "init", "cwd": cwd, "session_id": self.sid,
                   "tools": TOOL_NAMES, "mcp_servers": [], "model": model, "permissionMode": mode,
                   "slash_commands": [], "apiKeySource": "ANTHROPIC_API_KEY",
                   "claude_code_version": VERSION, "output_style": "default", "agents": [],
                   "skills": [], "plugins": [], "uuid": str(uuid.uuid4())})

    def block(self, msg: dict, block: dict, row_uuid: str, request_id: str) -> None:
        if self.interactive:
            say(f"⏺ {block['text']}" if block.get("type") == "text"
                else f"⏺ {block.get('name')}({json.dumps(block.get('input'))})")
        u = msg.get("usage") or {}
        self.line({"type": "assistant", "message": {
            "id": msg.get("id"), "type": "message", "role": "assistant", "model": msg.get("model"),
            "content": [block], "stop_reason": None, "stop_sequence": None,
            "usage": {k: u.get(k, 0) for k in ("input_tokens", "output_tokens",
                                                "cache_creation_input_tokens",
                                                "cache_read_input_tokens")},
            "context_management": None}, "parent_tool_use_id": None, "session_id": self.sid,
            "uuid": row_uuid, "request_id": request_id})

    def tool_result(self, row: dict) -> None:
        self.line({"type": "user", "message": row["message"], "parent_tool_use_id": None,
                   "session_id": self.sid, "uuid": row["uuid"], "timestamp": row["timestamp"],
                   "tool_use_result": row["toolUseResult"]})

    def result(self, turn: "TurnResult") -> None:
        obj = {"type": "result", "subtype": "error_during_execution" if turn.error else "success",
               "is_error": bool(turn.error), "duration_ms": turn.duration_ms,
               "duration_api_ms": turn.api_ms, "num_turns": turn.calls,
               "result": turn.error or turn.text, "stop_reason": turn.stop_reason,
               "session_id": self.sid, "total_cost_usd": 0.0,
               "usage": full_usage(turn.usage), "permission_denials": turn.denials,
               "terminal_reason": "error" if turn.error else "completed",
               "uuid": str(uuid.uuid4())}
        if self.interactive:
            if turn.error:
                say(f"⎿ API Error: {turn.error}")
        elif self.fmt == "stream-json":
            self.line(obj)
        elif self.fmt == "json":
            say(json.dumps(obj, separators=(",", ":"), ensure_ascii=False))
        else:
            say(turn.error or turn.text)


def say(text: str) -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


class TurnResult:
    def __init__(self):
        self.text, self.error, self.stop_reason = "", None, None
        self.calls, self.api_ms, self.duration_ms = 0, 0, 0
        self.usage: dict = {"input_tokens": 0, "output_tokens": 0}
        self.denials: list = []


# ---------------------------------------------------------------- the agent

class Claude:
    """One session: the transcript plus the turn loop."""

    def __init__(self, opts: dict, cwd: str, transcript: Transcript, sid: str, plan: CrashPlan,
                 interactive: bool):
        self.opts, self.cwd, self.t, self.sid, self.plan = opts, cwd, transcript, sid, plan
        self.interactive = interactive
        self.resumed = opts["resume"] is not None
        self.model = opts["model"] or DEFAULT_MODEL
        self.mode = "bypassPermissions" if opts["skip_permissions"] else "default"
        self.out = Output(opts["output_format"], sid, interactive)
        self.first_turn_here = True

    def tail(self) -> dict:
        return {"userType": "external", "entrypoint": "cli" if self.interactive else "sdk-cli",
                "cwd": self.cwd, "sessionId": self.sid, "version": VERSION, "gitBranch": "HEAD"}

    # ---- rows

    def write_queue(self, prompt: str) -> None:
        if self.interactive:
            return
        ts = now_iso()
        self.t.append({"type": "queue-operation", "operation": "enqueue", "timestamp": ts,
                       "sessionId": self.sid, "content": prompt})
        self.t.append({"type": "queue-operation", "operation": "dequeue", "timestamp": ts,
                       "sessionId": self.sid})

    def write_prompt(self, prompt: str, prompt_id: str) -> None:
        extra = {"permissionMode": self.mode}
        if not self.interactive:
            extra["promptSource"] = "sdk"
        self.t.append({"parentUuid": self.t.leaf, "isSidechain": False, "promptId": prompt_id,
                       "type": "user", "message": {"role": "user", "content": prompt},
                       "uuid": str(uuid.uuid4()), "timestamp": now_iso(), **extra, **self.tail()})

    def write_attachments(self) -> None:
        agents = ["claude", "Explore", "general-purpose", "Plan", "statusline-setup"]
        skills = ["init", "review", "security-review"]
        for att in ({"type": "agent_listing_delta", "addedTypes": agents,
                     "addedLines": [f"- {a}: agent" for a in agents], "removedTypes": [],
                     "isInitial": True, "showConcurrencyNote": True},
                    {"type": "skill_listing", "content": "\n".join(f"- {s}: skill" for s in skills),
                     "skillCount": len(skills), "isInitial": True, "names": skills}):
            self.t.append({"parentUuid": self.t.leaf, "isSidechain": False, "attachment": att,
                           "type": "attachment", "uuid": str(uuid.uuid4()), "timestamp": now_iso(),
                           **self.tail()})

    def write_continue(self, prompt_id: str) -> None:
        self.t.append({"parentUuid": self.t.leaf, "isSidechain": False, "promptId": prompt_id,
                       "type": "user", "message": {"role": "user", "content": [
                           {"type": "text", "text": CONTINUE_TEXT}]},
                       "isMeta": True, "uuid": str(uuid.uuid4()), "timestamp": now_iso(),
                       **self.tail()})

    def write_no_response(self) -> None:
        usage = dict(full_usage({}), service_tier=None, inference_geo=None, iterations=None,
                     speed=None)
        msg = {"id": str(uuid.uuid4()), "container": None, "model": "<synthetic>",
               "role": "assistant", "stop_details": None, "stop_reason": "stop_sequence",
               "stop_sequence": "", "type": "message", "usage": usage,
               "content": [{"type": "text", "text": NO_RESPONSE_TEXT}], "context_management": None}
        self.t.append({"parentUuid": self.t.leaf, "isSidechain": False, "type": "assistant",
                       "uuid": str(uuid.uuid4()), "timestamp": now_iso(), "message": msg,
                       "isApiErrorMessage": False, **self.tail()})

    # ---- resume

    def prepare_resume(self) -> list[str]:
        """Move the leaf past a dangling tool_use; return the synthetic rows to add."""
        index = self.t.by_uuid()
        leaf = index.get(self.t.leaf or "")
        if leaf is None:
            return []
        if leaf.get("type") == "assistant" and self._dangling(leaf):
            self.t.leaf = self._drop_dangling(leaf, index)
            return []
        if is_tool_result_row(leaf) or leaf.get("type") == "attachment":
            return ["continue", "no_response"]
        if is_prompt_row(leaf):
            return ["no_response"]
        return []

    def _dangling(self, row: dict) -> bool:
        answered = self.t.answered_ids()
        return any(b.get("type") == "tool_use" and b.get("id") not in answered for b in _blocks(row))

    def _drop_dangling(self, leaf: dict, index: dict) -> str | None:
        msg_id, cur = leaf["message"].get("id"), leaf
        while cur and cur.get("type") == "assistant" and cur["message"].get("id") == msg_id \
                and any(b.get("type") == "tool_use" for b in _blocks(cur)):
            cur = index.get(cur.get("parentUuid") or "")
        return cur["uuid"] if cur else None

    # ---- a turn

    def run_turn(self, prompt: str) -> TurnResult:
        started, prompt_id = time.monotonic(), str(uuid.uuid4())
        copied, self.t.copied = self.t.copied, []
        if copied:
            self.t.append({"type": "mode", "mode": "normal", "sessionId": self.sid})
        new_file = not self.t.rows
        self.write_queue(prompt)
        for row in copied:
            self.t.append(row)
        synthetic = self.prepare_resume() if self.resumed and self.first_turn_here else []
        if "continue" in synthetic:
            self.write_continue(prompt_id)
        if "no_response" in synthetic:
            self.write_no_response()
        self.write_prompt(prompt, prompt_id)
        if new_file:
            self.write_attachments()
        self.first_turn_here = False
        result = TurnResult()
        try:
            self.model_loop(prompt_id, result)
        except ModelError as exc:
            result.error = f"API Error: {exc}"
        self.t.append({"type": "last-prompt", "lastPrompt": prompt, "leafUuid": self.t.leaf,
                       "sessionId": self.sid})
        if self.resumed and not self.opts["fork"]:
            self.t.append({"type": "mode", "mode": "normal", "sessionId": self.sid})
        result.duration_ms = int((time.monotonic() - started) * 1000)
        return result

    def model_loop(self, prompt_id: str, result: TurnResult) -> None:
        while True:
            msg, rows = self.call_model(result)
            tool_rows = [(r, b) for r in rows for b in _blocks(r) if b.get("type") == "tool_use"]
            for row, block in tool_rows:
                self.handle_tool(row, block, prompt_id, result)
            texts = [b["text"] for b in msg["content"] if b.get("type") == "text"]
            result.text = texts[-1] if texts else result.text
            result.stop_reason = msg.get("stop_reason")
            if msg.get("stop_reason") != "tool_use" or not tool_rows:
                return

    def request_body(self) -> dict:
        user_id = json.dumps({"device_id": "0" * 64, "account_uuid": "", "session_id": self.sid})
        return {"model": self.model, "max_tokens": 64000,
                "messages": messages_from_chain(self.t.chain()),
                "system": [{"type": "text", "text": "You are Claude Code, Anthropic's official "
                                                    "CLI for Claude."},
                           {"type": "text", "text": f"Working directory: {self.cwd}"}],
                "tools": tool_definitions(), "metadata": {"user_id": user_id},
                "thinking": {"type": "adaptive"}, "stream": True}

    def call_model(self, result: TurnResult) -> tuple[dict, list[dict]]:
        pending: list[tuple[dict, str]] = []
        headers: dict = {}

        def on_block(msg, block):
            row_uuid = str(uuid.uuid4())
            pending.append((block, row_uuid))
            self.out.block(msg, block, row_uuid, headers.get("request-id", ""))

        t0 = time.monotonic()
        msg = stream_message(self.request_body(), self.plan, on_block, headers)
        result.api_ms += int((time.monotonic() - t0) * 1000)
        result.calls += 1
        for key in ("input_tokens", "output_tokens"):
            result.usage[key] += (msg.get("usage") or {}).get(key, 0)
        request_id = headers.get("request-id", "")
        return msg, [self.write_assistant_row(msg, block, u, request_id) for block, u in pending]

    def write_assistant_row(self, msg: dict, block: dict, row_uuid: str, request_id: str) -> dict:
        message = {"id": msg.get("id"), "type": "message", "role": "assistant",
                   "model": msg.get("model", self.model), "content": [block],
                   "stop_reason": msg.get("stop_reason"), "stop_sequence": msg.get("stop_sequence"),
                   "usage": full_usage(msg.get("usage") or {}), "stop_details": None}
        row = {"parentUuid": self.t.leaf, "isSidechain": False, "message": message,
               "requestId": request_id, "type": "assistant", "uuid": row_uuid,
               "timestamp": now_iso(), **self.tail()}
        self.t.append(row)
        return row

    def handle_tool(self, source: dict, block: dict, prompt_id: str, result: TurnResult) -> None:
        name, args = block.get("name"), block.get("input") or {}
        if name in NEEDS_PERMISSION and self.mode != "bypassPermissions" and not self.interactive:
            content = f"Claude requested permissions to use {name}, but you haven't granted it yet."
            is_error, use_result = True, f"Error: {content}"
            result.denials.append({"tool_name": name, "tool_use_id": block["id"], "tool_input": args})
        else:
            content, is_error, use_result = run_tool(name, args, self.cwd, self.plan)
        tr = {"tool_use_id": block["id"], "type": "tool_result", "content": content}
        if is_error is not None:
            tr["is_error"] = is_error
        row = {"parentUuid": self.t.leaf, "isSidechain": False, "promptId": prompt_id,
               "type": "user", "message": {"role": "user", "content": [tr]},
               "uuid": str(uuid.uuid4()), "timestamp": now_iso(), "toolUseResult": use_result,
               "sourceToolAssistantUUID": source["uuid"], **self.tail()}
        self.t.append(row)
        self.out.tool_result(row)


# ---------------------------------------------------------------- main

def read_prompt(opts: dict) -> str | None:
    if opts["prompt"] is not None:
        return opts["prompt"]
    if not sys.stdin.isatty():
        data = sys.stdin.read().strip()
        return data or None
    return None


def open_transcript(opts: dict, cwd: str, plan: CrashPlan) -> tuple[Transcript, str]:
    project = config_home() / "projects" / project_slug(cwd)
    if opts["resume"] is not None:
        sid = opts["resume"]
        path = project / f"{sid}.jsonl"
        if not sid or not path.is_file():
            if opts["print"] and not sid:
                fail("Error: --resume requires a valid session ID or session title when used "
                     "with --print")
            fail(f"No conversation found with session ID: {sid}")
        t = Transcript(path, plan)
        t.load()
        return forked(t, opts, project, plan) if opts["fork"] else (t, sid)
    sid = opts["session_id"] or str(uuid.uuid4())
    path = project / f"{sid}.jsonl"
    if path.exists():
        fail(f"Error: Session ID {sid} is already in use.")
    return Transcript(path, plan), sid


def forked(source: Transcript, opts: dict, project: Path, plan: CrashPlan) -> tuple[Transcript, str]:
    """`--resume X --fork-session`: a new session (its id from --session-id, else a new one)
    whose file, at its first turn, gets X's conversation rows under the new id (as 2.1.197
    writes them: a `mode` row, the prompt's queue rows, then the copied chain); X's file is
    left as it was."""
    sid = opts["session_id"] or str(uuid.uuid4())
    path = project / f"{sid}.jsonl"
    if path.exists():
        fail(f"Error: Session ID {sid} is already in use.")
    t = Transcript(path, plan)
    t.copied = [dict(row, sessionId=sid) for row in source.chain()]
    return t, sid


def missing_prompt_error(agent: Claude) -> None:
    leaf = agent.t.by_uuid().get(agent.t.leaf or "")
    if leaf is not None and (is_tool_result_row(leaf) or leaf.get("type") == "attachment"):
        fail("Error: --resume requires a valid session ID or session title when used with --print")
    fail("Error: No deferred tool marker found in the resumed session. "
         "Provide a prompt to continue the conversation.")


def headless(agent: Claude, prompt: str | None) -> int:
    if not prompt:
        if agent.resumed:
            missing_prompt_error(agent)
        fail("Error: Input must be provided either through stdin or as a prompt argument "
             "when using --print")
    model = agent.model if agent.resumed or agent.opts["model"] else agent.model + "[1m]"
    agent.out.init(agent.cwd, model, agent.mode)
    result = agent.run_turn(prompt)
    agent.out.result(result)
    agent.plan.turn_ended()
    return 1 if result.error else 0


def interactive(agent: Claude, prompt: str | None) -> int:
    say(f"✻ Welcome to Claude Code v{VERSION} (fake)")
    say(f"  cwd: {agent.cwd}   session: {agent.sid}")
    while True:
        if prompt is None:
            sys.stdout.write("› ")
            sys.stdout.flush()
            line = sys.stdin.readline()
            if not line:
                return 0
            prompt = line.strip()
        if prompt in ("/exit", "/quit"):
            return 0
        if prompt:
            agent.out.result(agent.run_turn(prompt))
        prompt = None


def main(argv: list[str] | None = None) -> int:
    opts = parse_args(sys.argv[1:] if argv is None else argv)
    if opts["version"]:
        say(f"{VERSION} (Claude Code)")
        return 0
    if opts["help"]:
        say("Usage: claude [options] [command] [prompt]")
        return 0
    validate(opts)
    plan = CrashPlan.from_env()
    plan.check_start()
    cwd = os.getcwd()
    transcript, sid = open_transcript(opts, cwd, plan)
    is_interactive = not opts["print"]
    agent = Claude(opts, cwd, transcript, sid, plan, is_interactive)
    home = config_home()
    ensure_global_config(home)
    (home / "projects" / project_slug(cwd) / "memory").mkdir(parents=True, exist_ok=True)
    pid_file = write_pid_file(home, sid, cwd)
    probe_server()
    try:
        if is_interactive:
            return interactive(agent, opts["prompt"])
        return headless(agent, read_prompt(opts))
    finally:
        pid_file.unlink(missing_ok=True)


if __name__ == "__main__":
    sys.exit(main())
