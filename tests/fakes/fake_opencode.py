#!/usr/bin/env python3
"""Fake `opencode` CLI (OpenCode 1.18.33) for dh's tests: the parts dh can see, nothing more.

Design
------
* **One SQLite database, the real schema.** `$OPENCODE_DB` (a relative name lives in the data
  dir) else `$XDG_DATA_HOME/opencode/opencode.db`. It is created from `opencode_schema.sql`
  (a byte copy of the real `.schema`) with the real PRAGMAs (WAL, synchronous=NORMAL,
  busy_timeout=5000, foreign_keys=ON). The process leaves with `os._exit`, so, as with the
  real program, committed data may still sit in `opencode.db-wal` (a plain `cp` of the `.db`
  alone loses it).
* **Rows are upserts, written as the turn goes,** each in its own transaction together with its
  event-sourcing row (`event` + `event_sequence`): the session row (`session.created.1`,
  `session.updated.1`), the user message and its text part, then per model call one assistant
  message (parentID = the user message) with `step-start`, `text`, `tool` (pending -> running ->
  completed/error, updated in place) and `step-finish` parts (`message.updated.1`,
  `message.part.updated.1`). The `data` JSON keys match the real rows.
* **Crashes** come from `harness_common.CrashPlan` (`DH_FAKE_CRASH`): a "record" is one committed
  message or part upsert; `during-model=N` fires on the first streamed chunk of main call N,
  right after its `step-start` part is committed, which leaves the interrupted assistant message
  with only `step-start`, exactly as a real SIGKILL while waiting on the model does.
* **The conversation sent to the model is rebuilt from the database before every call**, so a
  `--session` resume sees what the real one sees: assistant messages with no text or tool part
  (the interrupted ones) are skipped; a tool part left `pending`/`running` is answered with
  "[Tool execution was interrupted]"; an `error` part with its own `error` text.
* **The model** is any Chat Completions endpoint: `provider.<p>.options.baseURL` from
  `$XDG_CONFIG_HOME/opencode/opencode.json` (plus `$OPENCODE_CONFIG`, the project's
  `opencode.json`, `$OPENCODE_CONFIG_CONTENT`), `POST <baseURL>/chat/completions`, streamed, with
  `stream_options.include_usage` and the tools bash, edit, glob, grep, read, todowrite, write.
  Without `--title` a new session first makes the tool-less title side call, like the real one.
* **The project directory is `$PWD`** when it names a directory, else `getcwd()` (the real one
  takes `$PWD`). Non-git directories belong to project `global` (worktree `/`).
* `export` prints the real export shape; `import` upserts the session (re-homed to the import's
  own cwd) and inserts messages and parts with on-conflict-do-nothing.

Run as a script (the installed `opencode` executable) or import for the helpers.
Standard library only; nothing here imports dh.
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import fnmatch
import json
import os
import random
import re
import select
import sqlite3
import string
import subprocess
import sys
import time
import urllib.error
from datetime import datetime, timezone
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.fakes import harness_common as hc  # noqa: E402

VERSION = "1.18.33"
SCHEMA_FILE = Path(__file__).resolve().parent / "opencode_schema.sql"
USER_AGENT = f"opencode/{VERSION} ai-sdk/provider-utils/4.0.23 runtime/bun/1.3.14"
INTERRUPTED = "[Tool execution was interrupted]"
PRAGMAS = ("PRAGMA journal_mode=WAL", "PRAGMA synchronous=NORMAL",
           "PRAGMA busy_timeout=5000", "PRAGMA foreign_keys=ON")
RUN_PERMISSION = [{"permission": p, "pattern": "*", "action": "deny"}
                  for p in ("question", "plan_enter", "plan_exit")]
FINISH = {"tool_calls": "tool-calls", "function_call": "tool-calls", "stop": "stop",
          "length": "length", "content_filter": "content-filter"}
MAX_STEPS = 100
BASE62 = string.digits + string.ascii_uppercase + string.ascii_lowercase
ADJECTIVES = ("jolly", "brave", "calm", "eager", "quiet", "swift", "witty", "sunny", "misty", "lucky")
NOUNS = ("otter", "falcon", "panda", "cactus", "comet", "harbor", "maple", "pixel", "river", "tiger")
SYSTEM_PROMPT = ("You are opencode, an interactive CLI tool that helps users with software "
                 "engineering tasks. Use the tools available to you to assist the user.")
TITLE_PROMPT = ("You are a title generator. You output ONLY a thread title. Nothing else.\n"
                "Generate a brief title (at most 50 characters) for the conversation below.")


# ---------------------------------------------------------------- small helpers


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def dumps(obj) -> str:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def zero_tokens() -> dict:
    return {"input": 0, "output": 0, "reasoning": 0, "cache": {"read": 0, "write": 0}}


def number(value):
    """0.0 -> 0, as the real JSON has it."""
    return int(value) if float(value).is_integer() else value


_id_state = {"ms": 0, "n": 0}


def new_id(prefix: str, descending: bool = False) -> str:
    """OpenCode ids: 12 hex digits of (ms * 0x1000 + counter), inverted for sessions, + 14 base62."""
    ms = now_ms()
    if ms != _id_state["ms"]:
        _id_state.update(ms=ms, n=0)
    _id_state["n"] += 1
    value = ms * 0x1000 + _id_state["n"]
    value = (~value if descending else value) & ((1 << 48) - 1)
    tail = "".join(random.choice(BASE62) for _ in range(14))
    return f"{prefix}_{value:012x}{tail}"


def new_slug() -> str:
    return f"{random.choice(ADJECTIVES)}-{random.choice(NOUNS)}"


# ---------------------------------------------------------------- environment


def data_dir() -> Path:
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return Path(base) / "opencode"


def db_path() -> Path:
    name = os.environ.get("OPENCODE_DB")
    if not name:
        return data_dir() / "opencode.db"
    return Path(name) if os.path.isabs(name) else data_dir() / name


def config_dir() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / "opencode"


def work_dir() -> str:
    """The project directory: $PWD first (as the real one), else getcwd()."""
    pwd = os.environ.get("PWD")
    if pwd and os.path.isabs(pwd) and os.path.isdir(pwd):
        return os.path.normpath(pwd)
    return os.getcwd()


def merge(base: dict, extra: dict) -> dict:
    out = dict(base)
    for key, value in extra.items():
        both = isinstance(value, dict) and isinstance(out.get(key), dict)
        out[key] = merge(out[key], value) if both else value
    return out


def read_json_file(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    except ValueError as exc:
        hc.fail(f"Error: Config file at {path} is not valid JSON: {exc}")


def load_config(cwd: str) -> dict:
    cfg = {}
    for path in (config_dir() / "opencode.json", config_dir() / "config.json"):
        cfg = merge(cfg, read_json_file(path))
    if os.environ.get("OPENCODE_CONFIG"):
        cfg = merge(cfg, read_json_file(Path(os.environ["OPENCODE_CONFIG"])))
    cfg = merge(cfg, read_json_file(Path(cwd) / "opencode.json"))
    if os.environ.get("OPENCODE_CONFIG_CONTENT"):
        cfg = merge(cfg, json.loads(os.environ["OPENCODE_CONFIG_CONTENT"]))
    return cfg


class ModelRef:
    """A resolved `provider/model`: where to POST and what to put in the body."""

    def __init__(self, cfg: dict, spec: str | None):
        spec = spec or cfg.get("model") or self._first_model(cfg)
        self.provider, _, self.model = spec.partition("/")
        pcfg = (cfg.get("provider") or {}).get(self.provider) or {}
        options = pcfg.get("options") or {}
        self.base_url = (options.get("baseURL") or "").rstrip("/")
        if not self.base_url or not self.model:
            hc.fail(f"Error: ProviderModelNotFoundError: {spec} (no provider.{self.provider}.options.baseURL)")
        self.api_key = options.get("apiKey")
        limit = ((pcfg.get("models") or {}).get(self.model) or {}).get("limit") or {}
        self.max_tokens = limit.get("output", 32000)

    @staticmethod
    def _first_model(cfg: dict) -> str:
        for name, pcfg in (cfg.get("provider") or {}).items():
            for model in (pcfg.get("models") or {}):
                return f"{name}/{model}"
        hc.fail("Error: no model configured (set \"model\" in opencode.json or pass --model)")

    def headers(self, session_id: str) -> dict:
        hdrs = {"user-agent": USER_AGENT, "x-session-id": session_id, "x-session-affinity": session_id}
        if self.api_key:
            hdrs["authorization"] = f"Bearer {self.api_key}"
        return hdrs

    def ref(self) -> dict:
        return {"providerID": self.provider, "modelID": self.model}


def find_project(cwd: str) -> tuple[str, str, str | None]:
    """(project id, worktree, vcs): the git root commit for a repository, else `global`."""
    top = next((p for p in [Path(cwd), *Path(cwd).parents] if (p / ".git").exists()), None)
    if top is None:
        return "global", "/", None
    try:
        out = subprocess.run(["git", "rev-list", "--max-parents=0", "--all"], cwd=top,
                             capture_output=True, text=True, timeout=10).stdout.split()
    except (OSError, subprocess.SubprocessError):
        out = []
    return (sorted(out)[0], str(top), "git") if out else ("global", "/", None)


def rel_path(path, worktree: str) -> str:
    rel = os.path.relpath(str(path), worktree)
    return "" if rel == "." else rel


# ---------------------------------------------------------------- database


def schema_sql() -> str:
    """The real schema, made idempotent (IF NOT EXISTS) so racing creators are harmless."""
    sql = SCHEMA_FILE.read_text()
    sql = re.sub(r"CREATE TABLE `", "CREATE TABLE IF NOT EXISTS `", sql)
    return re.sub(r"CREATE (UNIQUE )?INDEX `", r"CREATE \1INDEX IF NOT EXISTS `", sql)


class Store:
    """The OpenCode database: rows plus their event-sourcing rows, one transaction per write."""

    def __init__(self, path: Path):
        path.parent.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(str(path), timeout=5, isolation_level=None)
        self.db.row_factory = sqlite3.Row
        for pragma in PRAGMAS:
            self.db.execute(pragma)
        if not self.db.execute("SELECT 1 FROM sqlite_master WHERE name='session'").fetchone():
            self.db.executescript("BEGIN IMMEDIATE;\n" + schema_sql() + "\nCOMMIT;")

    @contextlib.contextmanager
    def tx(self):
        self.db.execute("BEGIN IMMEDIATE")
        try:
            yield self.db
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        self.db.execute("COMMIT")

    # reads -------------------------------------------------------------------

    def session(self, sid: str) -> dict | None:
        row = self.db.execute("SELECT * FROM session WHERE id=?", (sid,)).fetchone()
        return dict(row) if row else None

    def sessions(self, project_id: str | None = None) -> list[dict]:
        sql, args = "SELECT * FROM session", ()
        if project_id:
            sql, args = sql + " WHERE project_id=?", (project_id,)
        return [dict(r) for r in self.db.execute(sql + " ORDER BY time_updated DESC, id", args)]

    def messages(self, sid: str) -> list[dict]:
        rows = self.db.execute("SELECT * FROM message WHERE session_id=? ORDER BY time_created, id", (sid,))
        return [dict(r) for r in rows]

    def parts(self, mid: str) -> list[dict]:
        rows = self.db.execute("SELECT * FROM part WHERE message_id=? ORDER BY id", (mid,))
        return [dict(r) for r in rows]

    # writes (call inside tx) -------------------------------------------------

    def ensure_project(self, pid: str, worktree: str, vcs: str | None) -> None:
        now = now_ms()
        self.db.execute("INSERT INTO project (id, worktree, vcs, time_created, time_updated, sandboxes)"
                        " VALUES (?,?,?,?,?,'[]') ON CONFLICT(id) DO NOTHING", (pid, worktree, vcs, now, now))

    def upsert_session(self, row: dict) -> None:
        cols = ", ".join(row)
        updates = ", ".join(f"{c}=excluded.{c}" for c in row if c != "id")
        self.db.execute(f"INSERT INTO session ({cols}) VALUES ({', '.join('?' * len(row))})"
                        f" ON CONFLICT(id) DO UPDATE SET {updates}", tuple(row.values()))

    def put_message(self, sid: str, mid: str, data: dict, created: int, ignore: bool = False) -> None:
        action = "NOTHING" if ignore else "UPDATE SET data=excluded.data, time_updated=excluded.time_updated"
        self.db.execute("INSERT INTO message (id, session_id, time_created, time_updated, data)"
                        f" VALUES (?,?,?,?,?) ON CONFLICT(id) DO {action}",
                        (mid, sid, created, max(created, now_ms()) if not ignore else created, dumps(data)))

    def put_part(self, sid: str, mid: str, pid: str, data: dict, created: int, ignore: bool = False) -> None:
        action = "NOTHING" if ignore else "UPDATE SET data=excluded.data, time_updated=excluded.time_updated"
        self.db.execute("INSERT INTO part (id, message_id, session_id, time_created, time_updated, data)"
                        f" VALUES (?,?,?,?,?,?) ON CONFLICT(id) DO {action}",
                        (pid, mid, sid, created, created if ignore else now_ms(), dumps(data)))

    def replace_todos(self, sid: str, todos: list[dict]) -> None:
        now = now_ms()
        self.db.execute("DELETE FROM todo WHERE session_id=?", (sid,))
        for pos, todo in enumerate(todos):
            self.db.execute("INSERT INTO todo VALUES (?,?,?,?,?,?,?)",
                            (sid, todo["content"], todo["status"], todo["priority"], pos, now, now))

    def event(self, sid: str, etype: str, data: dict) -> None:
        row = self.db.execute("SELECT seq FROM event_sequence WHERE aggregate_id=?", (sid,)).fetchone()
        seq = 0 if row is None else row[0] + 1
        self.db.execute("INSERT INTO event_sequence (aggregate_id, seq) VALUES (?,?)"
                        " ON CONFLICT(aggregate_id) DO UPDATE SET seq=excluded.seq", (sid, seq))
        self.db.execute("INSERT INTO event (id, aggregate_id, seq, type, data) VALUES (?,?,?,?,?)",
                        (new_id("evt"), sid, seq, etype, dumps(data)))


def session_info(row: dict) -> dict:
    """A session row as the real `Session.Info` JSON (export `info`, event `info`)."""
    info = {"id": row["id"], "slug": row["slug"], "projectID": row["project_id"],
            "directory": row["directory"], "path": row["path"]}
    if row.get("parent_id"):
        info["parentID"] = row["parent_id"]
    info["title"] = row["title"]
    if row.get("agent"):
        info["agent"] = row["agent"]
    if row.get("model"):
        info["model"] = json.loads(row["model"])
    info["version"] = row["version"]
    if row.get("summary_additions") is not None:
        info["summary"] = {"additions": row["summary_additions"], "deletions": row["summary_deletions"],
                           "files": row["summary_files"]}
    info["cost"] = number(row["cost"])
    info["tokens"] = {"input": row["tokens_input"], "output": row["tokens_output"],
                      "reasoning": row["tokens_reasoning"],
                      "cache": {"read": row["tokens_cache_read"], "write": row["tokens_cache_write"]}}
    if row.get("permission"):
        info["permission"] = json.loads(row["permission"])
    info["time"] = {"created": row["time_created"], "updated": row["time_updated"]}
    return info


def session_row_from_info(info: dict, directory: str, project: tuple) -> dict:
    """A `session` row for `info`, homed at `directory` (import ignores info.directory)."""
    tokens, summary = info.get("tokens") or zero_tokens(), info.get("summary") or {}
    time_ = info.get("time") or {}
    return {"id": info["id"], "project_id": project[0], "parent_id": info.get("parentID"),
            "slug": info.get("slug") or new_slug(), "directory": directory,
            "path": rel_path(directory, project[1]), "title": info.get("title") or "",
            "version": info.get("version") or VERSION, "summary_additions": summary.get("additions"),
            "summary_deletions": summary.get("deletions"), "summary_files": summary.get("files"),
            "cost": info.get("cost", 0), "tokens_input": tokens.get("input", 0),
            "tokens_output": tokens.get("output", 0), "tokens_reasoning": tokens.get("reasoning", 0),
            "tokens_cache_read": (tokens.get("cache") or {}).get("read", 0),
            "tokens_cache_write": (tokens.get("cache") or {}).get("write", 0),
            "permission": dumps(info["permission"]) if "permission" in info else None,
            "agent": info.get("agent"), "model": dumps(info["model"]) if "model" in info else None,
            "time_created": time_.get("created", now_ms()), "time_updated": time_.get("updated", now_ms())}


# ---------------------------------------------------------------- recorder: writes + events + crashes


class Recorder:
    """Writes one session's rows, each with its event, and tells the crash plan about records."""

    def __init__(self, store: Store, sid: str, plan: hc.CrashPlan):
        self.store, self.sid, self.plan = store, sid, plan

    def row(self) -> dict:
        return self.store.session(self.sid)

    def session(self, etype: str = "session.updated.1", **cols) -> None:
        with self.store.tx():
            row = {**self.row(), **cols, "time_updated": now_ms()}
            self.store.upsert_session(row)
            self.store.event(self.sid, etype, {"sessionID": self.sid, "info": session_info(row)})

    def add_tokens(self, tokens: dict) -> None:
        with self.store.tx():
            self.store.db.execute(
                "UPDATE session SET tokens_input=tokens_input+?, tokens_output=tokens_output+?,"
                " tokens_reasoning=tokens_reasoning+?, tokens_cache_read=tokens_cache_read+?,"
                " tokens_cache_write=tokens_cache_write+? WHERE id=?",
                (tokens["input"], tokens["output"], tokens["reasoning"], tokens["cache"]["read"],
                 tokens["cache"]["write"], self.sid))

    def message(self, mid: str, data: dict, created: int) -> None:
        with self.store.tx():
            self.store.put_message(self.sid, mid, data, created)
            info = {"id": mid, "sessionID": self.sid, **data}
            self.store.event(self.sid, "message.updated.1", {"sessionID": self.sid, "info": info})
        self.plan.record_written()

    def part(self, mid: str, pid: str, data: dict, created: int) -> dict:
        """Upsert a part; return it in the API shape (with ids) for stdout."""
        at = now_ms()
        with self.store.tx():
            self.store.put_part(self.sid, mid, pid, data, created)
            part = {"id": pid, "sessionID": self.sid, "messageID": mid, **data}
            self.store.event(self.sid, "message.part.updated.1",
                             {"sessionID": self.sid, "part": part, "time": at})
        self.plan.record_written()
        if data["type"] == "tool":
            return {**data, "id": pid, "sessionID": self.sid, "messageID": mid}
        return {"id": pid, "messageID": mid, "sessionID": self.sid, **data}


