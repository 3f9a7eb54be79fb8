"""Tests for tests/fakes/model_server.py: real HTTP against a started fake model server."""

from __future__ import annotations

import gzip
import http.client
import json
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from tests.fakes.model_server import FakeModelServer

REPO = Path(__file__).resolve().parents[1]

SCRIPT = {"replies": [
    {"text": "I'll start by running a shell command.", "shell": "echo step0 >> steps.log"},
    {"write": {"path": "a.txt", "content": "alpha\n"}},
    {"read": {"path": "a.txt"}},
    {"text": "All done."},
]}


# ------------------------------------------------------------------ tool lists as harnesses send them


def schema(*props: str) -> dict:
    return {"type": "object", "properties": {p: {"type": "string"} for p in props}}


CLAUDE_TOOLS = [{"name": "Bash", "input_schema": schema("command", "description")},
                {"name": "Write", "input_schema": schema("file_path", "content")},
                {"name": "Read", "input_schema": schema("file_path")},
                {"name": "Agent", "input_schema": schema("prompt")}]
PI_TOOLS = [{"name": n, "input_schema": schema(*p)} for n, p in
            [("read", ["path"]), ("bash", ["command"]), ("edit", ["path"]), ("write", ["path", "content"])]]
CODEX_TOOLS = [{"type": "function", "name": n, "parameters": schema(*p)} for n, p in
               [("exec_command", ["cmd"]), ("write_stdin", ["chars"]), ("view_image", ["path"])]]
OPENCODE_TOOLS = [{"type": "function", "function": {"name": n, "parameters": schema(*p)}} for n, p in
                  [("bash", ["command", "description"]), ("read", ["filePath"]),
                   ("write", ["filePath", "content"]), ("todowrite", ["todos"])]]


# ------------------------------------------------------------------ request bodies with n tool results


def anthropic_body(n_results: int, tools=CLAUDE_TOOLS, stream=True) -> dict:
    messages = [{"role": "user", "content": "go"}, {"role": "system", "content": "agents: none"}]
    for i in range(n_results):
        messages.append({"role": "assistant", "content": [
            {"type": "tool_use", "id": f"toolu_{i:03d}", "name": "Bash", "input": {}}]})
        messages.append({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": f"toolu_{i:03d}", "content": f"out{i}", "is_error": False}]})
    return {"model": "claude-test", "max_tokens": 100, "stream": stream, "tools": tools, "messages": messages}


def responses_body(n_results: int, tools=CODEX_TOOLS, stream=True) -> dict:
    items = [{"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "sys"}]},
             {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "go"}]}]
    for i in range(n_results):
        items.append({"type": "function_call", "call_id": f"call_{i:03d}", "name": "exec_command", "arguments": "{}"})
        items.append({"type": "function_call_output", "call_id": f"call_{i:03d}", "output": f"out{i}"})
    return {"model": "mock-model", "stream": stream, "tools": tools, "input": items}


def chat_body(n_results: int, tools=OPENCODE_TOOLS, stream=True) -> dict:
    messages = [{"role": "system", "content": "sys"}, {"role": "user", "content": "go"}]
    for i in range(n_results):
        call = {"id": f"call_{i:03d}", "type": "function", "function": {"name": "bash", "arguments": "{}"}}
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        messages.append({"role": "tool", "tool_call_id": f"call_{i:03d}", "content": f"out{i}"})
    return {"model": "mock-model", "stream": stream, "stream_options": {"include_usage": True},
            "tools": tools, "messages": messages}


# ------------------------------------------------------------------ HTTP + SSE client helpers


def post(srv: FakeModelServer, path: str, body: dict, headers: dict | None = None):
    """POST JSON; return (response, raw body bytes)."""
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=5)
    conn.request("POST", path, json.dumps(body).encode(), {"Content-Type": "application/json", **(headers or {})})
    resp = conn.getresponse()
    data = resp.read()
    conn.close()
    return resp, data


def parse_sse(data: bytes) -> list[tuple[str | None, object]]:
    events = []
    for frame in data.decode().split("\n\n"):
        if not frame.strip():
            continue
        fields = dict(line.split(": ", 1) for line in frame.splitlines())
        payload = fields["data"]
        events.append((fields.get("event"), payload if payload == "[DONE]" else json.loads(payload)))
    return events


