"""Fake `codex` (Codex CLI 0.171.0) for dh's tests.

Behaves like the real CLI where dh can see it (see /work/shared/docs/harnesses.md §2):

* command line: ``codex --version``;
  ``codex exec [--json] [--skip-git-repo-check] [--dangerously-bypass-approvals-and-sandbox]
  [-C DIR] [-m MODEL] [PROMPT]`` and ``codex exec [OPTIONS] resume THREAD_ID [PROMPT]``
  (exec options go before ``resume``).
* state: ``$CODEX_HOME`` (else ``~/.codex``); provider from ``config.toml``
  (``model``, ``model_provider``, ``[model_providers.X] base_url/env_key/wire_api``);
  model calls are ``POST <base_url>/responses`` (OpenAI Responses SSE).
* rollout: ``sessions/YYYY/MM/DD/rollout-<local ts>-<uuidv7>.jsonl``, created at the
  first persist (the prompt); records ``{"timestamp","ordinal","type","payload"[,"metadata"]}``
  in the real order with ``history_sequence``/``sampled_through_sequence``/
  ``user_input_order``.  A small ``state_5.sqlite`` ``threads`` table maps ids to rollouts.
* stdout (``--json``): ``thread.started`` first, before any model call, then
  ``turn.started``, ``item.started``/``item.completed``, ``turn.completed``.
* resume: by id through the threads row or a search of ``sessions/``; appends, no new
  ``session_meta``; a dangling ``function_call`` gets a synthetic ``"aborted"`` output in
  the request only; outputs without a call are dropped.
* crashes: ``DH_FAKE_CRASH`` / ``DH_FAKE_CRASH_ONCE`` (see harness_common).
* ``codex app-server`` on stdio: initialize, and thread/list with its rescan of the rollouts
  (fake_codex_app_server.py).
"""

from __future__ import annotations

import json
import os
import secrets
import shlex
import sqlite3
import sys
import time
import tomllib
import urllib.error
from datetime import datetime
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.fakes.harness_common import (  # noqa: E402
    CrashPlan, fail, json_line, now_iso, now_ms, run_shell, stream_sse, uuid7, write_record,
)

VERSION = "0.171.0"
CONTEXT_WINDOW = 258400
ABORTED = "aborted"
USAGE_KEYS = ("input_tokens", "cached_input_tokens", "cache_write_input_tokens", "output_tokens",
              "reasoning_output_tokens", "total_tokens")
EXEC_FLAGS = {"--json": "json", "--skip-git-repo-check": "skip_git",
              "--dangerously-bypass-approvals-and-sandbox": "bypass", "--full-auto": "full_auto"}
EXEC_VALUES = {"-C": "cd", "--cd": "cd", "-m": "model", "--model": "model"}
BASE_INSTRUCTIONS = ("You are a coding agent running in the Codex CLI, a terminal-based coding "
                     "assistant. (fake)")


# ---------------------------------------------------------------- arguments

def usage_error(message: str) -> None:
    fail(f"error: {message}\n\nUsage: codex exec [OPTIONS] [PROMPT]\n       codex exec [OPTIONS] "
         f"resume [SESSION_ID] [PROMPT]\n\nFor more information, try '--help'.", code=2)


def parse_args(argv: list[str]) -> dict:
    """Parse ``codex …``; only ``--version`` and ``exec`` exist in the fake."""
    if argv[:1] in (["--version"], ["-V"]):
        return {"command": "version"}
    if not argv or argv[0] not in ("exec", "e"):
        usage_error(f"unrecognized subcommand '{argv[0] if argv else ''}'")
    opts = {"command": "exec", "json": False, "skip_git": False, "bypass": False,
            "full_auto": False, "cd": None, "model": None, "resume": None, "prompt": None}
    rest, i = argv[1:], 0
    positionals: list[str] = []
    while i < len(rest):
        tok = rest[i]
        name, eq, inline = tok.partition("=")
        if tok in EXEC_FLAGS:
            opts[EXEC_FLAGS[tok]] = True
        elif name in EXEC_VALUES:
            if not eq and i + 1 >= len(rest):
                usage_error(f"a value is required for '{name} <VALUE>' but none was supplied")
            opts[EXEC_VALUES[name]] = inline if eq else rest[i + 1]
            i += 0 if eq else 1
        elif tok.startswith("-") and tok != "-":
            usage_error(f"unexpected argument '{tok}' found")
        else:
            positionals.append(tok)
        i += 1
    return _positionals(opts, positionals)


