"""Generate large, realistic Claude Code transcripts (the real record shapes, uuid chains,
one row per content block, tool results) for benchmarks and kill tests."""

from __future__ import annotations

import json
import random
import uuid
from pathlib import Path

SESSION = "5f0c2a9e-1b7d-4c3e-9a61-2d8f0e4b7c15"
CWD = "/home/dev/project"


def _base(kind: str, parent: str | None, n: int) -> dict:
    return {"parentUuid": parent, "isSidechain": False, "type": kind, "uuid": str(uuid.UUID(int=n)),
            "timestamp": f"2026-11-29T08:{(n // 60) % 60:02d}:{n % 60:02d}.{n % 1000:03d}Z",
            "userType": "external", "entrypoint": "sdk-cli", "cwd": CWD, "sessionId": SESSION,
            "version": "2.1.197", "gitBranch": "main"}


def _words(rng: random.Random, count: int) -> str:
    vocab = ["the", "test", "fails", "because", "fixture", "parser", "returns", "none", "when",
             "line", "is", "torn", "we", "should", "check", "offset", "before", "commit", "file"]
    return " ".join(rng.choice(vocab) for _ in range(count))


def turn_rows(rng: random.Random, n: int, parent: str | None) -> list[dict]:
    """One user prompt, then an assistant text + tool_use message and its tool result."""
    rows = []
    user = _base("user", parent, n)
    user["message"] = {"role": "user", "content": _words(rng, 30)}
    rows.append(user)
    msg = {"id": f"msg_{n:08d}", "type": "message", "role": "assistant", "model": "claude-opus-4-8",
           "stop_reason": "tool_use", "stop_sequence": None,
           "usage": {"input_tokens": 1200 + n % 97, "cache_creation_input_tokens": 0,
                     "cache_read_input_tokens": 900, "output_tokens": 80 + n % 13}}
    text = _base("assistant", user["uuid"], n + 1)
    text["message"] = {**msg, "content": [{"type": "text", "text": _words(rng, 60)}]}
    call_id = f"toolu_{n:08d}"
    tool = _base("assistant", text["uuid"], n + 2)
    tool["message"] = {**msg, "content": [{"type": "tool_use", "id": call_id, "name": "Bash",
                                           "input": {"command": f"pytest -q tests/test_{n}.py"}}]}
    output = _words(rng, rng.randint(80, 400))
    result = _base("user", tool["uuid"], n + 3)
    result["message"] = {"role": "user", "content": [{"tool_use_id": call_id, "type": "tool_result",
                                                      "content": output, "is_error": False}]}
    result["toolUseResult"] = {"stdout": output, "stderr": "", "interrupted": False}
    result["sourceToolAssistantUUID"] = tool["uuid"]
    return rows + [text, tool, result]


# What Claude Code 2.1.332 adds to an assistant row (seen in its transcripts: a tool_use row is
# then 1,040-1,340 bytes, where 2.1.197's was under 1 KiB)
NEWEST_USAGE = {"output_tokens_details": {"thinking_tokens": 0},
                "server_tool_use": {"web_search_requests": 0, "web_fetch_requests": 0},
                "service_tier": "standard",
                "cache_creation": {"ephemeral_1h_input_tokens": 0, "ephemeral_5m_input_tokens": 0},
                "inference_geo": "", "iterations": [], "speed": "standard", "fallback_credit": None}
NEWEST_ROW = {"toolInputStreamMs": 13, "apiBlockIndex": 1, "requestId": "req_1",
              "requestRef": "b6ada111-8503-4428-841a-d2c4392eef1f", "requestedModel": "claude-opus-4-8",
              "promptCacheRequested": "5m", "effort": "medium", "perTurnEffort": "medium",
              "madeBy": "model", "version": "2.1.332"}


def _as_newest(row: dict) -> dict:
    if row["type"] == "assistant":
        message = row["message"]
        row = {**row, **NEWEST_ROW, "message": {**message, "usage": {**message["usage"], **NEWEST_USAGE},
                                                "stop_details": None}}
    return row


def write_claude_transcript(path: Path, size: int, seed: int = 7, newest: bool = False) -> int:
    """Write about `size` bytes of transcript (with `newest`, its assistant rows as Claude Code
    2.1.332 writes them); returns the number of lines."""
    rng, written, lines, n, parent = random.Random(seed), 0, 0, 0, None
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as handle:
        while written < size:
            rows = turn_rows(rng, n, parent)
            rows = [_as_newest(r) for r in rows] if newest else rows
            data = b"".join(json.dumps(r, separators=(",", ":")).encode() + b"\n" for r in rows)
            handle.write(data)
            written, lines, n, parent = written + len(data), lines + len(rows), n + 4, rows[-1]["uuid"]
    return lines