def assemble_anthropic(events) -> dict:
    out = {"text": "", "tool": None, "json": "", "stop": None, "usage_in": None, "usage_out": None}
    for name, data in events:
        assert data["type"] == name
        if name == "message_start":
            out["usage_in"] = data["message"]["usage"]["input_tokens"]
            out["id"] = data["message"]["id"]
        elif name == "content_block_start" and data["content_block"]["type"] == "tool_use":
            out["tool"] = data["content_block"]
        elif name == "content_block_delta":
            delta = data["delta"]
            out["text"] += delta.get("text", "")
            out["json"] += delta.get("partial_json", "")
        elif name == "message_delta":
            out["stop"], out["usage_out"] = data["delta"]["stop_reason"], data["usage"]["output_tokens"]
    assert events[-1][0] == "message_stop"
    if out["tool"]:
        out["tool"] = (out["tool"]["name"], json.loads(out["json"]), out["tool"]["id"])
    return out


def assemble_responses(events) -> dict:
    out = {"text": "", "tool": None, "args": "", "completed": None}
    assert [d["sequence_number"] for _, d in events] == list(range(len(events)))
    for name, data in events:
        assert data["type"] == name
        if name == "response.output_text.delta":
            out["text"] += data["delta"]
        elif name == "response.output_item.added" and data["item"]["type"] == "function_call":
            out["tool"] = data["item"]
        elif name == "response.function_call_arguments.delta":
            out["args"] += data["delta"]
        elif name == "response.completed":
            out["completed"] = data["response"]
    if out["tool"]:
        out["tool"] = (out["tool"]["name"], json.loads(out["args"]), out["tool"]["call_id"])
    return out


def assemble_chat(events) -> dict:
    out = {"text": "", "tool": None, "args": "", "finish": None, "usage": None}
    assert events[-1][1] == "[DONE]"
    for _, chunk in events[:-1]:
        if chunk.get("usage"):
            out["usage"] = chunk["usage"]
        for choice in chunk["choices"]:
            delta = choice["delta"]
            out["text"] += delta.get("content") or ""
            for call in delta.get("tool_calls") or []:
                if "id" in call:
                    out["tool"] = (call["function"]["name"], call["id"])
                out["args"] += call["function"].get("arguments", "")
            out["finish"] = choice["finish_reason"] or out["finish"]
    if out["tool"]:
        out["tool"] = (out["tool"][0], json.loads(out["args"]), out["tool"][1])
    return out


def stream_anthropic(srv, n, tools=CLAUDE_TOOLS):
    resp, data = post(srv, "/v1/messages?beta=true", anthropic_body(n, tools))
    assert resp.status == 200 and resp.getheader("Content-Type").startswith("text/event-stream")
    return resp, assemble_anthropic(parse_sse(data))


def stream_responses(srv, n, tools=CODEX_TOOLS):
    return assemble_responses(parse_sse(post(srv, "/v1/responses", responses_body(n, tools))[1]))


def stream_chat(srv, n, tools=OPENCODE_TOOLS):
    return assemble_chat(parse_sse(post(srv, "/v1/chat/completions", chat_body(n, tools))[1]))


def open_raw_request(srv, path: str, body: dict) -> socket.socket:
    """Send a request on a raw socket and return it unread (to disconnect mid-response)."""
    payload = json.dumps(body).encode()
    sock = socket.create_connection(("127.0.0.1", srv.port), timeout=5)
    head = f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {len(payload)}\r\n\r\n"
    sock.sendall(head.encode() + payload)
    return sock


def events_of(srv, event: str) -> list[dict]:
    return [e for e in srv.log if e["event"] == event]


@pytest.fixture
def srv():
    with FakeModelServer(SCRIPT) as server:
        yield server


# ------------------------------------------------------------------ wire shapes and tool mapping


def test_anthropic_stream_claude_tools(srv):
    resp, turn = stream_anthropic(srv, 0)
    assert turn["text"] == "I'll start by running a shell command."
    name, args, call_id = turn["tool"]
    assert (name, args["command"], call_id) == ("Bash", "echo step0 >> steps.log", "toolu_000")
    assert args["description"]
    assert turn["stop"] == "tool_use" and (turn["usage_in"], turn["usage_out"]) == (10, 5)
    assert resp.getheader("request-id").startswith("req_") and turn["id"].startswith("msg_")
    assert stream_anthropic(srv, 1)[1]["tool"][:2] == ("Write", {"file_path": "a.txt", "content": "alpha\n"})
    assert stream_anthropic(srv, 2)[1]["tool"][:2] == ("Read", {"file_path": "a.txt"})
    final = stream_anthropic(srv, 3)[1]
    assert (final["text"], final["tool"], final["stop"]) == ("All done.", None, "end_turn")