def _positionals(opts: dict, positionals: list[str]) -> dict:
    if positionals[:1] == ["resume"]:
        if len(positionals) < 2:
            fail("Error: resume requires a SESSION_ID (or --last)")
        opts["resume"] = positionals[1]
        positionals = positionals[2:]
    if len(positionals) > 1:
        usage_error(f"unexpected argument '{positionals[1]}' found")
    opts["prompt"] = positionals[0] if positionals else None
    return opts


# ---------------------------------------------------------------- config

def codex_home() -> Path:
    env = os.environ.get("CODEX_HOME")
    return Path(env) if env else Path.home() / ".codex"


def load_config(model_flag: str | None) -> dict:
    path = codex_home() / "config.toml"
    try:
        cfg = tomllib.loads(path.read_text()) if path.exists() else {}
    except tomllib.TOMLDecodeError as exc:
        fail(f"Error loading config.toml: {exc}")
    provider_id = cfg.get("model_provider", "openai")
    providers = cfg.get("model_providers") or {}
    provider = providers.get(provider_id) or ({"base_url": "https://api.openai.com/v1",
                                               "env_key": "OPENAI_API_KEY"}
                                              if provider_id == "openai" else None)
    if provider is None:
        fail(f"Error: Model provider `{provider_id}` not found")
    if provider.get("wire_api", "responses") != "responses":
        fail(f'Error loading config.toml: `wire_api = "{provider["wire_api"]}"` is no longer '
             f'supported.')
    return {"model": model_flag or cfg.get("model", "gpt-5.5"), "provider_id": provider_id,
            "base_url": str(provider.get("base_url", "")).rstrip("/"),
            "env_key": provider.get("env_key"),
            "approval": cfg.get("approval_policy", "never")}


def in_git_repo(path: Path) -> bool:
    return any((p / ".git").exists() for p in [path, *path.parents])


# ---------------------------------------------------------------- threads table

def state_db() -> sqlite3.Connection:
    codex_home().mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(codex_home() / "state_5.sqlite")
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("""CREATE TABLE IF NOT EXISTS threads (
        id TEXT PRIMARY KEY, rollout_path TEXT NOT NULL, created_at INTEGER NOT NULL,
        updated_at INTEGER NOT NULL, source TEXT NOT NULL, model_provider TEXT NOT NULL,
        cwd TEXT NOT NULL, title TEXT NOT NULL, sandbox_policy TEXT NOT NULL,
        approval_mode TEXT NOT NULL, tokens_used INTEGER NOT NULL DEFAULT 0,
        archived INTEGER NOT NULL DEFAULT 0, cli_version TEXT NOT NULL DEFAULT '',
        first_user_message TEXT NOT NULL DEFAULT '', model TEXT,
        created_at_ms INTEGER, updated_at_ms INTEGER)""")
    return db


def save_thread(thread_id: str, rollout: Path, cwd: str, cfg: dict, prompt: str, tokens: int) -> None:
    now = now_ms()
    with state_db() as db:
        db.execute("""INSERT INTO threads (id, rollout_path, created_at, updated_at, source,
            model_provider, cwd, title, sandbox_policy, approval_mode, tokens_used, cli_version,
            first_user_message, model, created_at_ms, updated_at_ms)
            VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)
            ON CONFLICT(id) DO UPDATE SET rollout_path=excluded.rollout_path,
            updated_at=excluded.updated_at, updated_at_ms=excluded.updated_at_ms,
            tokens_used=excluded.tokens_used""",
                   (thread_id, str(rollout), now // 1000, now // 1000, "exec", cfg["provider_id"],
                    cwd, prompt[:100], '{"type":"disabled"}', cfg["approval"], tokens, VERSION,
                    prompt, cfg["model"], now, now))
    db.close()


