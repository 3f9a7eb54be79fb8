"""Scripted fake model server for end-to-end tests (standard library only).

Design:
* One ThreadingHTTPServer on loopback speaks Anthropic Messages, OpenAI Responses and Chat
  Completions (SSE or one JSON body), plus HEAD/GET on any path and a few `/_` control endpoints.
* The reply is chosen statelessly from the request: step index = number of tool results already
  in the conversation; past the end of the script the last reply repeats. Requests without
  `tools` are side calls: answered "ok", never delayed, never advancing anything.
* Abstract script steps (`shell`/`write`/`read`) are mapped onto the tools the request offers.
* Every request is logged on arrival (before any stall), then `response_done`/`response_aborted`.
  Stalls poll the client socket so a killed client is seen at once, and end on `.stop()`.
* A limit window (`limit_window`, `POST /_limit`): from the Nth main request on, every model
  request is refused for a span of seconds with a provider's limit answer (LIMIT_STYLES), the
  way the Anthropic API, the OpenAI API and ChatGPT-plan Codex answer one; logged
  `response_refused`, never a delivery.
* Run `python -m tests.fakes.model_server --script F --port-file F [--log F]` for a separate process.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import select
import shlex
import signal
import socket
import threading
import time
import zlib
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable

ANTHROPIC, RESPONSES, CHAT, OTHER = "anthropic", "responses", "chat", "other"
TOOL_OUTPUT_TYPES = ("function_call_output", "custom_tool_call_output", "local_shell_call_output")
OPENCODE_ONLY_TOOLS = {"todowrite", "glob", "task", "skill"}
POLL_S = 0.05


# ---------------------------------------------------------------- script


def load_script(path: str) -> dict | list:
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)


def replies_of(script: dict | list) -> list[dict]:
    replies = script if isinstance(script, list) else script.get("replies", [])
    return list(replies) or [{"text": "ok"}]


def side_text_of(script: dict | list) -> str:
    return script.get("side_text", "ok") if isinstance(script, dict) else "ok"


# ---------------------------------------------------------------- limit answers

LIMIT_STYLES = ("anthropic", "openai", "usage")


def limit_answer(style: str, left: float, now: float) -> tuple[int, dict, dict]:
    """(status, headers, body) of a limit refusal with `left` seconds until it resets:
    `anthropic`, the Messages API's 429 with the unified rate-limit headers a subscription
    gets; `openai`, the OpenAI API's 429 `rate_limit_exceeded`; `usage`, the ChatGPT-plan
    429 `usage_limit_reached` that Codex receives."""
    wait = max(1, int(left + 0.999))
    reset = int(now + wait)
    if style == "anthropic":
        headers = {"retry-after": str(wait), "anthropic-ratelimit-unified-status": "rejected",
                   "anthropic-ratelimit-unified-reset": str(reset),
                   "anthropic-ratelimit-unified-representative-claim": "five_hour"}
        return 429, headers, {"type": "error", "error": {
            "type": "rate_limit_error",
            "message": "This request would exceed your account's rate limit. Please try again later."}}
    if style == "openai":
        return 429, {"retry-after": str(wait)}, {"error": {
            "message": f"Rate limit reached for requests. Please try again in {wait}s.",
            "type": "requests", "param": None, "code": "rate_limit_exceeded"}}
    if style == "usage":
        return 429, {}, {"error": {"type": "usage_limit_reached", "message": "The usage limit has been reached",
                                   "plan_type": "plus", "resets_at": reset, "resets_in_seconds": wait}}
    raise ValueError(f"unknown limit style {style!r} (one of {', '.join(LIMIT_STYLES)})")


@dataclass
class LimitWindow:
    """From the `from_request`-th main request on (1-based), every model request is refused
    for `seconds` (timed from the first refusal)."""

    style: str
    seconds: float
    from_request: int = 1
    advertise: float | None = None  # the seconds to reset the answers say (None: the truth)
    opened: float | None = None  # wall-clock seconds of the first refusal

    def refuses(self, mains_so_far: int, now: float) -> bool:
        if self.opened is None:
            if mains_so_far < self.from_request:
                return False
            self.opened = now
        return now < self.opened + self.seconds

    def left(self, now: float) -> float:
        if self.advertise is not None:
            return self.advertise
        return (self.opened or now) + self.seconds - now


# ---------------------------------------------------------------- request analysis


def detect_api(path: str) -> str:
    route = path.split("?", 1)[0].rstrip("/")
    if route.endswith("/messages"):
        return ANTHROPIC
    if route.endswith("/responses"):
        return RESPONSES
    if route.endswith("/chat/completions"):
        return CHAT
    return OTHER


def is_count_tokens(path: str) -> bool:
    return path.split("?", 1)[0].rstrip("/").endswith("/messages/count_tokens")


def content_text(content: Any) -> str:
    """Text of a tool result's content: a string or a list of text-ish blocks."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(b.get("text", "") for b in content if isinstance(b, dict))
    return "" if content is None else json.dumps(content)