# ---------------------------------------------------------------- stdout and logs


class Output:
    """`run` stdout: JSON lines (`--format json`) or plain text."""

    def __init__(self, fmt: str, sid: str):
        self.fmt, self.sid = fmt, sid

    def emit(self, etype: str, part: dict) -> None:
        if self.fmt == "json":
            self._line(dumps({"type": etype, "timestamp": now_ms(), "sessionID": self.sid, "part": part}))
        elif etype == "text":
            self._line(part.get("text", ""))
        elif etype == "tool_use":
            self._line(f"| {part['tool']:<8} {part['state'].get('title', '')}")

    def error(self, error: dict) -> None:
        if self.fmt == "json":
            self._line(dumps({"type": "error", "timestamp": now_ms(), "sessionID": self.sid, "error": error}))
        else:
            sys.stderr.write(f"Error: {error['data'].get('message', error['name'])}\n")

    @staticmethod
    def _line(text: str) -> None:
        sys.stdout.write(text + "\n")
        sys.stdout.flush()


class Log:
    """OpenCode-style log lines, to stderr with --print-logs, else to <data>/log/<time>.log."""

    def __init__(self, to_stderr: bool):
        self.start = self.last = now_ms()
        self.stream = sys.stderr if to_stderr else self._file()

    @staticmethod
    def _file():
        try:
            folder = data_dir() / "log"
            folder.mkdir(parents=True, exist_ok=True)
            return open(folder / (datetime.now().strftime("%Y-%m-%dT%H%M%S") + ".log"), "a")
        except OSError:
            return None

    def info(self, service: str, message: str, **fields) -> None:
        if self.stream is None:
            return
        now = now_ms()
        stamp = datetime.now().strftime("%Y-%m-%dT%H:%M:%S")
        extra = "".join(f" {k}={v}" for k, v in fields.items())
        self.stream.write(f"INFO  {stamp} +{now - self.last}ms service={service}"
                          f" message=\"{message}\"{extra}\n")
        self.stream.flush()
        self.last = now