def test_anthropic_stream_pi_tools(srv):
    assert stream_anthropic(srv, 0, PI_TOOLS)[1]["tool"][:2] == ("bash", {"command": "echo step0 >> steps.log"})
    assert stream_anthropic(srv, 1, PI_TOOLS)[1]["tool"][:2] == ("write", {"path": "a.txt", "content": "alpha\n"})
    assert stream_anthropic(srv, 2, PI_TOOLS)[1]["tool"][:2] == ("read", {"path": "a.txt"})


def test_responses_stream_codex_tools(srv):
    first = stream_responses(srv, 0)
    assert first["text"] == "I'll start by running a shell command."
    assert first["tool"] == ("exec_command", {"cmd": "echo step0 >> steps.log"}, "call_000")
    assert first["completed"]["status"] == "completed" and first["completed"]["id"].startswith("resp_")
    assert first["completed"]["usage"]["input_tokens"] == 100
    assert [i["type"] for i in first["completed"]["output"]] == ["message", "function_call"]
    write = stream_responses(srv, 1)
    assert write["tool"][:2] == ("exec_command", {"cmd": "printf '%s' 'alpha\n' > a.txt"})
    assert stream_responses(srv, 2)["tool"][:2] == ("exec_command", {"cmd": "cat a.txt"})
    assert stream_responses(srv, 3)["text"] == "All done."


def test_chat_stream_opencode_tools(srv):
    first = stream_chat(srv, 0)
    name, args, call_id = first["tool"]
    assert (name, args["command"], call_id, first["finish"]) == ("bash", "echo step0 >> steps.log", "call_000", "tool_calls")
    assert args["description"]
    assert first["usage"] == {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110}
    assert stream_chat(srv, 1)["tool"][:2] == ("write", {"filePath": "a.txt", "content": "alpha\n"})
    assert stream_chat(srv, 2)["tool"][:2] == ("read", {"filePath": "a.txt"})
    final = stream_chat(srv, 3)
    assert (final["text"], final["tool"], final["finish"]) == ("All done.", None, "stop")


def test_chat_stream_pi_tools_without_usage(srv):
    body = chat_body(1, [{"type": "function", "function": t | {"parameters": t["input_schema"]}} for t in PI_TOOLS])
    del body["stream_options"]
    turn = assemble_chat(parse_sse(post(srv, "/v1/chat/completions", body)[1]))
    assert turn["tool"][:2] == ("write", {"path": "a.txt", "content": "alpha\n"}) and turn["usage"] is None


def test_concrete_calls_and_custom_usage():
    script = [{"tool_use": {"name": "Agent", "input": {"prompt": "p"}}, "usage": {"input": 7, "output": 3}},
              {"tool_call": {"name": "update_plan", "arguments": {"plan": []}}}]
    with FakeModelServer(script) as srv:
        turn = stream_anthropic(srv, 0)[1]
        assert turn["tool"][:2] == ("Agent", {"prompt": "p"}) and (turn["usage_in"], turn["usage_out"]) == (7, 3)
        assert stream_responses(srv, 1)["tool"][:2] == ("update_plan", {"plan": []})


def test_non_streaming_forms(srv):
    _, data = post(srv, "/v1/messages", anthropic_body(0, stream=False))
    msg = json.loads(data)
    assert msg["type"] == "message" and msg["stop_reason"] == "tool_use"
    assert [b["type"] for b in msg["content"]] == ["text", "tool_use"] and msg["content"][1]["id"] == "toolu_000"
    _, data = post(srv, "/v1/responses", responses_body(2, stream=False))
    assert json.loads(data)["output"][-1]["arguments"] == json.dumps({"cmd": "cat a.txt"})
    _, data = post(srv, "/v1/chat/completions", chat_body(3, stream=False))
    choice = json.loads(data)["choices"][0]
    assert (choice["message"]["content"], choice["finish_reason"]) == ("All done.", "stop")


def test_side_endpoints_and_request_encodings(srv):
    with urllib.request.urlopen(urllib.request.Request(srv.url + "/", method="HEAD"), timeout=5) as r:
        assert r.status == 200
    with urllib.request.urlopen(srv.url + "/v1/models", timeout=5) as r:
        assert json.load(r)["data"][0]["id"]
    _, data = post(srv, "/v1/messages/count_tokens", {"messages": []})
    assert json.loads(data)["input_tokens"] >= 1
    resp, _ = post(srv, "/v1/embeddings", {"x": 1})
    assert resp.status == 404 and srv.log[-2]["kind"] == "other"
    gz = gzip.compress(json.dumps(chat_body(3)).encode())
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=5)
    conn.request("POST", "/v1/chat/completions", iter([gz[:10], gz[10:]]),  # iterable body => chunked
                 {"Content-Encoding": "gzip", "Content-Type": "application/json"}, encode_chunked=True)
    assert assemble_chat(parse_sse(conn.getresponse().read()))["text"] == "All done."
    conn.close()
    assert srv.main_requests()[-1]["reply_index"] == 3