def _anthropic_tool_results(body: dict) -> list[tuple[str, str, bool]]:
    found = []
    for msg in body.get("messages") or []:
        if msg.get("role") != "user" or not isinstance(msg.get("content"), list):
            continue
        for block in msg["content"]:
            if isinstance(block, dict) and block.get("type") == "tool_result":
                found.append((block.get("tool_use_id"), content_text(block.get("content")),
                              bool(block.get("is_error"))))
    return found


def _responses_tool_results(body: dict) -> list[tuple[str, str, bool]]:
    items = body.get("input")
    if not isinstance(items, list):
        return []
    return [(it.get("call_id"), content_text(it.get("output")), False)
            for it in items if isinstance(it, dict) and it.get("type") in TOOL_OUTPUT_TYPES]


def _chat_tool_results(body: dict) -> list[tuple[str, str, bool]]:
    return [(m.get("tool_call_id"), content_text(m.get("content")), False)
            for m in body.get("messages") or [] if isinstance(m, dict) and m.get("role") == "tool"]


def tool_results(api: str, body: Any) -> list[tuple[str, str, bool]]:
    """(id, text, is_error) of every tool result in the request, in order."""
    if not isinstance(body, dict):
        return []
    extract = {ANTHROPIC: _anthropic_tool_results, RESPONSES: _responses_tool_results,
               CHAT: _chat_tool_results}.get(api)
    return extract(body) if extract else []


def offered_tools(body: Any) -> dict[str, dict]:
    """Offered tool name -> its spec, for Anthropic, Responses and Chat tool lists."""
    tools = {}
    for spec in (body.get("tools") if isinstance(body, dict) else None) or []:
        if not isinstance(spec, dict):
            continue
        fn = spec.get("function") if isinstance(spec.get("function"), dict) else {}
        name = spec.get("name") or fn.get("name") or spec.get("type")
        if name:
            tools[name] = spec
    return tools


def tool_params(spec: dict) -> set[str]:
    fn = spec.get("function") if isinstance(spec.get("function"), dict) else {}
    schema = spec.get("input_schema") or spec.get("parameters") or fn.get("parameters") or {}
    return set((schema.get("properties") or {}) if isinstance(schema, dict) else {})


# ---------------------------------------------------------------- mapping steps onto tools


def _looks_like_opencode(tools: dict) -> bool:
    return bool(OPENCODE_ONLY_TOOLS & tools.keys())


def _path_key(tools: dict, name: str) -> str:
    params = tool_params(tools[name])
    if params:
        return "filePath" if "filePath" in params else "path"
    return "filePath" if _looks_like_opencode(tools) else "path"


def _bash_wants_description(tools: dict) -> bool:
    params = tool_params(tools["bash"])
    return "description" in params if params else _looks_like_opencode(tools)


def _describe(cmd: str) -> str:
    return ("Run " + cmd)[:60]


def shell_call(cmd: str, tools: dict) -> tuple[str, Any]:
    if "Bash" in tools:
        return "Bash", {"command": cmd, "description": _describe(cmd)}
    if "bash" in tools:
        args = {"command": cmd}
        if _bash_wants_description(tools):
            args["description"] = _describe(cmd)
        return "bash", args
    if "exec_command" in tools:
        return "exec_command", {"cmd": cmd}
    if "shell_command" in tools:
        return "shell_command", {"command": cmd}
    if "shell" in tools:
        return "shell", {"command": ["bash", "-lc", cmd]}
    return "bash", {"command": cmd}


def write_call(path: str, content: str, tools: dict) -> tuple[str, Any]:
    if "Write" in tools:
        return "Write", {"file_path": path, "content": content}
    if "write" in tools:
        return "write", {_path_key(tools, "write"): path, "content": content}
    return shell_call(f"printf '%s' {shlex.quote(content)} > {shlex.quote(path)}", tools)


def read_call(path: str, tools: dict) -> tuple[str, Any]:
    if "Read" in tools:
        return "Read", {"file_path": path}
    if "read" in tools:
        return "read", {_path_key(tools, "read"): path}
    return shell_call(f"cat {shlex.quote(path)}", tools)