def find_rollout(thread_id: str) -> Path | None:
    """The threads row if its file exists, else a search of sessions/ by file name."""
    try:
        db = state_db()
        row = db.execute("SELECT rollout_path FROM threads WHERE id = ?", (thread_id,)).fetchone()
        db.close()
    except sqlite3.Error:
        row = None
    if row and Path(row[0]).is_file():
        return Path(row[0])
    hits = sorted((codex_home() / "sessions").glob(f"*/*/*/rollout-*-{thread_id}.jsonl"))
    return hits[0] if hits else None


# ---------------------------------------------------------------- rollout

class Rollout:
    """The rollout file: ordinals, history counters, deferred creation."""

    def __init__(self, path: Path, plan: CrashPlan):
        self.path, self.plan = path, plan
        self.records: list[dict] = []
        self.pending: list[dict] = []
        self.materialized = False
        self.ordinal = 0
        self.history_seq = 0
        self.input_order = 0
        self.sampled = 0

    def load(self) -> None:
        for line in self.path.read_bytes().splitlines():
            try:
                rec = json.loads(line)
            except ValueError:
                continue  # the real reader skips unparseable lines with a warning
            if isinstance(rec, dict):
                self._count(rec)
                self.records.append(rec)
        if not self.records:
            fail(f"Error: rollout at {self.path} is empty")
        self.materialized = True

    def _count(self, rec: dict) -> None:
        meta = rec.get("metadata") or {}
        self.ordinal = max(self.ordinal, int(rec.get("ordinal", -1)) + 1)
        self.history_seq = max(self.history_seq, int(meta.get("history_sequence", 0)))
        self.sampled = max(self.sampled, int(meta.get("sampled_through_sequence", 0)))
        if "user_input_order" in meta:
            self.input_order = max(self.input_order, int(meta["user_input_order"]) + 1)

    def add(self, kind: str, payload: dict, metadata: dict | None = None) -> dict:
        rec = {"timestamp": now_iso(), "ordinal": self.ordinal, "type": kind, "payload": payload}
        if metadata is not None:
            rec["metadata"] = metadata
        self.ordinal += 1
        self.records.append(rec)
        if self.materialized:
            write_record(self.path, json_line(rec), self.plan)
        else:
            self.pending.append(rec)
        return rec

    def item(self, payload: dict, sampled: int, ordered: bool, **extra) -> dict:
        """A response_item with its history metadata."""
        self.history_seq += 1
        meta = {"history_sequence": self.history_seq, "sampled_through_sequence": sampled}
        meta.update(extra.pop("before", {}))
        meta["client_authored"] = False
        if ordered:
            meta["user_input_order"] = self.input_order
            self.input_order += 1
        meta.update(extra)
        meta["model_search_state"] = "unused"
        return self.add("response_item", payload, meta)

    def materialize(self) -> None:
        if self.materialized:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.materialized = True
        for rec in self.pending:
            write_record(self.path, json_line(rec), self.plan)
        self.pending = []

    def response_items(self) -> list[dict]:
        return [r["payload"] for r in self.records if r.get("type") == "response_item"]

    def meta(self) -> dict:
        return next((r["payload"] for r in self.records if r.get("type") == "session_meta"), {})

    def thread_usage(self) -> dict:
        recs = [r for r in self.records if r.get("type") == "token_usage_record"]
        last = recs[-1]["payload"].get("thread_token_usage") if recs else None
        return dict(last) if last else {k: 0 for k in USAGE_KEYS}


def rollout_path(thread_id: str) -> Path:
    now = datetime.now()
    return (codex_home() / "sessions" / now.strftime("%Y/%m/%d")
            / f"rollout-{now.strftime('%Y-%m-%dT%H-%M-%S')}-{thread_id}.jsonl")


