"""Fake `pi` (Pi coding agent 0.73.1) for dh's tests.

Behaves like the real CLI where dh can see it (see /work/shared/docs/harnesses.md §4):

* flags: ``-p/--print``, ``--mode json|text``, ``--provider P``, ``--model M``,
  ``--session PATH``, ``--session-dir D``, ``--version``; messages are positional.
* state: agent dir ``$PI_CODING_AGENT_DIR`` (else ``~/.pi/agent``); providers from
  ``<agentDir>/models.json`` (``anthropic-messages``: POST ``<baseUrl>/v1/messages``;
  ``openai-completions``: POST ``<baseUrl>/chat/completions``).
* session file: ``--session PATH`` (created there when missing), else
  ``--session-dir D`` / ``$PI_CODING_AGENT_SESSION_DIR`` (flat), else
  ``<agentDir>/sessions/--<cwd>--/<ISO ts>_<uuidv7>.jsonl``.  Line 1 is the header;
  entries carry 8-hex ``id``/``parentId``; the leaf is the last line.
* writing: nothing until the first assistant message is complete, then the header
  and the buffered entries at once, then one entry per complete message.  A file
  whose line 1 is missing or invalid is truncated and given a fresh header (the
  real data-loss bug).
* resume (``--session PATH PROMPT``): no prompt -> exit 0 doing nothing; tools run
  in the header cwd; a dangling toolCall gets a synthetic "No result provided"
  error result in the request only, never in the file.
* crashes: ``DH_FAKE_CRASH`` / ``DH_FAKE_CRASH_ONCE`` (see harness_common).
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import urllib.error
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.fakes.harness_common import (  # noqa: E402
    CrashPlan, fail, json_line, now_iso, now_ms, read_file_tool, resolve, run_shell,
    stream_sse, uuid7, write_file_tool, write_record,
)

VERSION = "0.73.1"
NO_RESULT = "No result provided"
VALUE_FLAGS = {"--mode": "mode", "--provider": "provider", "--model": "model",
               "--session": "session", "--session-dir": "session_dir"}
BOOL_FLAGS = {"-p": "print", "--print": "print", "--version": "version", "-v": "version",
              "-h": "help", "--help": "help", "--offline": "offline"}
ZERO_COST = {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}


# ---------------------------------------------------------------- arguments

def parse_args(argv: list[str]) -> dict:
    opts = {"print": False, "version": False, "help": False, "offline": False, "mode": "text",
            "provider": None, "model": None, "session": None, "session_dir": None, "messages": []}
    i = 0
    while i < len(argv):
        tok = argv[i]
        name, eq, inline = tok.partition("=")
        if name in VALUE_FLAGS:
            if not eq and i + 1 >= len(argv):
                fail(f"Error: {name} requires a value")
            opts[VALUE_FLAGS[name]] = inline if eq else argv[i + 1]
            i += 0 if eq else 1
        elif tok in BOOL_FLAGS:
            opts[BOOL_FLAGS[tok]] = True
        elif tok.startswith("-") and tok != "-":
            fail(f"Error: Unknown option: {tok}")
        else:
            opts["messages"].append(tok)
        i += 1
    if opts["mode"] not in ("text", "json"):
        fail(f"Error: Invalid mode: {opts['mode']} (expected text or json)")
    return opts


# ---------------------------------------------------------------- config

def agent_dir() -> Path:
    env = os.environ.get("PI_CODING_AGENT_DIR")
    return Path(env) if env else Path.home() / ".pi" / "agent"


def load_json(path: Path) -> dict:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def pick_model(provider: str | None, model: str | None, last: tuple | None) -> tuple[str, dict, dict]:
    """(provider name, provider config, model config) from flags, session, settings."""
    providers = load_json(agent_dir() / "models.json").get("providers") or {}
    settings = load_json(agent_dir() / "settings.json")
    if model and "/" in model and not provider:
        provider, model = model.split("/", 1)
    if last and not provider and not model:
        provider, model = last
    provider = provider or settings.get("defaultProvider") or next(iter(providers), None)
    if provider not in providers:
        fail(f"Error: Unknown provider: {provider}. Configure it in {agent_dir() / 'models.json'}")
    cfg = providers[provider]
    models = cfg.get("models") or [{"id": model or "default"}]
    model = model or settings.get("defaultModel") or models[0]["id"]
    mcfg = next((m for m in models if m.get("id") == model), {"id": model})
    return provider, cfg, mcfg


def api_key(cfg: dict) -> str:
    raw = str(cfg.get("apiKey") or "")
    if raw.startswith("!"):
        return subprocess.run(raw[1:], shell=True, capture_output=True, text=True).stdout.strip()
    return os.environ.get(raw, raw)


def default_session_path(cwd: str, ts: str, sid: str, session_dir: str | None) -> Path:
    name = f"{ts.replace(':', '-').replace('.', '-')}_{sid}.jsonl"
    flat = session_dir or os.environ.get("PI_CODING_AGENT_SESSION_DIR")
    if flat:
        return Path(flat) / name
    folder = "--" + cwd.lstrip("/").replace("/", "-").replace("\\", "-").replace(":", "-") + "--"
    return agent_dir() / "sessions" / folder / name


# ---------------------------------------------------------------- session file

class SessionFile:
    """Header + entries; buffered until the first assistant message (like pi 0.73.1)."""

    def __init__(self, path: Path, plan: CrashPlan):
        self.path, self.plan = path, plan
        self.header: dict = {}
        self.entries: list[dict] = []
        self.flushed = False

    def new_header(self, cwd: str) -> None:
        self.header = {"type": "session", "version": 3, "id": uuid7(), "timestamp": now_iso(),
                       "cwd": cwd}

    def load(self, cwd: str) -> None:
        """Read an existing file; a bad line 1 truncates it to a fresh header."""
        lines = self.path.read_bytes().splitlines()
        header = _parse(lines[0]) if lines else None
        if not header or header.get("type") != "session" or not header.get("id"):
            self.new_header(cwd)
            self.path.write_bytes(json_line(self.header))
            self.flushed = True
            return
        self.header = header
        self.entries = [e for e in map(_parse, lines[1:]) if e and e.get("type")]
        self.flushed = True

    @property
    def leaf(self) -> str | None:
        return self.entries[-1]["id"] if self.entries else None

    def new_id(self) -> str:
        taken = {e.get("id") for e in self.entries}
        while True:
            candidate = secrets.token_hex(4)
            if candidate not in taken:
                return candidate

    def add(self, kind: str, **fields) -> dict:
        entry = {"type": kind, "id": self.new_id(), "parentId": self.leaf, "timestamp": now_iso()}
        entry.update(fields)
        self.entries.append(entry)
        self._persist(entry)
        return entry

    def _persist(self, entry: dict) -> None:
        if self.flushed:
            self._write(entry)
            return
        if not any(_role(e) == "assistant" for e in self.entries):
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._write(self.header)
        for e in self.entries:
            self._write(e)
        self.flushed = True

    def _write(self, obj: dict) -> None:
        write_record(self.path, json_line(obj), self.plan)

    def context(self) -> list[dict]:
        """Messages on the path from the leaf (last entry) back to the root."""
        index = {e["id"]: e for e in self.entries if e.get("id")}
        out, cur = [], self.leaf
        while cur and cur in index:
            out.append(index[cur])
            cur = index[cur].get("parentId")
        return [e["message"] for e in reversed(out) if e.get("type") == "message"]

    def last_model(self) -> tuple[str, str] | None:
        changes = [e for e in self.entries if e.get("type") == "model_change"]
        return (changes[-1]["provider"], changes[-1]["modelId"]) if changes else None


def _parse(line: bytes) -> dict | None:
    try:
        obj = json.loads(line)
    except ValueError:
        return None
    return obj if isinstance(obj, dict) else None


def _role(entry: dict) -> str | None:
    return (entry.get("message") or {}).get("role") if entry.get("type") == "message" else None


# ---------------------------------------------------------------- tools

TOOLS = {
    "read": ({"path": "string", "offset": "number", "limit": "number"}, ["path"]),
    "bash": ({"command": "string", "timeout": "number"}, ["command"]),
    "edit": ({"path": "string", "oldText": "string", "newText": "string"}, ["path"]),
    "write": ({"path": "string", "content": "string"}, ["path", "content"]),
}


def tool_specs() -> list[tuple[str, dict]]:
    return [(name, {"type": "object", "required": req,
                    "properties": {k: {"type": t} for k, t in props.items()}})
            for name, (props, req) in TOOLS.items()]


def run_tool(name: str, args: dict, cwd: str, plan: CrashPlan) -> tuple[str, bool]:
    """Run one Pi tool in `cwd`; return (text, is_error)."""
    try:
        if name == "bash":
            code, out = run_shell(args["command"], cwd, plan, timeout=args.get("timeout"))
            text = out.rstrip("\n") or "(no output)"
            return (text, False) if code == 0 else (f"{text}\n\nCommand exited with code {code}", True)
        if name == "write":
            info = write_file_tool(args["path"], args["content"], cwd)
            return f"Successfully wrote {info['bytes']} bytes to {args['path']}", False
        if name == "read":
            return _read(args, cwd), False
        if name == "edit":
            return _edit(args, cwd), False
    except (OSError, KeyError, ValueError) as exc:
        return str(exc), True
    return f"Tool {name} not found", True


def _read(args: dict, cwd: str) -> str:
    lines = read_file_tool(args["path"], cwd).split("\n")
    start = int(args.get("offset") or 1) - 1
    end = start + int(args["limit"]) if args.get("limit") else None
    return "\n".join(lines[start:end])


def _edit(args: dict, cwd: str) -> str:
    path = resolve(args["path"], cwd)
    text = path.read_text()
    edits = args.get("edits") or [{"oldText": args.get("oldText"), "newText": args.get("newText")}]
    for edit in edits:
        if not edit.get("oldText") or edit["oldText"] not in text:
            raise ValueError(f"Could not find the exact text in {args['path']}.")
        text = text.replace(edit["oldText"], edit["newText"] or "", 1)
    path.write_text(text)
    return f"Successfully replaced text in {args['path']}."


# ---------------------------------------------------------------- request building

def with_synthetic_results(messages: list[dict]) -> list[dict]:
    """Drop error/aborted assistants; pair dangling toolCalls with "No result provided"."""
    out: list[dict] = []
    kept = [m for m in messages if not (m.get("role") == "assistant"
                                        and m.get("stopReason") in ("error", "aborted"))]
    for i, msg in enumerate(kept):
        out.append(msg)
        if msg.get("role") != "assistant":
            continue
        later = kept[i + 1:]
        stop = next((j for j, m in enumerate(later) if m.get("role") != "toolResult"), len(later))
        answered = {m.get("toolCallId") for m in later[:stop]}
        for block in msg.get("content") or []:
            if block.get("type") == "toolCall" and block.get("id") not in answered:
                out.append({"role": "toolResult", "toolCallId": block["id"],
                            "toolName": block.get("name"), "synthetic": True,
                            "content": NO_RESULT, "isError": True})
    return out


def anthropic_messages(messages: list[dict]) -> list[dict]:
    out: list[dict] = []
    for msg in with_synthetic_results(messages):
        role = msg.get("role")
        if role == "user":
            out.append({"role": "user", "content": _text_blocks(msg.get("content"))})
        elif role == "assistant":
            out.append({"role": "assistant", "content": [_anthropic_block(b) for b in msg["content"]]})
        elif role == "toolResult":
            block = {"type": "tool_result", "tool_use_id": msg["toolCallId"],
                     "content": msg["content"] if isinstance(msg["content"], str)
                     else _text_blocks(msg["content"]), "is_error": bool(msg.get("isError"))}
            if out and out[-1]["role"] == "user" and out[-1].get("_results"):
                out[-1]["content"].append(block)
            else:
                out.append({"role": "user", "content": [block], "_results": True})
    for m in out:
        m.pop("_results", None)
    _mark_cache(out)
    return out


def _text_blocks(content) -> list[dict]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [{"type": "text", "text": b.get("text", "")} for b in content or [] if b.get("type") == "text"]


def _anthropic_block(block: dict) -> dict:
    if block.get("type") == "toolCall":
        return {"type": "tool_use", "id": block["id"], "name": block["name"],
                "input": block.get("arguments") or {}}
    if block.get("type") == "thinking":
        return {"type": "thinking", "thinking": block.get("thinking", ""),
                "signature": block.get("thinkingSignature", "")}
    return {"type": "text", "text": block.get("text", "")}


def _mark_cache(messages: list[dict]) -> None:
    for msg in reversed(messages):
        if msg["role"] == "user":
            texts = [b for b in msg["content"] if b.get("type") == "text"]
            if texts:
                texts[-1]["cache_control"] = {"type": "ephemeral"}
            return


def chat_messages(system: str, messages: list[dict]) -> list[dict]:
    out: list[dict] = [{"role": "system", "content": system}]
    for msg in with_synthetic_results(messages):
        role = msg.get("role")
        if role == "user":
            out.append({"role": "user", "content": "".join(b["text"] for b in _text_blocks(msg["content"]))})
        elif role == "assistant":
            text = "".join(b.get("text", "") for b in msg["content"] if b.get("type") == "text")
            calls = [{"id": b["id"], "type": "function", "function": {
                "name": b["name"], "arguments": json.dumps(b.get("arguments") or {})}}
                for b in msg["content"] if b.get("type") == "toolCall"]
            item = {"role": "assistant", "content": text or None}
            if calls:
                item["tool_calls"] = calls
            out.append(item)
        elif role == "toolResult":
            content = msg["content"] if isinstance(msg["content"], str) else \
                "".join(b["text"] for b in _text_blocks(msg["content"]))
            out.append({"role": "tool", "tool_call_id": msg["toolCallId"], "content": content})
    return out


# ---------------------------------------------------------------- streaming

class ModelError(Exception):
    pass


class Stream:
    """Accumulates one assistant message from either API; reports Pi events."""

    def __init__(self, base: dict, emit):
        self.msg = dict(base, content=[])
        self.emit = emit
        self.partial: dict[int, str] = {}

    def event(self, kind: str, index: int, **extra) -> None:
        self.emit({"type": "message_update",
                   "assistantMessageEvent": {"type": kind, "contentIndex": index, **extra},
                   "message": self.msg})

    def start_text(self, index: int) -> None:
        self.msg["content"].append({"type": "text", "text": ""})
        self.event("text_start", index)

    def text(self, index: int, delta: str) -> None:
        self.msg["content"][index]["text"] += delta
        self.event("text_delta", index, delta=delta)

    def start_call(self, index: int, call_id: str, name: str) -> None:
        self.msg["content"].append({"type": "toolCall", "id": call_id, "name": name, "arguments": {}})
        self.partial[index] = ""
        self.event("toolcall_start", index)

    def call_args(self, index: int, delta: str) -> None:
        self.partial[index] += delta
        self.event("toolcall_delta", index, delta=delta)

    def end_block(self, index: int) -> None:
        block = self.msg["content"][index]
        if block["type"] == "toolCall":
            raw = self.partial.get(index, "")
            block["arguments"] = json.loads(raw) if raw.strip() else {}
            self.event("toolcall_end", index, toolCall=block)
        else:
            self.event("text_end", index, content=block["text"])


def stream_anthropic(url: str, body: dict, headers: dict, plan: CrashPlan, s: Stream) -> None:
    for event, data in stream_sse(url, body, headers, plan):
        kind = data.get("type", event)
        if kind == "message_start":
            s.msg["responseId"] = data["message"].get("id")
            _usage(s.msg, input=data["message"].get("usage", {}).get("input_tokens", 0))
        elif kind == "content_block_start":
            block = data["content_block"]
            if block.get("type") == "tool_use":
                s.start_call(data["index"], block["id"], block["name"])
            else:
                s.start_text(data["index"])
        elif kind == "content_block_delta":
            delta = data["delta"]
            if delta.get("type") == "text_delta":
                s.text(data["index"], delta["text"])
            elif delta.get("type") == "input_json_delta":
                s.call_args(data["index"], delta.get("partial_json", ""))
        elif kind == "content_block_stop":
            s.end_block(data["index"])
        elif kind == "message_delta":
            reason = (data.get("delta") or {}).get("stop_reason")
            s.msg["stopReason"] = {"tool_use": "toolUse", "max_tokens": "length"}.get(reason, "stop")
            _usage(s.msg, output=(data.get("usage") or {}).get("output_tokens", 0))
        elif kind == "message_stop":
            return
        elif kind == "error":
            raise ModelError(json.dumps(data.get("error", data)))
    raise ModelError("stream ended before message_stop")


def stream_chat(url: str, body: dict, headers: dict, plan: CrashPlan, s: Stream) -> None:
    slots: dict[int, int] = {}
    finished = False
    for _event, data in stream_sse(url, body, headers, plan):
        s.msg["responseId"] = data.get("id", s.msg.get("responseId"))
        if data.get("usage"):
            _usage(s.msg, input=data["usage"].get("prompt_tokens", 0),
                   output=data["usage"].get("completion_tokens", 0))
        for choice in data.get("choices") or []:
            _chat_delta(s, choice.get("delta") or {}, slots)
            if choice.get("finish_reason"):
                finished = True
                s.msg["stopReason"] = {"tool_calls": "toolUse", "length": "length"}.get(
                    choice["finish_reason"], "stop")
    if not finished:
        raise ModelError("stream ended without finish_reason")
    for index in range(len(s.msg["content"])):
        s.end_block(index)


def _chat_delta(s: Stream, delta: dict, slots: dict[int, int]) -> None:
    if delta.get("content"):
        if not s.msg["content"] or s.msg["content"][-1]["type"] != "text":
            s.start_text(len(s.msg["content"]))
        s.text(len(s.msg["content"]) - 1, delta["content"])
    for call in delta.get("tool_calls") or []:
        k = call.get("index", 0)
        if k not in slots:
            slots[k] = len(s.msg["content"])
            s.start_call(slots[k], call.get("id") or f"call_{k}", call["function"]["name"])
        if call.get("function", {}).get("arguments"):
            s.call_args(slots[k], call["function"]["arguments"])


def _usage(msg: dict, input: int | None = None, output: int | None = None) -> None:
    u = msg["usage"]
    if input is not None:
        u["input"] = input
    if output is not None:
        u["output"] = output
    u["totalTokens"] = u["input"] + u["output"] + u["cacheRead"] + u["cacheWrite"]


# ---------------------------------------------------------------- the agent

class Pi:
    """One session: the file, the model connection and the agent loop."""

    def __init__(self, session: SessionFile, provider: str, cfg: dict, mcfg: dict,
                 plan: CrashPlan, json_mode: bool):
        self.s, self.provider, self.cfg, self.mcfg = session, provider, cfg, mcfg
        self.plan, self.json_mode = plan, json_mode
        self.api = cfg.get("api", "anthropic-messages")
        self.cwd = session.header["cwd"]
        self.new_messages: list[dict] = []

    def emit(self, obj: dict) -> None:
        if self.json_mode:
            sys.stdout.write(json.dumps(obj, separators=(",", ":"), ensure_ascii=False) + "\n")
            sys.stdout.flush()

    def add_message(self, message: dict) -> None:
        self.emit({"type": "message_start", "message": message})
        self.emit({"type": "message_end", "message": message})
        self.s.add("message", message=message)
        self.new_messages.append(message)

    def prompt(self, text: str) -> dict | None:
        self.emit({"type": "agent_start"})
        self.emit({"type": "turn_start"})
        self.add_message({"role": "user", "content": [{"type": "text", "text": text}],
                          "timestamp": now_ms()})
        last = None
        while True:
            last = self.assistant_turn()
            results = self.run_calls(last)
            self.emit({"type": "turn_end", "message": last, "toolResults": results})
            if last.get("stopReason") != "toolUse" or not results:
                break
            self.emit({"type": "turn_start"})
        self.emit({"type": "agent_end", "messages": self.new_messages})
        return last

    def base_message(self) -> dict:
        return {"role": "assistant", "content": [], "api": self.api, "provider": self.provider,
                "model": self.mcfg["id"],
                "usage": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0,
                          "totalTokens": 0, "cost": dict(ZERO_COST)},
                "stopReason": "stop", "timestamp": now_ms()}

    def assistant_turn(self) -> dict:
        stream = Stream(self.base_message(), self.emit)
        self.emit({"type": "message_start", "message": stream.msg})
        try:
            self.call_model(stream)
        except (ModelError, urllib.error.URLError, OSError, ValueError) as exc:
            stream.msg.update(stopReason="error", errorMessage=_error_text(exc))
        message = stream.msg
        self.emit({"type": "message_end", "message": message})
        self.s.add("message", message=message)
        self.new_messages.append(message)
        return message

    def call_model(self, stream: Stream) -> None:
        base = str(self.cfg.get("baseUrl", "")).rstrip("/")
        key, system = api_key(self.cfg), f"You are pi, a coding agent. Working directory: {self.cwd}"
        context = self.s.context()
        if self.api == "openai-completions":
            body = {"model": self.mcfg["id"], "messages": chat_messages(system, context),
                    "stream": True, "stream_options": {"include_usage": True}, "store": False,
                    "max_completion_tokens": self.mcfg.get("maxTokens", 8192),
                    "tools": [{"type": "function", "function": {
                        "name": n, "description": f"{n} tool", "parameters": p}}
                        for n, p in tool_specs()]}
            stream_chat(base + "/chat/completions", body, {"authorization": f"Bearer {key}"},
                        self.plan, stream)
            return
        body = {"model": self.mcfg["id"], "max_tokens": self.mcfg.get("maxTokens", 8192),
                "stream": True, "system": [{"type": "text", "text": system}],
                "tools": [{"name": n, "description": f"{n} tool", "input_schema": p}
                          for n, p in tool_specs()],
                "messages": anthropic_messages(context)}
        headers = {"x-api-key": key, "anthropic-version": "2023-06-01",
                   "user-agent": "Anthropic/JS 0.91.1"}
        stream_anthropic(base + "/v1/messages", body, headers, self.plan, stream)

    def run_calls(self, message: dict) -> list[dict]:
        if message.get("stopReason") != "toolUse":
            return []
        results = []
        for call in (b for b in message["content"] if b.get("type") == "toolCall"):
            self.emit({"type": "tool_execution_start", "toolCallId": call["id"],
                       "toolName": call["name"], "args": call["arguments"]})
            text, is_error = run_tool(call["name"], call["arguments"], self.cwd, self.plan)
            content = [{"type": "text", "text": text}]
            self.emit({"type": "tool_execution_end", "toolCallId": call["id"],
                       "toolName": call["name"], "result": {"content": content}, "isError": is_error})
            result = {"role": "toolResult", "toolCallId": call["id"], "toolName": call["name"],
                      "content": content, "isError": is_error, "timestamp": now_ms()}
            self.add_message(result)
            results.append(result)
        return results


def _error_text(exc: Exception) -> str:
    if isinstance(exc, urllib.error.HTTPError):
        return f"{exc.code} {exc.read().decode(errors='replace')}"
    return str(exc)


# ---------------------------------------------------------------- main

def open_session(opts: dict, cwd: str, plan: CrashPlan) -> SessionFile:
    if opts["session"]:
        path = Path(os.path.abspath(os.path.expanduser(opts["session"])))
        session = SessionFile(path, plan)
        if path.exists():
            session.load(cwd)
        else:
            session.new_header(cwd)
        return session
    session = SessionFile(Path("/"), plan)
    session.new_header(cwd)
    session.path = default_session_path(cwd, session.header["timestamp"], session.header["id"],
                                        opts["session_dir"])
    return session


def record_model(session: SessionFile, provider: str, model: str) -> None:
    if session.last_model() != (provider, model):
        session.add("model_change", provider=provider, modelId=model)
    if not any(e.get("type") == "thinking_level_change" for e in session.entries):
        session.add("thinking_level_change", thinkingLevel="off")


def assistant_text(message: dict | None) -> str:
    if not message:
        return ""
    return "".join(b.get("text", "") for b in message.get("content") or [] if b.get("type") == "text")


def run_prompt(agent: Pi, text: str) -> int:
    last = agent.prompt(text)
    if last and last.get("stopReason") == "error":
        sys.stderr.write(f"Error: {last.get('errorMessage')}\n")
        return 1
    if not agent.json_mode:
        print(assistant_text(last), flush=True)
    return 0


def interactive(agent: Pi, first: list[str]) -> int:
    print(f"pi v{VERSION} (fake) — {agent.cwd}", flush=True)
    queue = list(first)
    while True:
        if not queue:
            sys.stdout.write("› ")
            sys.stdout.flush()
            line = sys.stdin.readline()
            if not line:
                return 0
            queue.append(line.strip())
        text = queue.pop(0)
        if text in ("/exit", "/quit"):
            return 0
        if text:
            last = agent.prompt(text)
            print(assistant_text(last) or f"Error: {last.get('errorMessage')}", flush=True)


def main(argv: list[str] | None = None) -> int:
    opts = parse_args(sys.argv[1:] if argv is None else argv)
    if opts["version"]:
        print(VERSION)
        return 0
    if opts["help"]:
        print("Usage: pi [options] [messages...]")
        return 0
    plan = CrashPlan.from_env()
    plan.check_start()
    cwd = os.getcwd()
    session = open_session(opts, cwd, plan)
    if not os.path.isdir(session.header["cwd"]):
        fail(f"Stored session working directory does not exist: {session.header['cwd']}")
    provider, cfg, mcfg = pick_model(opts["provider"], opts["model"], session.last_model())
    agent = Pi(session, provider, cfg, mcfg, plan, opts["mode"] == "json")
    agent.emit(session.header)
    if not opts["print"]:
        record_model(session, provider, mcfg["id"])
        return interactive(agent, opts["messages"])
    if not opts["messages"]:
        return 0
    record_model(session, provider, mcfg["id"])
    code = 0
    for text in opts["messages"]:
        code = run_prompt(agent, text) or code
    return code


if __name__ == "__main__":
    sys.exit(main())