def resolve_tool_call(reply: dict, tools: dict) -> tuple[str, Any] | None:
    """(tool name, arguments) for a reply's one tool call, or None for a text-only reply."""
    concrete = reply.get("tool_use") or reply.get("tool_call")
    if concrete:
        return concrete["name"], concrete.get("input", concrete.get("arguments", {}))
    if "shell" in reply:
        return shell_call(reply["shell"], tools)
    if "write" in reply:
        return write_call(reply["write"]["path"], reply["write"]["content"], tools)
    if "read" in reply:
        return read_call(reply["read"]["path"], tools)
    return None


# ---------------------------------------------------------------- rendering


@dataclass
class Turn:
    """Everything needed to render one assistant reply in any API shape."""

    n: int
    model: str
    text: str
    tool_name: str | None
    tool_args: Any
    call_id: str
    custom: bool
    input_tokens: int
    output_tokens: int
    include_usage: bool
    cache: dict | None = None  # cache_write_5m, cache_write_1h, cache_read (Anthropic usage)

    def args_dict(self) -> dict:
        return json.loads(self.tool_args) if isinstance(self.tool_args, str) else self.tool_args

    def args_string(self) -> str:
        return self.tool_args if isinstance(self.tool_args, str) else json.dumps(self.tool_args)


def build_turn(api: str, reply: dict, body: dict, index: int, n: int) -> Turn:
    tools = offered_tools(body)
    call = resolve_tool_call(reply, tools)
    name, args = call if call else (None, None)
    usage = reply.get("usage") or {}
    defaults = (10, 5) if api == ANTHROPIC else (100, 10)
    return Turn(
        n=n, model=body.get("model") or "fake-model", text=reply.get("text") or "",
        tool_name=name, tool_args=args,
        call_id=f"toolu_{index:03d}" if api == ANTHROPIC else f"call_{index:03d}",
        custom=api == RESPONSES and tools.get(name, {}).get("type") == "custom",
        input_tokens=usage.get("input", defaults[0]), output_tokens=usage.get("output", defaults[1]),
        include_usage=bool((body.get("stream_options") or {}).get("include_usage")),
        cache={k: usage[k] for k in ("cache_write_5m", "cache_write_1h", "cache_read") if k in usage} or None)


def text_chunks(text: str) -> list[str]:
    words = re.findall(r"\s*\S+\s*", text) or [text]
    return ["".join(words[i:i + 2]) for i in range(0, len(words), 2)]


def halves(s: str) -> list[str]:
    mid = len(s) // 2
    return [p for p in (s[:mid], s[mid:]) if p] or [""]


def sse(event: str, data: dict) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()


def sse_data(data: dict | str) -> bytes:
    return f"data: {data if isinstance(data, str) else json.dumps(data)}\n\n".encode()


# Anthropic Messages -------------------------------------------------------


def anthropic_blocks(t: Turn) -> list[dict]:
    blocks = [{"type": "text", "text": t.text}] if t.text or not t.tool_name else []
    if t.tool_name:
        blocks.append({"type": "tool_use", "id": t.call_id, "name": t.tool_name, "input": t.args_dict()})
    return blocks


def anthropic_message(t: Turn, content: list, stop: str | None, output_tokens: int) -> dict:
    usage = {"input_tokens": t.input_tokens, "cache_creation_input_tokens": 0,
             "cache_read_input_tokens": 0, "output_tokens": output_tokens}
    if t.cache:  # a reply's usage may name cache reads and writes of each TTL, as the API does
        w5, w1h = t.cache.get("cache_write_5m", 0), t.cache.get("cache_write_1h", 0)
        usage.update(cache_creation_input_tokens=w5 + w1h, cache_read_input_tokens=t.cache.get("cache_read", 0),
                     cache_creation={"ephemeral_5m_input_tokens": w5, "ephemeral_1h_input_tokens": w1h})
    return {"id": f"msg_{t.n}", "type": "message", "role": "assistant", "model": t.model,
            "content": content, "stop_reason": stop, "stop_sequence": None, "usage": usage}


def anthropic_stop(t: Turn) -> str:
    return "tool_use" if t.tool_name else "end_turn"


def anthropic_body(t: Turn) -> dict:
    return anthropic_message(t, anthropic_blocks(t), anthropic_stop(t), t.output_tokens)