# ------------------------------------------------------------------ reply choice and log


def test_step_index_from_tool_results_and_past_end(srv):
    stream_anthropic(srv, 2)
    stream_responses(srv, 1)
    stream_chat(srv, 9)
    mains = srv.main_requests()
    assert [(m["api"], m["reply_index"], m["n_tool_results"]) for m in mains] == [
        ("anthropic", 2, 2), ("responses", 1, 1), ("chat", 3, 9)]
    assert mains[0]["tool_result_ids"] == ["toolu_000", "toolu_001"]
    assert mains[0]["body"]["model"] == "claude-test"


def test_tool_results_in_last_request_each_shape(srv):
    body = anthropic_body(1)
    body["messages"].append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_001",
                             "content": [{"type": "text", "text": "interrupted"}], "is_error": True}]})
    assert post(srv, "/v1/messages", body)[0].status == 200
    assert srv.tool_results_in_last_request() == [("toolu_000", "out0", False), ("toolu_001", "interrupted", True)]
    body = responses_body(1)
    body["input"].append({"type": "custom_tool_call_output", "call_id": "call_001",
                          "output": [{"type": "input_text", "text": "aborted"}]})
    post(srv, "/v1/responses", body)
    assert srv.tool_results_in_last_request() == [("call_000", "out0", False), ("call_001", "aborted", False)]
    post(srv, "/v1/chat/completions", chat_body(2))
    assert srv.tool_results_in_last_request() == [("call_000", "out0", False), ("call_001", "out1", False)]


@pytest.mark.timing  # the fake's delays, measured
def test_side_call_does_not_advance(srv):
    srv.arm_stall(1.5)  # far apart from the unstalled call's time, on a loaded CI machine too
    body = anthropic_body(2)
    del body["tools"]
    started = time.monotonic()
    turn = assemble_anthropic(parse_sse(post(srv, "/v1/messages", body)[1]))
    assert (turn["text"], turn["tool"], turn["stop"]) == ("ok", None, "end_turn")
    assert time.monotonic() - started < 1.0
    assert len(srv.side_requests()) == 1 and srv.main_requests() == [] and srv.completed_counts() == {}
    assert srv.side_requests()[0]["reply_index"] is None
    started = time.monotonic()  # the armed stall is still pending for the next main request
    assert stream_chat(srv, 0)["tool"][0] == "bash"
    assert time.monotonic() - started >= 1.5


def test_rebilled_counts_repeated_completed_steps(srv):
    for n in range(4):
        stream_anthropic(srv, n)
    assert srv.completed_counts() == {0: 1, 1: 1, 2: 1, 3: 1} and srv.rebilled() == 0
    stream_anthropic(srv, 1)
    assert srv.completed_counts()[1] == 2 and srv.rebilled() == 1


# ------------------------------------------------------------------ stalls and disconnects


@pytest.mark.timing  # the fake's delays, measured
def test_delay_times_stalls_once_and_disconnect_is_aborted():
    script = [SCRIPT["replies"][0], {**SCRIPT["replies"][1], "delay_s": 30, "delay_times": 1}, {"text": "end"}]
    with FakeModelServer(script) as srv:
        sock = open_raw_request(srv, "/v1/responses", responses_body(1))
        sock.settimeout(2)
        assert b"200 OK" in sock.recv(4096)  # stall_at "stream": headers + response.created arrive
        srv.wait_for(lambda log: [e for e in log if e["event"] == "request" and e["kind"] == "main"])
        closed = time.monotonic()
        sock.close()
        srv.wait_for(lambda log: any(e["event"] == "response_aborted" for e in log), timeout=1)
        assert time.monotonic() - closed < 1
        started = time.monotonic()
        assert stream_responses(srv, 1)["tool"][0] == "exec_command"
        assert time.monotonic() - started < 1
        assert srv.completed_counts() == {1: 1} and srv.main_requests()[0]["delay_s"] == 30


def test_stall_before_headers_then_disconnect():
    with FakeModelServer([{"text": "hi", "delay_s": 30, "stall_at": "headers"}]) as srv:
        sock = open_raw_request(srv, "/v1/chat/completions", chat_body(0))
        sock.settimeout(0.3)
        with pytest.raises(socket.timeout):
            sock.recv(1)
        sock.close()
        entry = srv.wait_for(lambda log: [e for e in log if e["event"] == "response_aborted"], timeout=1)
        assert entry[0]["reply_index"] == 0


