"""`dh log export`: a session as Markdown, as HTML (a trace view: see tracehtml.py), or as its
native records.

Markdown is built from the same data as `dh log show` (the view, with whole texts) plus a
timeline of dh's events: each attempt, crash, repair and resume. The HTML pages carry their CSS
inline and no scripts; a Content-Security-Policy forbids every fetch, so opening a saved export
never touches the network. jsonl is the native records byte-exact, the same bytes as
`dh log show --raw`."""

from __future__ import annotations

import html
import json
import re
from typing import Iterator

from .logview import SessionView, stream_items, view_header
from .models import Session

FORMATS = ("md", "html", "jsonl", "otlp")


def export_session(world, session: Session, fmt: str) -> bytes:
    return b"".join(export_stream(world, session, fmt))


def export_stream(world, session: Session, fmt: str) -> Iterator[bytes]:
    """The export in pieces, so that writing it to stdout holds one piece at a time."""
    if fmt == "jsonl":
        return (record.raw for record in world.records(session.id))
    if fmt == "html":  # the first page of the trace view
        from .trace import session_trace
        from .tracehtml import pages

        from .documents.build import documents_of

        view, turns = session_trace(world, session)
        return iter([next(pages(view, turns, documents=documents_of(world, session)))])
    return markdown_stream(world, session)


def markdown_stream(world, session: Session) -> Iterator[bytes]:
    view = view_header(world, session)
    yield markdown_head(view, timeline(view.events)).encode("utf-8")
    for item in stream_items(world, session, full=True, events=view.events):
        yield ("\n".join(_md_item(item)) + "\n").encode("utf-8")


# the timeline -------------------------------------------------------------------------------
def timeline(events: list[dict]) -> list[dict]:
    """Marks for the timeline strip, in event order: attempt, crash, stop, exit, repair,
    resume, rebuild, rewrite, fatal. Intents that a later outcome describes better (a
    `repair` followed by its `repaired`) are folded into that outcome."""
    repaired = {e["details"].get("call_id") for e in events if e["type"] == "repaired"}
    marks = []
    for event in events:
        mark = _mark(event, repaired, marks)
        if mark:
            marks.append({"at": event["at"], "attempt": event["attempt"], "seq": event["seq"],
                          "title": _details(event), **mark})
    return marks


def _mark(event: dict, repaired: set, marks: list[dict]) -> dict | None:
    kind, d = event["type"], event["details"]
    if kind == "launch":
        return {"kind": "attempt", "label": f"attempt {event['attempt'] or len(marks) + 1}"}
    if kind == "exited":
        return _exit_mark(d)
    if kind == "state":
        return _state_mark(d, marks)
    if kind == "repaired" or (kind == "repair" and d.get("call_id") not in repaired):
        return {"kind": "repair", "label": f"repair {d.get('tool') or d.get('call_id') or ''}".strip()}
    if kind == "resume":
        return {"kind": "resume", "label": "resume"}
    if kind == "rebuilt":
        return {"kind": "rebuild", "label": "rebuilt native state"}
    if kind == "source_rewritten":
        return {"kind": "rewrite", "label": f"source rewritten ({d.get('reason', 'changed')})"}
    return None


def _exit_mark(d: dict) -> dict:
    if d.get("user_signal"):
        return {"kind": "stop", "label": f"stopped by the user (signal {d['user_signal']})"}
    if d.get("signal"):
        return {"kind": "crash", "label": f"crash: {_signal_name(d['signal'])}"}
    if d.get("stalled"):
        return {"kind": "crash", "label": "crash: hung (stall timeout)"}
    return {"kind": "exit", "label": f"exit {d.get('code')}"}


def _state_mark(d: dict, marks: list[dict]) -> dict | None:
    if d.get("to") == "FATAL":
        return {"kind": "fatal", "label": f"gave up: {d.get('reason', '')}"}
    last = marks[-1]["kind"] if marks else None
    if d.get("outcome") in ("crashed", "hung") and last != "crash":
        return {"kind": "crash", "label": f"crash: {d['outcome']}"}
    return None