# ---------------------------------------------------------------- request input

def request_input(items: list[dict]) -> list[dict]:
    """Rollout response items as Responses input, with Codex's call/output fix-ups."""
    calls = {i.get("call_id") for i in items if i.get("type") == "function_call"}
    outputs = {i.get("call_id") for i in items if i.get("type") == "function_call_output"}
    out: list[dict] = []
    for item in items:
        kind = item.get("type")
        if kind == "function_call_output" and item.get("call_id") not in calls:
            continue  # remove_orphan_outputs
        out.append(_wire_item(item))
        if kind == "function_call" and item.get("call_id") not in outputs:
            out.append({"type": "function_call_output", "call_id": item.get("call_id"),
                        "output": ABORTED})  # ensure_call_outputs_present
    return out


def _wire_item(item: dict) -> dict:
    kind = item.get("type")
    if kind == "message":
        return {"type": "message", "role": item.get("role"), "content": item.get("content")}
    if kind == "function_call":
        return {"type": "function_call", "name": item.get("name"),
                "arguments": item.get("arguments"), "call_id": item.get("call_id")}
    if kind == "function_call_output":
        return {"type": "function_call_output", "call_id": item.get("call_id"),
                "output": item.get("output")}
    return {k: v for k, v in item.items() if k != "internal_chat_message_metadata_passthrough"}


def tool_definitions() -> list[dict]:
    return [
        {"type": "function", "name": "exec_command", "description": "Runs a command in a PTY.",
         "strict": False, "parameters": {"type": "object", "required": ["cmd"], "properties": {
             "cmd": {"type": "string"}, "workdir": {"type": "string"},
             "yield_time_ms": {"type": "number"}}}},
        {"type": "function", "name": "write_stdin", "description": "Writes to a session.",
         "strict": False, "parameters": {"type": "object", "required": ["session_id"],
                                         "properties": {"session_id": {"type": "number"},
                                                        "chars": {"type": "string"}}}},
    ]


# ---------------------------------------------------------------- model stream

class ModelError(Exception):
    pass


def stream_response(url: str, body: dict, headers: dict, plan: CrashPlan, on_item) -> dict:
    """Stream one response; call on_item(item) per finished output item; return the response."""
    try:
        for event, data in stream_sse(url, body, headers, plan):
            kind = data.get("type", event)
            if kind == "response.output_item.done":
                on_item(data["item"])
            elif kind == "response.completed":
                return data["response"]
            elif kind in ("response.failed", "error"):
                raise ModelError(json.dumps(data.get("response", data)))
    except urllib.error.HTTPError as exc:
        raise ModelError(f"unexpected status {exc.code}: {exc.read().decode(errors='replace')}") from exc
    except (urllib.error.URLError, OSError) as exc:
        raise ModelError(f"stream error: {exc}") from exc
    raise ModelError("stream disconnected before completion: stream closed before "
                     "response.completed")


# ---------------------------------------------------------------- the agent