def anthropic_block_events(index: int, block: dict) -> list[tuple[str, dict]]:
    if block["type"] == "text":
        start = {"type": "text", "text": ""}
        deltas = [{"type": "text_delta", "text": c} for c in text_chunks(block["text"])]
    else:
        start = {**block, "input": {}}
        deltas = [{"type": "input_json_delta", "partial_json": p} for p in halves(json.dumps(block["input"]))]
    return ([("content_block_start", {"index": index, "content_block": start})]
            + [("content_block_delta", {"index": index, "delta": d}) for d in deltas]
            + [("content_block_stop", {"index": index})])


def anthropic_stream(t: Turn) -> list[bytes]:
    events = [("message_start", {"message": anthropic_message(t, [], None, 1)}), ("ping", {})]
    for index, block in enumerate(anthropic_blocks(t)):
        events += anthropic_block_events(index, block)
    events.append(("message_delta", {"delta": {"stop_reason": anthropic_stop(t), "stop_sequence": None},
                                     "usage": {"output_tokens": t.output_tokens}}))
    events.append(("message_stop", {}))
    return [sse(name, {"type": name, **data}) for name, data in events]


# OpenAI Responses ----------------------------------------------------------


def responses_items(t: Turn) -> list[dict]:
    items = []
    if t.text or not t.tool_name:
        part = {"type": "output_text", "text": t.text, "annotations": []}
        items.append({"id": f"msg_{t.n}", "type": "message", "status": "completed",
                      "role": "assistant", "content": [part]})
    if t.tool_name and t.custom:
        items.append({"id": f"ctc_{t.n}", "type": "custom_tool_call", "status": "completed",
                      "call_id": t.call_id, "name": t.tool_name, "input": t.args_string()})
    elif t.tool_name:
        items.append({"id": f"fc_{t.n}", "type": "function_call", "status": "completed",
                      "call_id": t.call_id, "name": t.tool_name, "arguments": t.args_string()})
    return items


def responses_usage(t: Turn) -> dict:
    return {"input_tokens": t.input_tokens, "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": t.output_tokens, "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": t.input_tokens + t.output_tokens}


def responses_object(t: Turn, status: str, output: list, usage: dict | None) -> dict:
    return {"id": f"resp_{t.n}", "object": "response", "created_at": int(time.time()),
            "status": status, "model": t.model, "output": output, "usage": usage}


def responses_body(t: Turn) -> dict:
    return responses_object(t, "completed", responses_items(t), responses_usage(t))


def responses_message_events(i: int, item: dict) -> list[tuple[str, dict]]:
    part = item["content"][0]
    ref = {"item_id": item["id"], "output_index": i, "content_index": 0}
    return ([("response.output_item.added",
              {"output_index": i, "item": {**item, "status": "in_progress", "content": []}}),
             ("response.content_part.added", {**ref, "part": {**part, "text": ""}})]
            + [("response.output_text.delta", {**ref, "delta": c}) for c in text_chunks(part["text"])]
            + [("response.output_text.done", {**ref, "text": part["text"]}),
               ("response.content_part.done", {**ref, "part": part}),
               ("response.output_item.done", {"output_index": i, "item": item})])


def responses_call_events(i: int, item: dict) -> list[tuple[str, dict]]:
    field, kind = ("input", "custom_tool_call_input") if item["type"] == "custom_tool_call" \
        else ("arguments", "function_call_arguments")
    ref = {"item_id": item["id"], "output_index": i}
    return ([("response.output_item.added",
              {"output_index": i, "item": {**item, "status": "in_progress", field: ""}})]
            + [(f"response.{kind}.delta", {**ref, "delta": p}) for p in halves(item[field])]
            + [(f"response.{kind}.done", {**ref, field: item[field]}),
               ("response.output_item.done", {"output_index": i, "item": item})])


def responses_stream(t: Turn) -> list[bytes]:
    start = responses_object(t, "in_progress", [], None)
    events = [("response.created", {"response": start}), ("response.in_progress", {"response": start})]
    items = responses_items(t)
    for i, item in enumerate(items):
        render = responses_message_events if item["type"] == "message" else responses_call_events
        events += render(i, item)
    events.append(("response.completed", {"response": responses_body(t)}))
    return [sse(name, {"type": name, "sequence_number": k, **data})
            for k, (name, data) in enumerate(events)]


# Chat Completions ------------------------------------------------------------


def chat_usage(t: Turn) -> dict:
    return {"prompt_tokens": t.input_tokens, "completion_tokens": t.output_tokens,
            "total_tokens": t.input_tokens + t.output_tokens}


def chat_finish(t: Turn) -> str:
    return "tool_calls" if t.tool_name else "stop"


