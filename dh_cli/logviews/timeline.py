"""The timeline of a session: dh's events (attempts, crashes, stops, repairs, resumes) as
marks, the strip of attempts that the Markdown and the HTML exports and `dh log show` share,
and the policy every exported HTML page carries. Built from events alone (no view, no records),
so every view may use it without importing another."""

from __future__ import annotations

import html
import json

from ..events import (EXITED, LAUNCH, REBUILT, REPAIR, REPAIRED, RESUME, SOURCE_REWRITTEN, STATE,
                      TAKEOVER)


# marks -------------------------------------------------------------------------------
def timeline(events: list[dict]) -> list[dict]:
    """Marks for the timeline strip, in event order: attempt, crash, stop, exit, repair,
    resume, takeover, rebuild, rewrite, fatal. Intents that a later outcome describes better (a
    `repair` followed by its `repaired`) are folded into that outcome."""
    return [{"at": event["at"], "attempt": event["attempt"], "seq": event["seq"], "title": _details(event),
             **mark} for event, mark in _marked(events)]


def crash_times(events: list[dict]) -> list[str]:
    """When each crash mark of timeline() happened (without the marks' titles: writing each
    event's details out was 0.6 s of the cost page of 2,000 relaunched sessions)."""
    return [event["at"] for event, mark in _marked(events) if mark["kind"] == "crash"]


def _marked(events: list[dict]):
    """(event, its mark) of each event that makes one."""
    repaired = {e["details"].get("call_id") for e in events if e["type"] == REPAIRED}
    marks: list[dict] = []
    for event in events:
        mark = _mark(event, repaired, marks)
        if mark:
            marks.append(mark)
            yield event, mark


def _mark(event: dict, repaired: set, marks: list[dict]) -> dict | None:
    kind, d = event["type"], event["details"]
    if kind == LAUNCH:
        return {"kind": "attempt", "label": f"attempt {event['attempt'] or len(marks) + 1}"}
    if kind == EXITED:
        return exit_mark(d)
    if kind == STATE:
        return _state_mark(d, marks)
    if kind == REPAIRED or (kind == REPAIR and d.get("call_id") not in repaired):
        return {"kind": "repair", "label": f"repair {d.get('tool') or d.get('call_id') or ''}".strip()}
    if kind == RESUME:
        return {"kind": "resume", "label": "resume"}
    if kind == REBUILT:
        return {"kind": "rebuild", "label": "rebuilt native state"}
    if kind == TAKEOVER:
        return {"kind": "takeover", "label": f"taken over from {d.get('from_host') or '?'} by "
                                             f"{d.get('host') or '?'} (epoch {d.get('epoch')})"}
    if kind == SOURCE_REWRITTEN:
        return {"kind": "rewrite", "label": f"source rewritten ({d.get('reason', 'changed')})"}
    return None


def exit_mark(d: dict) -> dict:
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
    if d.get("dh_killed"):
        return {"kind": "crash", "label": "crash: dh was killed"}
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


# HTML (the trace view is in tracehtml.py) ------------------------------------------------
# Nothing may be loaded from anywhere: not even an image or a font.
CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"


def html_timeline(marks: list[dict]) -> str:
    if not marks:
        return '<p class="meta">No dh events: the session was imported, not run under dh.</p>\n'
    items = "".join(f'<li class="mark {m["kind"]}" data-kind="{m["kind"]}" '
                    f'title="{html.escape(m["at"] + " " + m["title"])}">{html.escape(m["label"])}</li>'
                    for m in marks)
    return f'<ol class="timeline" id="timeline">{items}</ol>\n'