class Codex:
    """One thread: the rollout, stdout events and the turn loop."""

    def __init__(self, thread_id: str, rollout: Rollout, cfg: dict, cwd: str, opts: dict,
                 plan: CrashPlan):
        self.thread_id, self.r, self.cfg, self.cwd = thread_id, rollout, cfg, cwd
        self.opts, self.plan = opts, plan
        self.resumed = opts["resume"] is not None
        self.item_no = 0
        self.turn_id = ""
        self.turn_usage = {k: 0 for k in USAGE_KEYS}
        self.thread_usage = rollout.thread_usage()
        self.last_usage = {k: 0 for k in USAGE_KEYS}

    # ---- stdout

    def emit(self, obj: dict) -> None:
        if self.opts["json"]:
            sys.stdout.write(json.dumps(obj, separators=(",", ":"), ensure_ascii=False) + "\n")
            sys.stdout.flush()

    def emit_item(self, event: str, item: dict, item_id: str | None = None) -> str:
        if item_id is None:
            item_id = f"item_{self.item_no}"
            self.item_no += 1
        self.emit({"type": event, "item": {"id": item_id, **item}})
        return item_id

    # ---- records

    def passthrough(self, **extra) -> dict:
        return {"turn_id": self.turn_id, **extra}

    def event(self, payload: dict) -> None:
        self.r.add("event_msg", payload)

    def item_completed(self, item: dict) -> None:
        ms = now_ms()
        self.event({"type": "item_completed", "thread_id": self.thread_id, "turn_id": self.turn_id,
                    "item": item, "started_at_ms": ms, "completed_at_ms": ms})

    def write_session_meta(self) -> None:
        self.r.add("session_meta", {
            "account_scoped": True, "session_id": self.thread_id, "id": self.thread_id,
            "timestamp": now_iso(), "cwd": self.cwd, "runtime_workspace_roots": [self.cwd],
            "originator": "codex_exec", "cli_version": VERSION, "source": "exec",
            "thread_source": "user", "model_provider": self.cfg["provider_id"],
            "base_instructions": {"text": BASE_INSTRUCTIONS,
                                  "provenance": {"type": "model", "model": self.cfg["model"]}},
            "history_mode": "paginated", "context_window": {"window_id": uuid7()}})

    def settings(self) -> dict:
        return {"model": self.cfg["model"], "model_provider_id": self.cfg["provider_id"],
                "approval_policy": self.cfg["approval"], "approvals_reviewer": "user",
                "requested_approvals_reviewer": "user", "permission_profile": {"type": "disabled"},
                "cwd": self.cwd, "runtime_workspace_roots": [self.cwd],
                "collaboration_mode": self.collaboration(), "disabled_plugin_ids": []}

    def collaboration(self) -> dict:
        return {"mode": "default", "settings": {"model": self.cfg["model"], "reasoning_effort": None,
                                                "developer_instructions": None}}

    def write_task_started(self) -> None:
        self.event({"type": "task_started", "turn_attribution": {
            "turn_id": self.turn_id, "turn_trigger": "exec", "parent_turn_id": None,
            "initiating_agent_path": None, "root_turn_id": self.turn_id},
            "turn_id": self.turn_id, "root_turn_id": self.turn_id, "started_at": int(time.time()),
            "model_context_window": CONTEXT_WINDOW, "collaboration_mode_kind": "default"})

    def write_turn_context(self) -> None:
        self.r.add("turn_context", {
            "turn_id": self.turn_id, "root_turn_id": self.turn_id, "disabled_plugin_ids": [],
            "cwd": self.cwd, "approval_policy": self.cfg["approval"], "approvals_reviewer": "user",
            "permission_profile": {"type": "disabled"}, "model": self.cfg["model"],
            "collaboration_mode": self.collaboration(), "multi_agent_version": "v1",
            "realtime_active": False, "summary": "none",
            "sandbox_policy": {"type": "danger-full-access"}})

    def write_context_messages(self) -> None:
        dev = self.message("developer", [
            "<permissions instructions>\nFilesystem sandboxing is disabled.\n"
            "</permissions instructions>"], ["permissions.instructions"])
        self.r.item(dev, 0, False, before={}, mcp_attribution={"status": "none"})
        env = self.message("user", [
            f"<environment_context>\n  <cwd>{self.cwd}</cwd>\n  <shell>bash</shell>\n"
            f"  <current_date>{datetime.now().strftime('%Y-%m-%d')}</current_date>\n"
            f"</environment_context>"], ["environments.environment_context"])
        self.r.item(env, 0, False)
        self.r.add("world_state", {"full": True, "state": {
            "agents_md": {}, "collaboration_mode": {"mode": "default", "model": self.cfg["model"]},
            "environments": {"environments": {"local": {"cwd": self.cwd, "status": "available",
                                                         "shell": "bash"}}},
            "model": self.cfg["model"], "realtime": {"active": False}}})

    def message(self, role: str, texts: list[str], kinds: list[str]) -> dict:
        prov = {"type": "user"} if role == "user" and kinds == ["user.text"] else \
            {"type": "harness", "hook": False}
        return {"type": "message", "id": f"msg_{uuid7()}", "role": role,
                "content": [{"type": "input_text", "text": t} for t in texts],
                "internal_chat_message_metadata_passthrough": self.passthrough(
                    create_time=time.time(), content_item_kinds=kinds,
                    content_item_metadata=[{"provenance": prov} for _ in kinds])}

    def write_prompt(self, prompt: str) -> None:
        msg = self.message("user", [prompt], ["user.text"])
        retained = {"id": {"message_id": msg["id"], "turn_id": self.turn_id, "role": "user"},
                    "revision": f"retained_{uuid7()}", "complete": True}
        self.r.item(msg, self.r.sampled, True, before={"retained_source": retained},
                    mcp_attribution={"status": "none"})
        self.r.materialize()
        self.item_completed({"type": "UserMessage", "id": uuid7(),
                             "content": [{"type": "text", "text": prompt, "text_elements": []}]})

    # ---- turn

    def run_turn(self, prompt: str) -> int:
        started = time.monotonic()
        self.turn_id = uuid7()
        self.write_turn_start()
        self.write_prompt(prompt)
        save_thread(self.thread_id, self.r.path, self.cwd, self.cfg, prompt,
                    self.thread_usage["total_tokens"])
        self.emit({"type": "turn.started"})
        try:
            last_text = self.model_loop()
        except ModelError as exc:
            self.emit({"type": "error", "message": str(exc)})
            self.emit({"type": "turn.failed", "error": {"message": str(exc)}})
            return 1
        self.write_task_complete(last_text, started)
        save_thread(self.thread_id, self.r.path, self.cwd, self.cfg, prompt,
                    self.thread_usage["total_tokens"])
        self.emit({"type": "turn.completed",
                   "usage": {k: self.turn_usage[k] for k in USAGE_KEYS if k != "total_tokens"}})
        return 0

    def write_turn_start(self) -> None:
        """Records before the prompt: a new thread's context, or a resumed turn's header."""
        settings = {"type": "thread_settings_applied", "thread_id": self.thread_id,
                    "thread_settings": self.settings()}
        if self.resumed:
            self.event(settings)
            self.write_task_started()
            self.write_turn_context()
            return
        self.write_session_meta()
        self.write_task_started()
        self.write_context_messages()
        self.write_turn_context()
        self.event(settings)

    def write_task_complete(self, last_text: str | None, started: float) -> None:
        elapsed = time.monotonic() - started
        self.event({"type": "task_complete", "root_turn_id": self.turn_id, "turn_id": self.turn_id,
                    "last_agent_message": last_text, "started_at": int(time.time() - elapsed),
                    "completed_at": int(time.time()), "duration_ms": int(elapsed * 1000),
                    "time_to_first_token_ms": 0})

    def model_loop(self) -> str | None:
        last_text = None
        while True:
            calls, texts = self.call_model()
            last_text = texts[-1] if texts else last_text
            for call in calls:
                self.run_call(call)
            self.token_count()
            if not calls:
                return last_text

    def request(self) -> tuple[dict, dict]:
        cold = "cold_resume" if self.resumed else "new"
        headers = {"originator": "codex_exec", "user-agent": f"codex_exec/{VERSION}",
                   "session-id": self.thread_id, "thread-id": self.thread_id,
                   "x-client-request-id": self.thread_id,
                   "x-codex-turn-metadata": json.dumps({"turn_id": self.turn_id,
                                                        "history_initialization": cold})}
        key = os.environ.get(self.cfg["env_key"] or "", "")
        if key:
            headers["authorization"] = f"Bearer {key}"
        body = {"model": self.cfg["model"], "input": request_input(self.r.response_items()),
                "tools": tool_definitions(), "tool_choice": "auto", "parallel_tool_calls": True,
                "reasoning": {"summary": "auto"}, "store": False, "stream": True,
                "include": ["reasoning.encrypted_content"], "prompt_cache_key": self.thread_id,
                "client_metadata": {"originator": "codex_exec"}}
        return body, headers

    def call_model(self) -> tuple[list[dict], list[str]]:
        body, headers = self.request()
        sampled = self.r.history_seq
        calls, texts = [], []

        def on_item(item: dict) -> None:
            if item.get("type") == "message" and item.get("role") == "assistant":
                texts.append(self.record_message(item, sampled))
            elif item.get("type") == "function_call":
                calls.append(item)
                self.record_call(item, sampled)

        response = stream_response(self.cfg["base_url"] + "/responses", body, headers, self.plan,
                                   on_item)
        self.r.sampled = sampled
        self.record_usage(response)
        return calls, texts

    def record_message(self, item: dict, sampled: int) -> str:
        text = "".join(c.get("text", "") for c in item.get("content") or [])
        self.item_completed({"type": "AgentMessage", "id": item.get("id"),
                             "content": [{"type": "Text", "text": text}]})
        payload = {"type": "message", "status": "completed", "id": item.get("id"),
                   "role": "assistant", "content": item.get("content"),
                   "internal_chat_message_metadata_passthrough": self.passthrough(
                       content_item_kinds=["unknown"])}
        retained = {"id": {"message_id": item.get("id"), "turn_id": self.turn_id,
                           "role": "assistant"}, "revision": f"retained_{uuid7()}", "complete": True}
        self.r.item(payload, sampled, True, before={"retained_source": retained})
        self.emit_item("item.completed", {"type": "agent_message", "text": text})
        return text

    def record_call(self, item: dict, sampled: int) -> None:
        payload = {"type": "function_call", "status": "completed", "id": item.get("id"),
                   "name": item.get("name"), "arguments": item.get("arguments"),
                   "call_id": item.get("call_id"),
                   "internal_chat_message_metadata_passthrough": self.passthrough()}
        self.r.item(payload, sampled, True)

    def record_usage(self, response: dict) -> None:
        u = response.get("usage") or {}
        last = {"input_tokens": u.get("input_tokens", 0),
                "cached_input_tokens": (u.get("input_tokens_details") or {}).get("cached_tokens", 0),
                "cache_write_input_tokens": 0, "output_tokens": u.get("output_tokens", 0),
                "reasoning_output_tokens": (u.get("output_tokens_details") or {}).get(
                    "reasoning_tokens", 0), "total_tokens": u.get("total_tokens", 0)}
        for k in USAGE_KEYS:
            self.turn_usage[k] += last[k]
            self.thread_usage[k] = self.thread_usage.get(k, 0) + last[k]
        self.last_usage = last
        self.r.add("token_usage_record", {
            "thread_id": self.thread_id, "turn_id": self.turn_id, "session_id": self.thread_id,
            "root_turn_id": self.turn_id, "response_id": response.get("id"), "usage": last,
            "turn_token_usage": dict(self.turn_usage), "thread_token_usage": dict(self.thread_usage)})

    def token_count(self) -> None:
        self.event({"type": "token_count", "info": {
            "total_token_usage": dict(self.thread_usage), "last_token_usage": self.last_usage,
            "last_usage_includes_reasoning": False, "model_context_window": CONTEXT_WINDOW},
            "rate_limits": {"limit_id": "codex", "limit_name": None, "primary": None,
                            "secondary": None, "credits": None, "individual_limit": None,
                            "spend_control_reached": None, "plan_type": None,
                            "rate_limit_reached_type": None}})

    def run_call(self, call: dict) -> None:
        started = time.monotonic()
        try:
            args = json.loads(call.get("arguments") or "{}")
        except ValueError:
            args = {}
        if call.get("name") != "exec_command" or "cmd" not in args:
            self.record_output(call, f"unsupported call: {call.get('name')}")
            return
        cmd, cwd = args["cmd"], args.get("workdir") or self.cwd
        shown = display_command(cmd)
        item_id = self.emit_item("item.started", {"type": "command_execution", "command": shown,
                                                  "aggregated_output": "", "exit_code": None,
                                                  "status": "in_progress"})
        code, out = run_shell(cmd, cwd, self.plan)
        secs = time.monotonic() - started
        status = "completed" if code == 0 else "failed"
        self.emit_item("item.completed", {"type": "command_execution", "command": shown,
                                          "aggregated_output": out, "exit_code": code,
                                          "status": status}, item_id)
        self.item_completed({"type": "CommandExecution", "id": call.get("call_id"),
                             "process_id": str(secrets.randbelow(90000) + 10000),
                             "command": ["/bin/bash", "-lc", cmd], "cwd": f"file://{cwd}",
                             "parsed_cmd": [{"type": "unknown", "cmd": cmd}],
                             "source": "unified_exec_startup", "status": status,
                             "aggregated_output": out, "exit_code": code,
                             "duration": {"secs": int(secs), "nanos": int((secs % 1) * 1e9)}})
        self.record_output(call, f"Chunk ID: {secrets.token_hex(3)}\nWall time: {secs:.4f} seconds\n"
                                 f"Process exited with code {code}\nOriginal token count: "
                                 f"{(len(out) + 3) // 4}\nOutput:\n{out}")

    def record_output(self, call: dict, output: str) -> None:
        payload = {"type": "function_call_output", "id": f"fco_{uuid7()}",
                   "call_id": call.get("call_id"), "output": output,
                   "internal_chat_message_metadata_passthrough": self.passthrough(
                       create_time=time.time())}
        self.r.item(payload, self.r.sampled, False, fallback_token_limit_override=3000)