def chat_tool_call(t: Turn) -> dict:
    return {"id": t.call_id, "type": "function",
            "function": {"name": t.tool_name, "arguments": t.args_string()}}


def chat_body(t: Turn) -> dict:
    message = {"role": "assistant", "content": t.text or None}
    if t.tool_name:
        message["tool_calls"] = [chat_tool_call(t)]
    return {"id": f"chatcmpl_{t.n}", "object": "chat.completion", "created": int(time.time()),
            "model": t.model, "choices": [{"index": 0, "message": message, "finish_reason": chat_finish(t)}],
            "usage": chat_usage(t)}


def chat_chunk(t: Turn, choices: list, **extra: Any) -> dict:
    return {"id": f"chatcmpl_{t.n}", "object": "chat.completion.chunk", "created": int(time.time()),
            "model": t.model, "choices": choices, **extra}


def chat_deltas(t: Turn) -> list[dict]:
    deltas = [{"role": "assistant", "content": ""}]
    deltas += [{"content": c} for c in text_chunks(t.text)] if t.text else []
    if t.tool_name:
        head = {"index": 0, "id": t.call_id, "type": "function",
                "function": {"name": t.tool_name, "arguments": ""}}
        deltas.append({"tool_calls": [head]})
        deltas += [{"tool_calls": [{"index": 0, "function": {"arguments": p}}]} for p in halves(t.args_string())]
    return deltas


def chat_stream(t: Turn) -> list[bytes]:
    chunks = [chat_chunk(t, [{"index": 0, "delta": d, "finish_reason": None}]) for d in chat_deltas(t)]
    chunks.append(chat_chunk(t, [{"index": 0, "delta": {}, "finish_reason": chat_finish(t)}]))
    if t.include_usage:
        chunks.append(chat_chunk(t, [], usage=chat_usage(t)))
    return [sse_data(c) for c in chunks] + [sse_data("[DONE]")]


RENDERERS: dict[str, tuple[Callable[[Turn], list[bytes]], Callable[[Turn], dict]]] = {
    ANTHROPIC: (anthropic_stream, anthropic_body),
    RESPONSES: (responses_stream, responses_body),
    CHAT: (chat_stream, chat_body),
}

MODELS_LIST = {"object": "list", "has_more": False, "data": [
    {"id": "fake-model", "object": "model", "type": "model", "display_name": "Fake Model",
     "created": 0, "created_at": "2026-01-01T00:00:00Z", "owned_by": "fake"}]}


# ---------------------------------------------------------------- body decoding


def read_chunked(rfile) -> bytes:
    parts = []
    while True:
        size = int(rfile.readline().split(b";", 1)[0].strip() or b"0", 16)
        if size == 0:
            while rfile.readline() not in (b"\r\n", b"\n", b""):
                pass
            return b"".join(parts)
        parts.append(rfile.read(size))
        rfile.readline()


def decompress(raw: bytes, encoding: str) -> bytes:
    encoding = encoding.strip().lower()
    if encoding in ("gzip", "x-gzip"):
        return gzip.decompress(raw)
    if encoding == "deflate":
        try:
            return zlib.decompress(raw)
        except zlib.error:
            return zlib.decompress(raw, -zlib.MAX_WBITS)
    return raw


def parse_json(raw: bytes) -> Any:
    try:
        return json.loads(raw) if raw else None
    except ValueError:
        return None


def client_gone(sock: socket.socket, timeout: float) -> bool:
    """Wait up to `timeout` for the peer; True once it has closed the connection."""
    try:
        readable, _, _ = select.select([sock], [], [], timeout)
        if not readable:
            return False
        if sock.recv(1, socket.MSG_PEEK) == b"":
            return True
    except (OSError, ValueError):
        return True
    time.sleep(timeout)  # data pending (pipelined request): not a disconnect
    return False


# ---------------------------------------------------------------- the server


@dataclass
class Plan:
    """What to do for one admitted request, decided under the lock at arrival."""

    seq: int
    kind: str
    reply_index: int | None
    reply: dict
    n: int
    delay_s: float = 0.0
    stall_at: str = "stream"
    refusal: tuple[int, dict, dict] | None = None  # a limit answer in place of the reply