# ---------------------------------------------------------------- conversation from the database


def user_content(parts: list[dict]) -> str:
    return "\n".join(p["text"] for p in parts if p["type"] == "text" and not p.get("ignored"))


def tool_result_text(part: dict) -> str:
    state = part.get("state") or {}
    if state.get("status") == "completed":
        return state.get("output") or ""
    if state.get("status") == "error":
        return state.get("error") or INTERRUPTED
    return INTERRUPTED


def assistant_entries(parts: list[dict]) -> list[dict]:
    """Chat messages for one stored assistant message; none for an empty (interrupted) one."""
    texts = [p["text"] for p in parts if p["type"] == "text" and p.get("text")]
    tools = [p for p in parts if p["type"] == "tool"]
    if not texts and not tools:
        return []
    entry = {"role": "assistant", "content": "".join(texts)}
    if tools:
        entry["tool_calls"] = [{"id": p["callID"], "type": "function",
                                "function": {"name": p["tool"], "arguments": dumps(p["state"].get("input") or {})}}
                               for p in tools]
    results = [{"role": "tool", "tool_call_id": p["callID"], "content": tool_result_text(p)} for p in tools]
    return [entry, *results]


def history(store: Store, sid: str) -> list[dict]:
    out = []
    for msg in store.messages(sid):
        parts = [json.loads(p["data"]) for p in store.parts(msg["id"])]
        if json.loads(msg["data"]).get("role") == "user":
            out.append({"role": "user", "content": user_content(parts)})
        else:
            out.extend(assistant_entries(parts))
    return out