def display_command(cmd: str) -> str:
    """``/bin/bash -lc <cmd>`` quoted the way codex prints it on stdout."""
    if "'" in cmd and '"' not in cmd:
        return f'/bin/bash -lc "{cmd}"'
    return shlex.join(["/bin/bash", "-lc", cmd])


# ---------------------------------------------------------------- main

def read_prompt(opts: dict) -> str:
    prompt = opts["prompt"]
    if not sys.stdin.isatty() and opts["resume"] is None:
        sys.stderr.write("Reading additional input from stdin...\n")
    if prompt in (None, "-") and not sys.stdin.isatty():
        prompt = sys.stdin.read()
    if not prompt or not prompt.strip():
        fail("No prompt provided. Either specify one as an argument or pipe the prompt into stdin.")
    return prompt


def open_thread(opts: dict, plan: CrashPlan) -> tuple[str, Rollout]:
    if opts["resume"] is None:
        thread_id = uuid7()
        return thread_id, Rollout(rollout_path(thread_id), plan)
    path = find_rollout(opts["resume"])
    if path is None:
        fail(f"Error: thread/resume: no rollout found for thread id {opts['resume']}")
    rollout = Rollout(path, plan)
    rollout.load()
    return rollout.meta().get("id", opts["resume"]), rollout


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["app-server"]:
        from tests.fakes import fake_codex_app_server

        return fake_codex_app_server.serve(sys.modules[__name__])
    opts = parse_args(argv)
    if opts["command"] == "version":
        print(f"codex-cli {VERSION}")
        return 0
    cwd = os.path.abspath(opts["cd"] or os.getcwd())
    if not os.path.isdir(cwd):
        fail(f"Error: failed to change directory to {cwd}")
    if not opts["skip_git"] and not in_git_repo(Path(cwd)):
        fail("Not inside a trusted directory and --skip-git-repo-check was not specified.")
    cfg = load_config(opts["model"])
    plan = CrashPlan.from_env()
    plan.check_start()
    prompt = read_prompt(opts)
    thread_id, rollout = open_thread(opts, plan)
    agent = Codex(thread_id, rollout, cfg, cwd, opts, plan)
    agent.emit({"type": "thread.started", "thread_id": thread_id})
    agent.emit_item("item.completed", {"type": "error", "message": (
        f"Model metadata for `{cfg['model']}` not found. Defaulting to fallback metadata; "
        f"this can degrade performance and cause issues.")})
    return agent.run_turn(prompt)


if __name__ == "__main__":
    sys.exit(main())
