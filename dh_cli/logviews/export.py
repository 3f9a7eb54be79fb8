"""`dh log export`: a session as Markdown, as HTML (a trace view: see tracehtml.py), or as its
native records. The timeline of dh's events both share is in timeline.py.

Markdown is built from the same data as `dh log show` (the view, with whole texts) plus a
timeline of dh's events: each attempt, crash, repair and resume. The HTML pages carry their CSS
inline and no scripts; a Content-Security-Policy forbids every fetch, so opening a saved export
never touches the network. jsonl is the native records byte-exact, the same bytes as
`dh log show --raw`."""

from __future__ import annotations

import html
import re
from typing import Iterator

from .logview import SessionView, stream_items, view_header
from .render import cost_line, money
from .timeline import timeline
from ..models import Session
from ..redact import neutralise
from ..tokens import call_text, totals_text

FORMATS = ("md", "html", "jsonl", "otlp")


def export_session(world, session: Session, fmt: str) -> bytes:
    return b"".join(export_stream(world, session, fmt))


def export_stream(world, session: Session, fmt: str) -> Iterator[bytes]:
    """The export in pieces, so that writing it to stdout holds one piece at a time."""
    if fmt == "jsonl":
        return _raw_lines(world.records(session.id))
    if fmt == "html":  # the first page of the trace view
        from .trace import session_trace
        from .tracehtml import pages

        view, turns = session_trace(world, session)
        return iter([next(pages(view, turns, documents=documents_of(world, session)))])
    return markdown_stream(world, session)


def _raw_lines(records) -> Iterator[bytes]:
    for record in records:
        yield record.raw
        del record  # a record may be huge: let it go before the next one is read


def documents_of(world, session: Session) -> dict:
    """The session's documents, its wrapper chosen by its harness (for the exports)."""
    from ..documents.build import session_documents
    from ..wrappers import get as get_wrapper

    return session_documents(world, get_wrapper(session.harness), session.id)


def markdown_stream(world, session: Session) -> Iterator[bytes]:
    """Markdown is read as text, in a terminal too: a record's control characters are made
    visible (`\\x1b`); the jsonl export is the byte-exact form."""
    view = view_header(world, session)
    yield neutralise(markdown_head(view, timeline(view.events))).encode("utf-8")
    for item in stream_items(world, session, full=True, events=view.events):
        yield neutralise("\n".join(_md_item(item)) + "\n").encode("utf-8")


# Markdown -----------------------------------------------------------------------------------
def markdown_head(view: SessionView, marks: list[dict]) -> str:
    s = view.session
    lines = [f"# dh session {s['id']} ({s['harness']})", "",
             f"- native id: `{s['harness_session_id'] or '-'}`", f"- cwd: `{s['cwd'] or '-'}`",
             f"- state: {s['state']}, attempts: {s['attempts']}, created {s['created_at']}",
             f"- tokens: {totals_text(view.totals)} over {view.totals.get('model_calls', 0)} model call(s)",
             f"- {cost_line(view.totals.get('cost') or {})}",
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
        cost = f" ({money(item['cost_usd'])})" if item.get("cost_usd") is not None else ""
        return [f"_model call {item.get('model') or ''}: {call_text(item.get('tokens'))}{cost}_", ""]
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