def system_message(directory: str) -> dict:
    env = (f"<env>\n  Working directory: {directory}\n  Platform: {sys.platform}\n"
           f"  Today's date: {datetime.now():%a %b %d %Y}\n</env>")
    return {"role": "system", "content": f"{SYSTEM_PROMPT}\n\n{env}"}


def _fn(name: str, description: str, props: dict, required: list[str]) -> dict:
    params = {"type": "object", "properties": props, "required": required, "additionalProperties": False}
    return {"type": "function", "function": {"name": name, "description": description, "parameters": params}}


S, N, B = {"type": "string"}, {"type": "number"}, {"type": "boolean"}
TODO_ITEM = {"type": "object", "properties": {"content": S, "status": S, "priority": S, "id": S},
             "required": ["content", "status", "priority"]}
TOOL_SPECS = [
    _fn("bash", "Executes a bash command in the session directory.",
        {"command": S, "timeout": N, "workdir": S, "description": S}, ["command", "description"]),
    _fn("edit", "Performs exact string replacements in files.",
        {"filePath": S, "oldString": S, "newString": S, "replaceAll": B}, ["filePath", "oldString", "newString"]),
    _fn("glob", "Fast file pattern matching tool.", {"pattern": S, "path": S}, ["pattern"]),
    _fn("grep", "Fast content search tool.", {"pattern": S, "path": S, "include": S}, ["pattern"]),
    _fn("read", "Reads a file from the local filesystem.",
        {"filePath": S, "offset": N, "limit": N}, ["filePath"]),
    _fn("todowrite", "Create and manage a structured task list for the session.",
        {"todos": {"type": "array", "items": TODO_ITEM}}, ["todos"]),
    _fn("write", "Writes a file to the local filesystem.", {"filePath": S, "content": S}, ["filePath", "content"]),
]


def chat_body(model: ModelRef, messages: list[dict], tools: bool = True) -> dict:
    body = {"model": model.model, "max_tokens": model.max_tokens}
    if tools:
        body.update(tool_choice="auto")
    body.update(stream=True, stream_options={"include_usage": True})
    if tools:
        body["tools"] = TOOL_SPECS
    body["messages"] = messages
    return body


# ---------------------------------------------------------------- tools


class ToolError(Exception):
    """A tool failure; becomes a part with state.status "error"."""


