"""`dh log export`: a session as Markdown, as one self-contained HTML page, or as its native
records.

Markdown and HTML are built from the same data as `dh log show` (the view, with whole texts)
plus a timeline of dh's events: each attempt, crash, repair and resume. The HTML page carries
its CSS inline and no scripts; a Content-Security-Policy forbids every fetch, so opening a
saved export never touches the network. jsonl is the native records byte-exact, the same bytes
as `dh log show --raw`."""

from __future__ import annotations

import html
import json
import re
from typing import Iterator

from .logview import SessionView, build_view
from .models import Session

FORMATS = ("md", "html", "jsonl")


def export_session(world, session: Session, fmt: str) -> bytes:
    return b"".join(export_stream(world, session, fmt))


def export_stream(world, session: Session, fmt: str) -> Iterator[bytes]:
    """The export in pieces, so that writing it to stdout holds one piece at a time."""
    if fmt == "jsonl":
        return (record.raw for record in world.records(session.id))
    return iter([_rendered(world, session, fmt)])


def _rendered(world, session: Session, fmt: str) -> bytes:
    view = build_view(world, session, full=True)
    marks = timeline(view.events)
    text = to_html(view, marks) if fmt == "html" else to_markdown(view, marks)
    return text.encode("utf-8")


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
def to_markdown(view: SessionView, marks: list[dict]) -> str:
    s = view.session
    lines = [f"# dh session {s['id']} ({s['harness']})", "",
             f"- native id: `{s['harness_session_id'] or '-'}`", f"- cwd: `{s['cwd'] or '-'}`",
             f"- state: {s['state']}, attempts: {s['attempts']}, created {s['created_at']}",
             f"- tokens: {_tokens(view.totals)} over {view.totals.get('model_calls', 0)} model call(s)",
             "", "## Timeline", ""]
    lines += [f"{i}. **{m['kind']}** {m['label']} ({m['at']})" for i, m in enumerate(marks, 1)]
    lines += ["_(no dh events: the session was imported)_"] if not marks else []
    lines += ["", "## Conversation", ""]
    for item in view.items:
        lines += _md_item(item)
    return "\n".join(lines).rstrip() + "\n"


def _md_item(item: dict) -> list[str]:
    kind = item["type"]
    synthetic = " _(written by the harness on resume)_" if item.get("synthetic") else ""
    if kind == "prompt":
        return [f"### Turn {item['turn']}: user{synthetic}", "", _quote(item["text"]), ""]
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


# HTML ---------------------------------------------------------------------------------------
CSS = """
body{font:15px/1.45 system-ui,sans-serif;margin:0 auto;max-width:60rem;padding:1rem 1.5rem;
color:#1d1f21;background:#fafafa}
h1{font-size:1.3rem;margin:.2rem 0}h2{font-size:1.05rem;margin:1.5rem 0 .5rem}
.meta{color:#555;font-size:.9rem}.meta code{background:#eee;padding:0 .25rem;border-radius:3px}
ol.timeline{display:flex;flex-wrap:wrap;gap:.35rem;list-style:none;padding:.5rem;margin:0;
background:#fff;border:1px solid #ddd;border-radius:6px}
.mark{padding:.15rem .5rem;border-radius:1rem;font-size:.8rem;border:1px solid transparent;
white-space:nowrap}
.mark.attempt{background:#e3ecff;border-color:#8fb0f5}.mark.crash{background:#ffd9d6;
border-color:#e0564b;color:#8a1c13;font-weight:600}.mark.fatal{background:#8a1c13;color:#fff}
.mark.repair{background:#fff1c7;border-color:#e2b53b}.mark.resume{background:#dcf5e3;
border-color:#4fb06b}.mark.rebuild,.mark.rewrite{background:#efe3ff;border-color:#a57ee0}
.mark.exit,.mark.stop{background:#eee;border-color:#bbb}
.turn{margin:1rem 0 .3rem;font-weight:600}.msg{padding:.5rem .75rem;border-radius:6px;
margin:.35rem 0;white-space:pre-wrap;overflow-wrap:anywhere}
.user{background:#e8f0fe}.assistant{background:#fff;border:1px solid #e2e2e2}
.usage{color:#666;font-size:.8rem;margin:.1rem 0 .4rem}
details.tool{margin:.35rem 0;border:1px solid #ddd;border-radius:6px;background:#fff}
details.tool summary{cursor:pointer;padding:.3rem .6rem;font-family:ui-monospace,monospace;
font-size:.85rem}details.tool pre{margin:0;padding:.5rem .75rem;border-top:1px solid #eee;
white-space:pre-wrap;overflow-wrap:anywhere;font-size:.8rem}
.status-ok{color:#207a3c}.status-error,.status-dangling{color:#b3261e}
.flag{color:#b3261e;font-size:.85rem}table{border-collapse:collapse;font-size:.85rem}
td,th{border:1px solid #ddd;padding:.2rem .5rem;text-align:left}
"""
# Nothing may be loaded from anywhere: not even an image or a font.
CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"