def write_streamed_turn(path: Path, day: str = "2026-12-01T23:50") -> None:
    """One prompt and one assistant message streamed as three rows (thinking, text, tool_use),
    as Claude Code writes it: the same message id and request id on each, output_tokens growing
    (10, 200, 502) and the final usage on the last; 1,000 tokens written to the cache for 5
    minutes and 2,000 for an hour."""
    hour_writes = 2000
    rows, parent = [], None
    user = _base("user", parent, 0)
    user.update(timestamp=f"{day}:00.000Z", message={"role": "user", "content": "hi"})
    rows.append(user)
    blocks = [{"type": "thinking", "thinking": "hm", "signature": "x"}, {"type": "text", "text": "Hello"},
              {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "ls"}}]
    for n, (out, block) in enumerate(zip((10, 200, 502), blocks), 1):
        usage = {"input_tokens": 12, "cache_creation_input_tokens": 1000 + hour_writes,
                 "cache_read_input_tokens": 20000, "output_tokens": out,
                 "cache_creation": {"ephemeral_5m_input_tokens": 1000, "ephemeral_1h_input_tokens": hour_writes}}
        row = _base("assistant", rows[-1]["uuid"], n)
        row.update(timestamp=f"{day}:0{n}.000Z", requestId="req_1", message={
            "id": "msg_A", "type": "message", "role": "assistant", "model": "claude-opus-4-8",
            "content": [block], "stop_reason": "tool_use" if n == 3 else None, "stop_sequence": None,
            "usage": usage})
        rows.append(row)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r, separators=(",", ":")) + "\n" for r in rows))


def codex_with_cache_and_reasoning(home: Path) -> None:
    """A real Codex rollout (in `home`) rewritten as a call to a priced model (gpt-5) with cached
    input and reasoning would read: per call 3,000 input tokens of which 2,000 cached, and 50
    output tokens of which 20 reasoning, in every usage record the rollout holds (the running
    totals grow by as much each call)."""
    def rewrite(node):
        if isinstance(node, dict):
            if "input_tokens" in node and "cached_input_tokens" in node:
                calls = node["input_tokens"] // 100  # the mock's 100 per call: how many so far
                node.update(input_tokens=3000 * calls, cached_input_tokens=2000 * calls,
                            output_tokens=50 * calls, reasoning_output_tokens=20 * calls,
                            total_tokens=3050 * calls)
            if node.get("model") == "mock-model":
                node["model"] = "gpt-5"
            for value in node.values():
                rewrite(value)
        elif isinstance(node, list):
            for value in node:
                rewrite(value)

    for rollout in home.glob("sessions/**/rollout-*.jsonl"):
        rows = [json.loads(line) for line in rollout.read_text().splitlines()]
        for row in rows:
            rewrite(row)
        rollout.write_text("".join(json.dumps(r, separators=(",", ":"), ensure_ascii=False) + "\n"
                                   for r in rows))


def opencode_with_cache_and_reasoning(db: Path) -> None:
    """A real OpenCode database whose assistant messages are rewritten as calls to priced models
    would read, in OpenCode's own kinds (its `input` leaves the cache out, its `output` leaves
    the reasoning out: 1.18's getUsage subtracts both): in turn, claude-opus-4-8 with 2,000
    tokens read from the cache and 300 written, and gpt-5 with 2,000 read and 20 reasoning."""
    import sqlite3

    conn = sqlite3.connect(db)
    assistants = [(mid, json.loads(data)) for mid, data in conn.execute(
        "SELECT id, data FROM message ORDER BY time_created, id")
        if json.loads(data).get("role") == "assistant"]
    for n, (mid, data) in enumerate(assistants):
        if n % 2:
            data.update(modelID="gpt-5", providerID="openai", tokens={
                "total": 3070, "input": 1000, "output": 50, "reasoning": 20, "cache": {"write": 0, "read": 2000}})
        else:
            data.update(modelID="claude-opus-4-8", providerID="anthropic", tokens={
                "total": 3350, "input": 1000, "output": 50, "reasoning": 0, "cache": {"write": 300, "read": 2000}})
        conn.execute("UPDATE message SET data = ? WHERE id = ?", [json.dumps(data), mid])
    conn.commit()
    conn.close()