class ToolContext:
    def __init__(self, directory: str, worktree: str, plan: hc.CrashPlan, recorder: Recorder):
        self.directory, self.worktree, self.plan, self.recorder = directory, worktree, plan, recorder

    def path(self, value) -> Path:
        if not value:
            raise ToolError("filePath is required")
        return hc.resolve(value, self.directory)

    def title(self, path) -> str:
        return rel_path(path, self.worktree)


def tool_bash(args: dict, ctx: ToolContext) -> tuple[str, dict, str]:
    cwd = hc.resolve(args["workdir"], ctx.directory) if args.get("workdir") else ctx.directory
    timeout = (args.get("timeout") or 120_000) / 1000
    code, output = hc.run_shell(args["command"], cwd, ctx.plan, timeout=timeout)
    shown = output if output.strip() else "(no output)"
    return shown, {"output": shown, "exit": code, "truncated": False}, args["command"]


def tool_write(args: dict, ctx: ToolContext) -> tuple[str, dict, str]:
    target = ctx.path(args.get("filePath"))
    ctx.plan.tool_started()
    exists = target.exists()
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(args.get("content", ""))
    meta = {"diagnostics": {}, "filepath": str(target), "exists": exists, "truncated": False}
    return "Wrote file successfully.", meta, ctx.title(target)


def read_directory(target: Path) -> str:
    entries = sorted(e.name + ("/" if e.is_dir() else "") for e in target.iterdir())
    return f"<path>{target}</path>\n<type>directory</type>\n<entries>\n" + "\n".join(entries) + "\n</entries>"


def tool_read(args: dict, ctx: ToolContext) -> tuple[str, dict, str]:
    target = ctx.path(args.get("filePath"))
    ctx.plan.tool_started()
    if target.is_dir():
        return read_directory(target), {"truncated": False}, ctx.title(target)
    if not target.exists():
        raise ToolError(f"File not found: {target}")
    lines = target.read_text(errors="replace").split("\n")
    lines = lines[:-1] if lines and lines[-1] == "" else lines
    start = max(1, int(args.get("offset") or 1))
    shown = lines[start - 1:start - 1 + int(args.get("limit") or 2000)]
    end, total = start + len(shown) - 1, len(lines)
    more = end < total
    tail = (f"(File has more lines. Use 'offset' parameter to read beyond line {end})" if more
            else f"(End of file - total {total} lines)")
    body = "\n".join(f"{start + i}: {line}" for i, line in enumerate(shown))
    output = f"<path>{target}</path>\n<type>file</type>\n<content>\n{body}\n\n{tail}\n</content>"
    display = {"type": "file", "path": str(target), "text": "\n".join(shown), "lineStart": start,
               "lineEnd": end, "totalLines": total, "truncated": more}
    meta = {"preview": "\n".join(shown[:20]), "truncated": more, "loaded": [], "display": display}
    return output, meta, ctx.title(target)


def tool_edit(args: dict, ctx: ToolContext) -> tuple[str, dict, str]:
    target = ctx.path(args.get("filePath"))
    ctx.plan.tool_started()
    old, new = args.get("oldString", ""), args.get("newString", "")
    before = target.read_text() if target.exists() else ""
    if old == "":
        after = new
    else:
        count = before.count(old)
        if count == 0:
            raise ToolError("Could not find oldString in the file. It must match exactly, including "
                            "whitespace, indentation, and line endings.")
        if count > 1 and not args.get("replaceAll"):
            raise ToolError("Found multiple matches for oldString. Provide more surrounding context "
                            "to make the match unique.")
        after = before.replace(old, new) if args.get("replaceAll") else before.replace(old, new, 1)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(after)
    diff = "".join(difflib.unified_diff(before.splitlines(True), after.splitlines(True), str(target), str(target)))
    return "Edit applied successfully.", {"diagnostics": {}, "diff": diff, "truncated": False}, ctx.title(target)


def tool_glob(args: dict, ctx: ToolContext) -> tuple[str, dict, str]:
    base = hc.resolve(args.get("path") or ctx.directory, ctx.directory)
    ctx.plan.tool_started()
    found = [p for p in base.glob(args["pattern"]) if p.is_file() and ".git" not in p.parts]
    found.sort(key=lambda p: p.stat().st_mtime, reverse=True)
    output = "\n".join(str(p) for p in found[:100]) or "No files found"
    return output, {"count": len(found[:100]), "truncated": len(found) > 100}, ctx.title(base)


def grep_files(base: Path, include: str | None):
    if base.is_file():
        yield base
        return
    for root, dirs, files in os.walk(base):
        dirs[:] = [d for d in dirs if d != ".git"]
        for name in sorted(files):
            if not include or fnmatch.fnmatch(name, include):
                yield Path(root) / name


def tool_grep(args: dict, ctx: ToolContext) -> tuple[str, dict, str]:
    base = hc.resolve(args.get("path") or ctx.directory, ctx.directory)
    ctx.plan.tool_started()
    try:
        regex = re.compile(args["pattern"])
    except re.error as exc:
        raise ToolError(f"Invalid regex pattern: {exc}") from exc
    hits = []
    for path in grep_files(base, args.get("include")):
        with contextlib.suppress(OSError):
            lines = path.read_text(errors="replace").split("\n")
            found = [f"  Line {i}: {line}" for i, line in enumerate(lines, 1) if regex.search(line)]
            hits += [f"{path}:", *found, ""] if found else []
    count = sum(1 for h in hits if h.startswith("  Line "))
    output = f"Found {count} matches\n" + "\n".join(hits) if count else "No files found"
    return output.rstrip("\n"), {"matches": count, "truncated": False}, args["pattern"]


def tool_todowrite(args: dict, ctx: ToolContext) -> tuple[str, dict, str]:
    ctx.plan.tool_started()
    todos = [{"content": t.get("content", ""), "status": t.get("status", "pending"),
              "priority": t.get("priority", "medium")} for t in args.get("todos") or []]
    with ctx.recorder.store.tx():
        ctx.recorder.store.replace_todos(ctx.recorder.sid, todos)
    open_count = sum(1 for t in todos if t["status"] != "completed")
    return json.dumps(todos, indent=2), {"todos": todos, "truncated": False}, f"{open_count} todos"