class FakeModelServer:
    """Scripted fake model server; see the module docstring."""

    def __init__(self, script: dict | list, host: str = "127.0.0.1", port: int = 0,
                 log_file: str | None = None):
        self.host, self._requested_port, self._log_file = host, port, log_file
        self._lock = threading.Lock()
        self._entries: list[dict] = []
        self._seq = self._ids = 0
        self._served: dict[int, int] = {}
        self._armed: tuple[float, str] | None = None
        self._limit: LimitWindow | None = None
        self._mains = 0  # main requests admitted (the limit window counts them)
        self._stopping = threading.Event()
        self._releases = 0  # release_stalls() calls: a stall begun before the last one ends
        self._conns: set[socket.socket] = set()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._port = port
        self.set_script(script)

    # lifecycle -------------------------------------------------------------

    def start(self) -> "FakeModelServer":
        httpd = ThreadingHTTPServer((self.host, self._requested_port), _Handler)
        httpd.daemon_threads, httpd.block_on_close, httpd.fake = True, False, self
        self._httpd, self._port = httpd, httpd.server_address[1]
        self._thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.02},
                                        name="fake-model-server", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        if self._httpd is None:
            return
        self._httpd.shutdown()
        self._httpd.server_close()
        self._close_connections()
        self._thread.join(timeout=5)
        self._httpd = None

    def __enter__(self) -> "FakeModelServer":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    @property
    def port(self) -> int:
        return self._port

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    # control ---------------------------------------------------------------

    def set_script(self, script: dict | list) -> None:
        with self._lock:
            self._replies, self._side_text = replies_of(script), side_text_of(script)

    def arm_stall(self, seconds: float, stall_at: str = "stream") -> None:
        """Make the NEXT main request stall for `seconds` (one shot)."""
        with self._lock:
            self._armed = (float(seconds), stall_at)

    def release_stalls(self) -> None:
        """End every stall in progress now, as if its delay had elapsed: a test that must see
        something happen *during* a stall makes it long and ends it here, so no delay has to
        outlast the test's own steps on a loaded machine."""
        with self._lock:
            self._releases += 1

    def limit_window(self, style: str, seconds: float, from_request: int = 1,
                     advertise: float | None = None) -> None:
        """Refuse every model request with a `style` limit (LIMIT_STYLES) for `seconds`,
        from the `from_request`-th main request on (counted from the server's start).
        advertise: the seconds to its reset the answers claim (a harness waits a short
        `retry-after` out by itself; a test window must stay short)."""
        limit_answer(style, 1, 0)  # an unknown style fails here, not in a handler
        with self._lock:
            self._limit = LimitWindow(style, float(seconds), int(from_request), advertise)

    def refused(self) -> list[dict]:
        """The requests answered with a limit."""
        return [e for e in self.log if e["event"] == "response_refused"]

    # request log -----------------------------------------------------------

    @property
    def log(self) -> list[dict]:
        with self._lock:
            return list(self._entries)

    def main_requests(self) -> list[dict]:
        return [e for e in self.log if e["event"] == "request" and e["kind"] == "main"]

    def side_requests(self) -> list[dict]:
        return [e for e in self.log if e["event"] == "request" and e["kind"] == "side"]

    def completed_counts(self) -> dict[int, int]:
        """reply_index -> completed main deliveries. `response_done` is logged just before the last
        bytes go out (so a client never sees the end first); a failed last write adds `response_aborted`,
        which cancels it."""
        entries = self.log
        index_of = {e["seq"]: e["reply_index"] for e in entries if e["event"] == "request" and e["kind"] == "main"}
        aborted = {e["seq"] for e in entries if e["event"] == "response_aborted"}
        counts: dict[int, int] = {}
        for e in entries:
            if e["event"] == "response_done" and e["seq"] in index_of and e["seq"] not in aborted:
                counts[index_of[e["seq"]]] = counts.get(index_of[e["seq"]], 0) + 1
        return counts

    def rebilled(self) -> int:
        """Deliveries beyond the first per reply index: a step completely delivered twice was paid twice."""
        return sum(max(0, c - 1) for c in self.completed_counts().values())

    def tool_results_in_last_request(self) -> list[tuple[str, str, bool]]:
        mains = self.main_requests()
        return tool_results(mains[-1]["api"], mains[-1]["body"]) if mains else []

    def wait_for(self, predicate: Callable[[list[dict]], Any], timeout: float = 5.0) -> Any:
        """Poll the log until predicate(log) is truthy; return that value or raise TimeoutError."""
        deadline = time.monotonic() + timeout
        while True:
            result = predicate(self.log)
            if result:
                return result
            if time.monotonic() >= deadline:
                raise TimeoutError(f"fake model server: condition not met within {timeout}s")
            time.sleep(0.01)

    # used by the handler -------------------------------------------------------

    def admit(self, method: str, path: str, api: str, body: Any, kind: str) -> Plan:
        """Log a request on arrival and decide its reply and stall."""
        results = tool_results(api, body)
        with self._lock:
            self._seq += 1
            plan = self._plan(kind, len(results))
            self._append({"seq": plan.seq, "event": "request", "t": time.time(), "method": method, "path": path,
                          "api": api, "kind": kind, "reply_index": plan.reply_index,
                          "refused": plan.refusal is not None,
                          "n_tool_results": len(results), "tool_result_ids": [r[0] for r in results],
                          "delay_s": plan.delay_s, "stall_at": plan.stall_at, "body": body})
        return plan

    def finish(self, plan: Plan, event: str) -> None:
        with self._lock:
            self._append({"seq": plan.seq, "event": event, "kind": plan.kind,
                          "reply_index": plan.reply_index})

    def stall(self, sock: socket.socket, seconds: float) -> str:
        """Wait `seconds`; return "elapsed", "gone" (client disconnected) or "stopped"."""
        deadline, releases = time.monotonic() + seconds, self._releases
        while not self._stopping.is_set():
            remaining = deadline - time.monotonic()
            if remaining <= 0 or self._releases != releases:
                return "elapsed"
            if client_gone(sock, min(remaining, POLL_S)):
                return "stopped" if self._stopping.is_set() else "gone"
        return "stopped"

    def track(self, sock: socket.socket, open_: bool) -> None:
        with self._lock:
            (self._conns.add if open_ else self._conns.discard)(sock)

    # internals -------------------------------------------------------------

    def _plan(self, kind: str, n_results: int) -> Plan:
        self._ids += kind != "other"
        self._mains += kind == "main"
        now = time.time()
        if kind != "other" and self._limit and self._limit.refuses(self._mains, now):
            return Plan(self._seq, kind, None, {}, self._ids,
                        refusal=limit_answer(self._limit.style, self._limit.left(now), now))
        if kind != "main":
            return Plan(self._seq, kind, None, {"text": self._side_text}, self._ids)
        index = min(n_results, len(self._replies) - 1)
        reply = self._replies[index]
        served = self._served.get(index, 0)
        self._served[index] = served + 1
        plan = Plan(self._seq, kind, index, reply, self._ids)
        times = reply.get("delay_times")
        if reply.get("delay_s") and (times is None or served < times):
            plan.delay_s, plan.stall_at = float(reply["delay_s"]), reply.get("stall_at", "stream")
        if self._armed:
            (plan.delay_s, plan.stall_at), self._armed = self._armed, None
        return plan

    def _append(self, entry: dict) -> None:
        self._entries.append(entry)
        if self._log_file:
            with open(self._log_file, "a", encoding="utf-8") as fh:
                fh.write(json.dumps(entry) + "\n")

    def _close_connections(self) -> None:
        with self._lock:
            conns = list(self._conns)
        for sock in conns:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "FakeModelServer/1.0"

    @property
    def fake(self) -> FakeModelServer:
        return self.server.fake

    def setup(self) -> None:
        super().setup()
        self.fake.track(self.connection, True)

    def finish(self) -> None:
        self.fake.track(self.connection, False)
        super().finish()

    def log_message(self, *args: Any) -> None:
        pass

    # verbs ---------------------------------------------------------------------

    def do_HEAD(self) -> None:
        plan = self.fake.admit("HEAD", self.path, OTHER, None, "other")
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.fake.finish(plan, "response_done")
        self.end_headers()

    def do_GET(self) -> None:
        route = self.path.split("?", 1)[0].rstrip("/")
        if route == "/_log":
            return self.send_json(200, self.fake.log)
        plan = self.fake.admit("GET", self.path, OTHER, None, "other")
        self.send_json(200, MODELS_LIST if route.endswith("/models") else {"ok": True}, plan)

    def do_POST(self) -> None:
        route = self.path.split("?", 1)[0].rstrip("/")
        body = parse_json(self.read_body())
        if route in ("/_arm", "/_script", "/_limit"):
            return self.control(route, body or {})
        api = detect_api(self.path)
        if is_count_tokens(self.path):
            return self.answer_count_tokens(body)
        if api == OTHER or not isinstance(body, dict):
            return self.answer_error(api)
        kind = "main" if body.get("tools") else "side"
        self.answer_model_call(api, body, self.fake.admit("POST", self.path, api, body, kind))

    # answers ---------------------------------------------------------------------

    def control(self, route: str, body: Any) -> None:
        if route == "/_arm":
            self.fake.arm_stall(body.get("seconds", 30), body.get("stall_at", "stream"))
        elif route == "/_limit":
            self.fake.limit_window(body.get("style", "anthropic"), body.get("seconds", 40),
                                   body.get("from_request", 1), body.get("advertise"))
        else:
            self.fake.set_script(body)
        self.send_json(200, {"ok": True})

    def answer_count_tokens(self, body: Any) -> None:
        plan = self.fake.admit("POST", self.path, ANTHROPIC, body, "other")
        self.send_json(200, {"input_tokens": max(1, len(json.dumps(body)) // 4)}, plan, ANTHROPIC)

    def answer_error(self, api: str) -> None:
        plan = self.fake.admit("POST", self.path, api, None, "other")
        status, kind = (404, "not_found_error") if api == OTHER else (400, "invalid_request_error")
        message = f"fake model server: cannot handle POST {self.path}"
        self.send_json(status, {"type": "error", "error": {"type": kind, "message": message}}, plan, api)

    def answer_model_call(self, api: str, body: dict, plan: Plan) -> None:
        if plan.refusal:
            return self.refuse(plan)
        turn = build_turn(api, plan.reply, body, plan.reply_index or 0, plan.n)
        render_stream, render_body = RENDERERS[api]
        try:
            if body.get("stream"):
                outcome = self.send_stream(render_stream(turn), plan, api)
            else:
                outcome = self.send_whole(render_body(turn), plan, api)
        except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError):
            outcome = "aborted"
        self.conclude(plan, outcome)

    def refuse(self, plan: Plan) -> None:
        status, headers, data = plan.refusal
        payload = json.dumps(data).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.fake.finish(plan, "response_refused")
        self.wfile.write(payload)

    def send_whole(self, data: dict, plan: Plan, api: str) -> str:
        if stop := self.pause(plan):
            return stop
        self.send_json(200, data, plan, api)
        return "done"

    def pause(self, plan: Plan) -> str | None:
        """Stall as planned; None to go on, else the outcome that ends the exchange."""
        if plan.delay_s <= 0:
            return None
        result = self.fake.stall(self.connection, plan.delay_s)
        return {"elapsed": None, "gone": "aborted", "stopped": "stopped"}[result]

    def send_stream(self, frames: list[bytes], plan: Plan, api: str) -> str:
        stall_first = plan.stall_at == "headers"
        if stall_first and (stop := self.pause(plan)):
            return stop
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.request_id_header(plan, api)
        self.end_headers()
        self.write_chunk(frames[0])
        if not stall_first and (stop := self.pause(plan)):
            return stop
        for frame in frames[1:-1]:
            self.write_chunk(frame)
        self.fake.finish(plan, "response_done")  # logged before the client can see the end
        self.wfile.write(b"%x\r\n%s\r\n0\r\n\r\n" % (len(frames[-1]), frames[-1]))
        return "done"

    def conclude(self, plan: Plan, outcome: str) -> None:
        """`response_done` is already logged (just before the last bytes); record the rest."""
        if outcome == "aborted":
            self.fake.finish(plan, "response_aborted")
        if outcome != "done":
            self.close_connection = True

    # plumbing ----------------------------------------------------------------------

    def read_body(self) -> bytes:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            raw = read_chunked(self.rfile)
        else:
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        return decompress(raw, self.headers.get("Content-Encoding", ""))

    def request_id_header(self, plan: Plan | None, api: str) -> None:
        if plan is not None and api == ANTHROPIC:
            self.send_header("request-id", f"req_{plan.seq}")

    def send_json(self, status: int, data: Any, plan: Plan | None = None, api: str = OTHER) -> None:
        payload = json.dumps(data).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.request_id_header(plan, api)
        self.end_headers()
        if plan is not None:
            self.fake.finish(plan, "response_done")  # logged before the client can see the end
        self.wfile.write(payload)

    def write_chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))


# ---------------------------------------------------------------- separate-process mode


def write_port_file(path: str, port: int) -> None:
    tmp = f"{path}.tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(f"{port}\n")
    os.replace(tmp, path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Scripted fake model server (runs until SIGTERM).")
    parser.add_argument("--script", required=True, help="JSON script file")
    parser.add_argument("--port-file", required=True, help="file that receives the port once listening")
    parser.add_argument("--log", help="append each request-log entry here as a JSON line")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args(argv)
    done = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: done.set())
    server = FakeModelServer(load_script(args.script), args.host, args.port, log_file=args.log).start()
    write_port_file(args.port_file, server.port)
    while not done.wait(0.2):
        pass
    server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