def _signal_name(number: int) -> str:
    import signal

    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _details(event: dict) -> str:
    return f"{event['type']} {json.dumps(event['details'], ensure_ascii=False, sort_keys=True)}"


def _tokens(t: dict | None) -> str:
    if not t:
        return ""
    return (f"{t.get('input', 0):,} in / {t.get('output', 0):,} out"
            f" / {t.get('cache_read', 0):,} cache read / {t.get('cache_write', 0):,} cache write")


# Markdown -----------------------------------------------------------------------------------
def markdown_head(view: SessionView, marks: list[dict]) -> str:
    s = view.session
    lines = [f"# dh session {s['id']} ({s['harness']})", "",
             f"- native id: `{s['harness_session_id'] or '-'}`", f"- cwd: `{s['cwd'] or '-'}`",
             f"- state: {s['state']}, attempts: {s['attempts']}, created {s['created_at']}",
             f"- tokens: {_tokens(view.totals)} over {view.totals.get('model_calls', 0)} model call(s)",
             "", "## Timeline", ""]
    lines += [f"{i}. **{m['kind']}** {m['label']} ({m['at']})" for i, m in enumerate(marks, 1)]
    lines += ["_(no dh events: the session was imported)_"] if not marks else []
    lines += ["", "## Conversation", ""]
    return "\n".join(lines) + "\n"


def _md_item(item: dict) -> list[str]:
    kind = item["type"]
    synthetic = " _(written by the harness on resume)_" if item.get("synthetic") else ""
    if kind == "prompt" and (item.get("resumed") or item.get("synthetic")):
        who = "the harness, on resume" if item.get("synthetic") else f"user (resuming turn {item['turn']})"
        return [f"**{who}**", "", _quote(item["text"]), ""]
    if kind == "prompt":
        return [f"### Turn {item['turn']}: user{synthetic}", "", _quote(item["text"]), ""]
    if kind in ("crash", "resume"):
        mark = "✗" if kind == "crash" else "↻"
        return [f"**{mark} {item['text']}**" + (f" (attempt {item['attempt']})" if item.get("attempt") else ""), ""]
    if kind == "assistant":
        return [f"**assistant**{synthetic}", "", item["text"], ""]
    if kind == "model_call":
        return [f"_model call {item.get('model') or ''}: {_tokens(item.get('tokens'))}_", ""]
    if kind == "tool_call":
        return _md_tool(item)
    if kind == "flagged":
        return [f"> flagged record in {item['source']}: {', '.join(item['flags'])}", ""]
    return [f"_{kind}_: {item.get('text', '')}", ""]


def _md_tool(item: dict) -> list[str]:
    out = ["<details>", f"<summary>tool {html.escape(item['tool'] or '?')} "
                        f"[{item['status']}]</summary>", "", _fence(item["input"])]
    if "result" in item:
        out += ["", "result:", "", _fence(item["result"])]
    return out + ["", "</details>", ""]


def _quote(text: str) -> str:
    return "\n".join("> " + line for line in (text or "").splitlines() or [""])


def _fence(text: str) -> str:
    """A code block whose fence is longer than any run of backticks inside it."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}\n{text}\n{fence}"


# HTML: the trace view is in tracehtml.py; the strip of attempts and the policy are shared --
# Nothing may be loaded from anywhere: not even an image or a font.
CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"


def _html_timeline(marks: list[dict]) -> str:
    if not marks:
        return '<p class="meta">No dh events: the session was imported, not run under dh.</p>\n'
    items = "".join(f'<li class="mark {m["kind"]}" data-kind="{m["kind"]}" '
                    f'title="{html.escape(m["at"] + " " + m["title"])}">{html.escape(m["label"])}</li>'
                    for m in marks)
    return f'<ol class="timeline" id="timeline">{items}</ol>\n'