TOOLS = {"bash": tool_bash, "edit": tool_edit, "glob": tool_glob, "grep": tool_grep,
         "read": tool_read, "todowrite": tool_todowrite, "write": tool_write}


def run_tool(name: str, args: dict, ctx: ToolContext) -> tuple[str, dict, str]:
    if name not in TOOLS:
        raise ToolError(f"Model tried to call unavailable tool '{name}'. Available tools: {', '.join(TOOLS)}.")
    try:
        return TOOLS[name](args, ctx)
    except ToolError:
        raise
    except (OSError, KeyError, TypeError, ValueError) as exc:
        raise ToolError(f"{type(exc).__name__}: {exc}") from exc


# ---------------------------------------------------------------- one model call


class Step:
    """One model call = one assistant message with step-start, text, tool and step-finish parts."""

    def __init__(self, turn: "Turn"):
        self.turn, self.rec = turn, turn.rec
        self.mid, self.created = new_id("msg"), now_ms()
        self.data = {"parentID": turn.user_mid, "role": "assistant", "mode": "build", "agent": "build",
                     "path": {"cwd": turn.directory, "root": turn.worktree}, "cost": 0,
                     "tokens": zero_tokens(), "modelID": turn.model.model,
                     "providerID": turn.model.provider, "time": {"created": self.created}}
        self.started = False
        self.text = {"pid": None, "created": 0, "start": 0, "chunks": []}
        self.calls: dict[int, dict] = {}
        self.finish, self.usage = None, {}

    def run(self) -> str:
        """Call the model, run the tools it asks for, record everything; return the finish reason."""
        self.rec.message(self.mid, self.data, self.created)
        self.turn.before_step()
        body = chat_body(self.turn.model, [system_message(self.turn.directory), *history(self.rec.store, self.rec.sid)])
        url = self.turn.model.base_url + "/chat/completions"
        for _event, chunk in hc.stream_sse(url, body, self.turn.model.headers(self.rec.sid), None):
            self.on_chunk(chunk)
        self.end_text()
        self.run_tools()
        return self.finish_step()

    # streaming -----------------------------------------------------------------

    def on_chunk(self, chunk: dict) -> None:
        if not self.started:
            self.started = True
            self.emit("step_start", self.part(new_id("prt"), {"type": "step-start"}))
            self.turn.plan.model_event()
        if chunk.get("usage"):
            self.usage = chunk["usage"]
        for choice in chunk.get("choices") or []:
            delta = choice.get("delta") or choice.get("message") or {}
            if delta.get("content"):
                self.add_text(delta["content"])
            for call in delta.get("tool_calls") or []:
                self.add_call(call)
            if choice.get("finish_reason"):
                self.finish = choice["finish_reason"]

    def add_text(self, text: str) -> None:
        if self.text["pid"] is None:
            start = now_ms()
            self.text.update(pid=new_id("prt"), created=start, start=start)
            self.part(self.text["pid"], {"type": "text", "text": "", "time": {"start": start}}, start)
        self.text["chunks"].append(text)

    def add_call(self, delta: dict) -> None:
        index = delta.get("index", len(self.calls))
        call = self.calls.get(index)
        if call is None:
            call = self.calls[index] = {"pid": new_id("prt"), "created": now_ms(), "id": delta.get("id"),
                                        "name": (delta.get("function") or {}).get("name"), "args": ""}
            self.part(call["pid"], self.tool_data(call, {"status": "pending", "input": {}, "raw": ""}),
                      call["created"])
        call["args"] += (delta.get("function") or {}).get("arguments") or ""

    def end_text(self) -> None:
        if self.text["pid"] is None:
            return
        data = {"type": "text", "text": "".join(self.text["chunks"]),
                "time": {"start": self.text["start"], "end": now_ms()}}
        self.emit("text", self.part(self.text["pid"], data, self.text["created"]))

    # tools ---------------------------------------------------------------------

    def run_tools(self) -> None:
        for index in sorted(self.calls):
            self.run_call(self.calls[index])

    def run_call(self, call: dict) -> None:
        start = now_ms()
        try:
            args = json.loads(call["args"] or "{}")
        except ValueError as exc:
            return self.tool_done(call, {}, start, error=f"The arguments provided to the tool are invalid: {exc}")
        running = {"status": "running", "input": args, "time": {"start": start}}
        self.part(call["pid"], self.tool_data(call, running), call["created"])
        if call["name"] == "bash":  # the real one updates it again as output (none yet) streams
            self.part(call["pid"], self.tool_data(call, {**running, "metadata": {"output": ""}}), call["created"])
        try:
            output, metadata, title = run_tool(call["name"], args, self.turn.tool_context())
        except ToolError as exc:
            return self.tool_done(call, args, start, error=str(exc))
        self.tool_done(call, args, start, result=(output, metadata, title))

    def tool_done(self, call: dict, args: dict, start: int, result=None, error: str | None = None) -> None:
        times = {"start": start, "end": now_ms()}
        if error is not None:
            state = {"status": "error", "input": args, "error": error, "time": times}
        else:
            output, metadata, title = result
            state = {"status": "completed", "input": args, "output": output, "metadata": metadata,
                     "title": title, "time": times}
        self.emit("tool_use", self.part(call["pid"], self.tool_data(call, state), call["created"]))

    @staticmethod
    def tool_data(call: dict, state: dict) -> dict:
        return {"type": "tool", "tool": call["name"], "callID": call["id"], "state": state}

    # finishing -----------------------------------------------------------------

    def tokens(self) -> dict:
        usage = self.usage
        cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0
        reasoning = (usage.get("completion_tokens_details") or {}).get("reasoning_tokens") or 0
        prompt, completion = usage.get("prompt_tokens") or 0, usage.get("completion_tokens") or 0
        return {"total": prompt + completion, "input": prompt - cached, "output": completion,
                "reasoning": reasoning, "cache": {"write": 0, "read": cached}}

    def finish_step(self) -> str:
        reason, tokens = FINISH.get(self.finish, "unknown"), self.tokens()
        data = {"reason": reason, "type": "step-finish", "tokens": tokens, "cost": 0}
        self.emit("step_finish", self.part(new_id("prt"), data))
        self.data.update(tokens=tokens, finish=reason)
        self.rec.message(self.mid, self.data, self.created)
        self.data["time"] = {"created": self.created, "completed": now_ms()}
        self.rec.message(self.mid, self.data, self.created)
        self.rec.add_tokens(tokens)
        return reason

    def fail(self, exc: Exception) -> dict:
        """Record a failed model call on the message; return the error object."""
        self.end_text()
        name = "APIError" if isinstance(exc, urllib.error.HTTPError) else "UnknownError"
        error = {"name": name, "data": {"message": str(exc)}}
        self.data.update(error=error, time={"created": self.created, "completed": now_ms()})
        self.rec.message(self.mid, self.data, self.created)
        return error

    # helpers -------------------------------------------------------------------

    def part(self, pid: str, data: dict, created: int | None = None) -> dict:
        return self.rec.part(self.mid, pid, data, created or now_ms())

    def emit(self, etype: str, part: dict) -> None:
        self.turn.out.emit(etype, part)