@pytest.mark.timing  # the fake's delays, measured
def test_arm_stalls_exactly_next_main_request(srv):
    req = urllib.request.Request(srv.url + "/_arm", json.dumps({"seconds": 1.2}).encode(), method="POST")
    with urllib.request.urlopen(req, timeout=5) as r:
        assert r.status == 200
    durations = []
    for n in (0, 1):
        started = time.monotonic()
        stream_chat(srv, n)
        durations.append(time.monotonic() - started)
    assert durations[0] >= 1.2 and durations[1] < 0.8
    assert [m["delay_s"] for m in srv.main_requests()] == [1.2, 0.0]


def test_release_stalls_ends_the_stalls_in_progress_not_later_ones():
    with FakeModelServer([{"text": "held", "delay_s": 3600}]) as srv:
        for n in (1, 2):
            held = threading.Thread(target=stream_chat, args=(srv, 0))
            held.start()
            srv.wait_for(lambda log: len([e for e in log if e["event"] == "request"]) == n)
            time.sleep(0.3)  # an earlier release, had it leaked into this stall, would end it here
            assert srv.completed_counts().get(0, 0) == n - 1
            srv.release_stalls()
            held.join(timeout=60)
            assert not held.is_alive() and srv.completed_counts() == {0: n}


@pytest.mark.timing  # the fake's delays, measured
def test_stop_interrupts_a_stall():
    srv = FakeModelServer([{"text": "slow", "delay_s": 30}]).start()
    sock = open_raw_request(srv, "/v1/messages", anthropic_body(0))
    srv.wait_for(lambda log: log)
    started = time.monotonic()
    srv.stop()
    assert time.monotonic() - started < 1
    sock.close()


def test_log_endpoint(srv):
    stream_chat(srv, 0)
    with urllib.request.urlopen(srv.url + "/_log", timeout=5) as r:
        log = json.load(r)
    assert [e["event"] for e in log] == ["request", "response_done"]


# ------------------------------------------------------------------ separate process


def test_separate_process_mode(tmp_path):
    script, port_file, log_file = tmp_path / "s.json", tmp_path / "port", tmp_path / "log.jsonl"
    script.write_text(json.dumps(SCRIPT))
    proc = subprocess.Popen([sys.executable, "-m", "tests.fakes.model_server", "--script", str(script),
                             "--port-file", str(port_file), "--log", str(log_file)], cwd=REPO)
    try:
        deadline = time.monotonic() + 5
        while not port_file.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        port = int(port_file.read_text())
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        conn.request("POST", "/v1/messages", json.dumps(anthropic_body(1, PI_TOOLS)))
        turn = assemble_anthropic(parse_sse(conn.getresponse().read()))
        conn.close()
        assert turn["tool"][0] == "write"
        entries = [json.loads(line) for line in log_file.read_text().splitlines()]
        assert [(e["event"], e.get("reply_index")) for e in entries] == [("request", 1), ("response_done", 1)]
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=5) == 0


# ------------------------------------------------------------------ limit windows


@pytest.mark.parametrize("style", ["anthropic", "openai", "usage"])
def test_a_limit_window_refuses_from_the_nth_main_request_then_answers(style):
    with FakeModelServer(SCRIPT) as server:
        server.limit_window(style, 1.5, from_request=2)
        first, _ = post(server, "/v1/messages", anthropic_body(0))
        refused, data = post(server, "/v1/messages", anthropic_body(1))
        side, _ = post(server, "/v1/messages", {**anthropic_body(0), "tools": []})
        assert (first.status, refused.status, side.status) == (200, 429, 429)
        body = json.loads(data)
        if style == "anthropic":
            assert refused.getheader("anthropic-ratelimit-unified-status") == "rejected"
            reset = int(refused.getheader("anthropic-ratelimit-unified-reset"))
            assert 0 < reset - time.time() <= 3 and int(refused.getheader("retry-after")) <= 2
            assert body["error"]["type"] == "rate_limit_error"
        elif style == "openai":
            assert body["error"]["code"] == "rate_limit_exceeded" and refused.getheader("retry-after")
        else:
            assert body["error"]["type"] == "usage_limit_reached"
            assert 0 < body["error"]["resets_at"] - time.time() <= 3 and body["error"]["resets_in_seconds"] <= 2
        server.wait_for(lambda log: not server._limit.refuses(99, time.time()), timeout=5)
        again, _ = post(server, "/v1/messages", anthropic_body(1))
        assert again.status == 200
        assert len(server.refused()) == 2
        assert server.completed_counts() == {0: 1, 1: 1}  # a refusal is never a delivery