def to_html(view: SessionView, marks: list[dict]) -> str:
    s = view.session
    e = html.escape
    head = (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">\n'
            f'<meta http-equiv="Content-Security-Policy" content="{CSP}">\n'
            f'<meta name="viewport" content="width=device-width,initial-scale=1">\n'
            f"<title>dh session {e(s['id'])}</title>\n<style>{CSS}</style></head>\n<body>\n")
    parts = [head, _html_header(view), '<h2>Timeline</h2>\n', _html_timeline(marks),
             '<h2>Conversation</h2>\n<main id="conversation">\n']
    parts += [_html_item(item) for item in view.items]
    parts += ["</main>\n", _html_events(view.events), "</body></html>\n"]
    return "".join(parts)


def _html_header(view: SessionView) -> str:
    s, e = view.session, html.escape
    return (f"<h1>dh session {e(s['id'])} <small>{e(s['harness'])}</small></h1>\n"
            f'<p class="meta">native id <code>{e(s["harness_session_id"] or "-")}</code> · '
            f'cwd <code>{e(s["cwd"] or "-")}</code> · state {e(s["state"])} · '
            f'attempts {s["attempts"]} · created {e(s["created_at"])}</p>\n'
            f'<p class="meta" id="tokens">tokens: {e(_tokens(view.totals))} over '
            f'{view.totals.get("model_calls", 0)} model call(s)</p>\n')


def _html_timeline(marks: list[dict]) -> str:
    if not marks:
        return '<p class="meta">No dh events: the session was imported, not run under dh.</p>\n'
    items = "".join(f'<li class="mark {m["kind"]}" data-kind="{m["kind"]}" '
                    f'title="{html.escape(m["at"] + " " + m["title"])}">{html.escape(m["label"])}</li>'
                    for m in marks)
    return f'<ol class="timeline" id="timeline">{items}</ol>\n'


def _html_item(item: dict) -> str:
    e, kind = html.escape, item["type"]
    synthetic = " (written by the harness on resume)" if item.get("synthetic") else ""
    if kind == "prompt":
        return (f'<div class="turn">Turn {item["turn"]}{e(synthetic)}</div>\n'
                f'<div class="msg user">{e(item["text"])}</div>\n')
    if kind == "assistant":
        return f'<div class="msg assistant">{e(item["text"])}{e(synthetic)}</div>\n'
    if kind == "model_call":
        return (f'<div class="usage">model call {e(item.get("model") or "")}: '
                f'{e(_tokens(item.get("tokens")))}</div>\n')
    if kind == "tool_call":
        return _html_tool(item)
    if kind == "flagged":
        return f'<div class="flag">flagged record in {e(item["source"])}: {e(", ".join(item["flags"]))}</div>\n'
    return f'<div class="msg">{e(kind)}: {e(item.get("text", ""))}</div>\n'


def _html_tool(item: dict) -> str:
    e = html.escape
    result = f'<pre class="result">{e(item["result"])}</pre>' if "result" in item else ""
    return (f'<details class="tool"><summary>{e(item["tool"] or "?")} '
            f'<span class="status-{e(item["status"])}">[{e(item["status"])}]</span></summary>'
            f'<pre class="input">{e(item["input"])}</pre>{result}</details>\n')


def _html_events(events: list[dict]) -> str:
    if not events:
        return ""
    rows = "".join(f"<tr><td>{ev['seq']}</td><td>{html.escape(ev['at'])}</td><td>{ev['attempt'] or ''}</td>"
                   f"<td>{html.escape(ev['type'])}</td><td>{html.escape(_details(ev))}</td></tr>"
                   for ev in events)
    return (f"<h2>Events</h2>\n<details><summary>{len(events)} dh event(s)</summary><table>"
            f"<tr><th>#</th><th>at</th><th>attempt</th><th>type</th><th>details</th></tr>"
            f"{rows}</table></details>\n")