# ---------------------------------------------------------------- one turn (prompt -> model loop)


class Turn:
    """A `run`: the user message, then model calls until the model stops asking for tools."""

    def __init__(self, rec: Recorder, model: ModelRef, out: Output, log: Log, plan: hc.CrashPlan):
        self.rec, self.model, self.out, self.log, self.plan = rec, model, out, log, plan
        row = rec.row()
        self.directory = row["directory"]
        self.worktree = (rec.store.db.execute("SELECT worktree FROM project WHERE id=?", (row["project_id"],))
                         .fetchone() or ["/"])[0]
        self.user_mid = None

    def add_user_message(self, text: str) -> None:
        self.user_mid, created = new_id("msg"), now_ms()
        self.user_data = {"role": "user", "time": {"created": created}, "agent": "build", "model": self.model.ref()}
        self.rec.message(self.user_mid, self.user_data, created)
        self.rec.part(self.user_mid, new_id("prt"), {"type": "text", "text": text}, now_ms())
        self.rec.session()

    def before_step(self) -> None:
        """What the real one writes once a step's message exists: summaries, token totals."""
        if self.rec.row()["summary_additions"] is None:
            self.rec.session(summary_additions=0, summary_deletions=0, summary_files=0)
        else:
            self.rec.session()
        self.user_data["summary"] = {"diffs": []}
        self.rec.message(self.user_mid, self.user_data, self.user_data["time"]["created"])

    def tool_context(self) -> ToolContext:
        return ToolContext(self.directory, self.worktree, self.plan, self.rec)

    def loop(self) -> int:
        for _ in range(MAX_STEPS):
            step = Step(self)
            self.log.info("session.prompt", "loop", sessionID=self.rec.sid, step=_)
            try:
                reason = step.run()
            except (OSError, ValueError, urllib.error.URLError) as exc:
                self.out.error(step.fail(exc))
                return 1
            if reason != "tool-calls" or not step.calls:
                break
        return 0


# ---------------------------------------------------------------- commands


def open_store() -> Store:
    return Store(db_path())


def prompt_text(words: list[str]) -> str:
    """The real `run` re-quotes every argument that contains a space, then joins them."""
    text = " ".join(f'"{w.replace(chr(34), chr(92) + chr(34))}"' if " " in w else w for w in words)
    piped = stdin_text()
    return f"{text}\n{piped}" if piped else text


def stdin_text() -> str:
    """Piped stdin is appended to the message; never block on an idle pipe or a terminal."""
    with contextlib.suppress(OSError, ValueError):
        if not sys.stdin.isatty() and select.select([sys.stdin], [], [], 0)[0]:
            return sys.stdin.read().strip()
    return ""


def create_session(store: Store, directory: str, title: str | None, plan: hc.CrashPlan) -> Recorder:
    project = find_project(directory)
    now = now_ms()
    row = {"id": new_id("ses", descending=True), "project_id": project[0], "slug": new_slug(),
           "directory": directory, "path": rel_path(directory, project[1]),
           "title": title or f"New session - {datetime.now(timezone.utc).isoformat(timespec='milliseconds')[:-6]}Z",
           "version": VERSION, "permission": dumps(RUN_PERMISSION), "time_created": now, "time_updated": now}
    with store.tx():
        store.ensure_project(*project)
        store.upsert_session(row)
        store.event(row["id"], "session.created.1", {"sessionID": row["id"], "info": session_info(store.session(row["id"]))})
    return Recorder(store, row["id"], plan)


def generate_title(rec: Recorder, model: ModelRef, prompt: str) -> None:
    """The real one asks the model (no tools) for a title when --title is not given."""
    messages = [{"role": "system", "content": TITLE_PROMPT}, {"role": "user", "content": prompt}]
    chunks = []
    with contextlib.suppress(OSError, ValueError, urllib.error.URLError):
        for _event, chunk in hc.stream_sse(model.base_url + "/chat/completions",
                                           chat_body(model, messages, tools=False), model.headers(rec.sid), None):
            chunks += [(c.get("delta") or {}).get("content") or "" for c in chunk.get("choices") or []]
    title = "".join(chunks).strip().splitlines()
    if title and title[0].strip():
        rec.session(title=title[0].strip()[:100])


def resolve_session(store: Store, args, directory: str, plan: hc.CrashPlan) -> tuple[Recorder, bool]:
    """(recorder, created) for --session / --continue / a new session."""
    sid = args.session
    if args.continue_ and not sid:
        project_id = find_project(directory)[0]
        sid = next((s["id"] for s in store.sessions(project_id) if not s["parent_id"]), None)
    if sid:
        if store.session(sid) is None:
            hc.fail(f"Error: Session not found: {sid}")
        return Recorder(store, sid, plan), False
    return create_session(store, directory, args.title, plan), True


def cmd_run(args) -> int:
    plan = hc.CrashPlan.from_env()
    plan.check_start()
    text = prompt_text(args.message)
    if not text.strip():
        hc.fail("Error: You must provide a message or a command")
    log, directory = Log(args.print_logs), work_dir()
    log.info("default", "opencode", version=VERSION, args=json.dumps(sys.argv[1:]))
    model = ModelRef(load_config(directory), args.model)
    rec, created = resolve_session(open_store(), args, directory, plan)
    if created:
        rec.session(agent="build", model=dumps({"id": model.model, "providerID": model.provider, "variant": "default"}))
    turn = Turn(rec, model, Output(args.format, rec.sid), log, plan)
    turn.add_user_message(text)
    if created and not args.title:
        generate_title(rec, model, text)
    code = turn.loop()
    rec.session()
    log.info("session.prompt", "exiting loop", sessionID=rec.sid)
    log.info("default", "disposing instance", directory=turn.directory)
    return code


