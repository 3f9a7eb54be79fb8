"""Human renderings of library results (tables and timelines). JSON output bypasses this."""

from __future__ import annotations

import json
import sys

from . import output
from .events_text import summary
from .logview import SessionView


def _tokens(t: dict | None) -> str:
    if not t:
        return ""
    return f"{t.get('input', 0)} in / {t.get('output', 0)} out"


def session_table(sessions: list[dict]) -> None:
    rows = [[s["id"], s["harness"], s["harness_session_id"], s["cwd"], s["records"],
             _tokens(s["tokens"]), s["last_record_at"] or s["updated_at"], s["state"]]
            for s in sessions]
    output.table(None, ["id", "harness", "native id", "cwd", "records", "tokens", "last activity",
                        "state"], rows)
    for s in sessions:
        if s.get("hint"):
            output.out.print(f"{s['id']} was interrupted ({s.get('why')}): {s['hint']}", markup=False)


def write_raw(records) -> None:
    for record in records:
        sys.stdout.buffer.write(record.raw)
    sys.stdout.buffer.flush()


def _item_line(item: dict) -> str:
    kind = item["type"]
    mark = " (synthetic)" if item.get("synthetic") else ""
    if kind == "prompt":
        return f"[turn {item['turn']}] user{mark}: {item['text']}"
    if kind == "assistant":
        return f"  assistant{mark}: {item['text']}"
    if kind == "model_call":
        return f"  model call {item['msg_id']} ({item.get('model')}, {item.get('stop_reason')}): {_tokens(item.get('tokens'))}"
    if kind == "tool_call":
        return f"  tool {item['tool']} [{item['status']}] {item['input']}"
    if kind == "flagged":
        return f"  ! flagged record ({', '.join(item['flags'])}) in {item['source']}"
    return f"  {kind}: {item.get('text', '')}"


def event_line(event: dict) -> str:
    attempt = f" [attempt {event['attempt']}]" if event.get("attempt") else ""
    return f"dh {event['at'][11:23]}{attempt} {summary(event['type'], event.get('details') or {})}"


def session_view(view: SessionView) -> None:
    s = view.session
    out = output.out
    out.print(f"session {s['id']}  {s['harness']} {s['harness_session_id'] or ''}", markup=False)
    out.print(f"cwd {s['cwd']}  state {s['state']}  attempts {s['attempts']}", markup=False)
    if s.get("hint"):
        out.print(f"{s.get('why')}; resume it with: {s['hint']}", markup=False)
    current = None
    for item in view.items:
        if item["source"] != current:
            current = item["source"]
            out.print(f"-- {current}", markup=False)
        out.print(_item_line(item), markup=False)
    for event in view.events:
        out.print(event_line(event), markup=False)
    for src in view.sources:
        extra = f", {src['pending_bytes']} byte(s) of a torn last line pending" if src["pending_bytes"] else ""
        gens = f", {src['generations']} generations (rewritten)" if src["generations"] > 1 else ""
        out.print(f"source {src['relpath']}: {src['records']} records, {src['status']}{gens}{extra}",
                  markup=False)
    t = view.totals
    out.print(f"tokens: {t['input']} in, {t['output']} out, {t['cache_read']} cache read, "
              f"{t['cache_write']} cache write over {t['model_calls']} model call(s)", markup=False)
    state = "complete" if view.turn_complete else "open"
    dangling = f"; dangling tool calls: {', '.join(view.dangling)}" if view.dangling else ""
    out.print(f"last turn: {state}{dangling}", markup=False)


def follow_update(update: dict, as_json: bool = False) -> None:
    """One line per update of `dh log show --follow`, flushed at once so a pipe sees it live
    (with --json: one JSON object a line)."""
    if as_json:
        sys.stdout.write(json.dumps(update, ensure_ascii=False, default=str) + "\n")
        sys.stdout.flush()
        return
    kind = update["kind"]
    if kind == "item":
        line = _item_line(update)
    elif kind == "result":
        line = f"  tool {update['tool']} [{update['status']}] {update.get('result', '')}"
    else:
        line = event_line(update)
    output.out.print(line, markup=False)
    output.out.file.flush()