def export_data(store: Store, sid: str) -> dict:
    row = store.session(sid)
    if row is None:
        hc.fail(f"Error: Session not found: {sid}")
    messages = []
    for msg in store.messages(sid):
        info = {**json.loads(msg["data"]), "id": msg["id"], "sessionID": sid}
        parts = [{**json.loads(p["data"]), "id": p["id"], "sessionID": sid, "messageID": msg["id"]}
                 for p in store.parts(msg["id"])]
        messages.append({"info": info, "parts": parts})
    return {"info": session_info(row), "messages": messages}


def cmd_export(args) -> int:
    store = open_store()
    sid = args.session_id or next((s["id"] for s in store.sessions()), None)
    if not sid:
        hc.fail("Error: no sessions to export")
    sys.stderr.write(f"Exporting session: {sid}\n")
    sys.stdout.write(json.dumps(export_data(store, sid), indent=2, ensure_ascii=False) + "\n")
    return 0


def import_into(store: Store, data: dict, directory: str) -> str:
    """Upsert the session (homed at `directory`); insert messages and parts, never overwriting."""
    info, project = data["info"], find_project(directory)
    sid = info["id"]
    with store.tx():
        store.ensure_project(*project)
        store.upsert_session(session_row_from_info(info, directory, project))
        for msg in data.get("messages") or []:
            minfo = {k: v for k, v in msg["info"].items() if k not in ("id", "sessionID")}
            created = (minfo.get("time") or {}).get("created") or now_ms()
            store.put_message(sid, msg["info"]["id"], minfo, created, ignore=True)
            for part in msg.get("parts") or []:
                pdata = {k: v for k, v in part.items() if k not in ("id", "sessionID", "messageID")}
                store.put_part(sid, msg["info"]["id"], part["id"], pdata, created, ignore=True)
    return sid


def cmd_import(args) -> int:
    try:
        data = json.loads(Path(args.file).read_text())
    except (OSError, ValueError) as exc:
        hc.fail(f"Error: cannot read {args.file}: {exc}")
    sid = import_into(open_store(), data, work_dir())
    sys.stdout.write(f"Imported session: {sid}\n")
    return 0


def cmd_session(args) -> int:
    store = open_store()
    if args.action == "delete":
        if store.session(args.session_id) is None:
            hc.fail(f"Error: Session not found: {args.session_id}")
        with store.tx():
            store.db.execute("DELETE FROM session WHERE id=?", (args.session_id,))
        sys.stdout.write(f"Session {args.session_id} deleted\n")
        return 0
    rows = store.sessions(find_project(work_dir())[0])[: args.max_count or None]
    if args.format == "json":
        listing = [{"id": r["id"], "title": r["title"], "updated": r["time_updated"], "created": r["time_created"],
                    "projectId": r["project_id"], "directory": r["directory"]} for r in rows]
        sys.stdout.write(json.dumps(listing, indent=2) + "\n")
    else:
        for r in rows:
            stamp = datetime.fromtimestamp(r["time_updated"] / 1000).strftime("%Y-%m-%d %H:%M")
            sys.stdout.write(f"{r['id']}  {r['title']}  {stamp}\n")
    return 0


# ---------------------------------------------------------------- argv


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="opencode", description="fake opencode " + VERSION)
    parser.add_argument("-v", "--version", action="store_true")
    sub = parser.add_subparsers(dest="command")
    run = sub.add_parser("run")
    run.add_argument("message", nargs="*")
    run.add_argument("--format", choices=("default", "json"), default="default")
    run.add_argument("--title")
    run.add_argument("-s", "--session")
    run.add_argument("-c", "--continue", dest="continue_", action="store_true")
    run.add_argument("-m", "--model")
    run.add_argument("--agent")
    run.add_argument("--variant")
    run.add_argument("--share", action="store_true")
    run.add_argument("--auto", action="store_true")
    run.add_argument("--dangerously-skip-permissions", action="store_true")
    export = sub.add_parser("export")
    export.add_argument("session_id", nargs="?")
    imp = sub.add_parser("import")
    imp.add_argument("file")
    session = sub.add_parser("session")
    actions = session.add_subparsers(dest="action", required=True)
    listing = actions.add_parser("list")
    listing.add_argument("--format", choices=("table", "json"), default="table")
    listing.add_argument("-n", "--max-count", type=int)
    delete = actions.add_parser("delete")
    delete.add_argument("session_id")
    return parser


def split_globals(argv: list[str]) -> tuple[list[str], dict]:
    """Pull the global flags (--print-logs, --log-level X) out of argv, as yargs allows anywhere."""
    rest, flags, i = [], {"print_logs": False}, 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--":
            rest += argv[i:]
            break
        if arg == "--print-logs":
            flags["print_logs"] = True
        elif arg == "--log-level":
            i += 1
        elif not arg.startswith("--log-level="):
            rest.append(arg)
        i += 1
    return rest, flags


COMMANDS = {"run": cmd_run, "export": cmd_export, "import": cmd_import, "session": cmd_session}


def dispatch(argv: list[str]) -> int:
    rest, flags = split_globals(argv)
    args = build_parser().parse_args(rest)
    args.print_logs = flags["print_logs"]
    if args.version:
        sys.stdout.write(VERSION + "\n")
        return 0
    if args.command is None:
        hc.fail("fake opencode: the interactive TUI is not supported; use `opencode run`")
    return COMMANDS[args.command](args)


def main(argv: list[str] | None = None) -> int:
    """With `argv`: run in-process and return. Without (as a program): run, then leave like the
    real one, with no WAL checkpoint on close, so committed rows may still sit in `-wal`."""
    if argv is not None:
        return dispatch(list(argv))
    try:
        status = dispatch(sys.argv[1:])
    except SystemExit as exc:
        status = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


if __name__ == "__main__":
    main()
