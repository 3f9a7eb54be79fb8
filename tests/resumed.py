"""What a log of one turn cut by a kill and resumed by dh must show (tests/e2e/
test_resumed_turns.py on the real programs, tests/test_resumed_turns.py on their captured
logs): one turn, the crash and the resume inside it, in `dh log show`, the HTML export, the
OTLP trace and the `turns` and `attempts` views, and the saved amount equal to the price of
the calls finished before the crash."""

from __future__ import annotations

import json
import sqlite3
from html.parser import HTMLParser
from pathlib import Path

import pytest

from dh_cli.logviews.render import money
from tests.rig import dh


def check_resumed_log(db: Path, env: dict | None = None) -> None:
    env = {**(env or {}), "DH_HOME": str(db.parent)}
    listed = json.loads(dh("log", "list", "--json", env=env).stdout)
    assert len(listed) == 1, listed
    shown = json.loads(dh("log", "show", listed[0]["id"], "--json", env=env).stdout)
    main = shown["sources"][0]["relpath"]
    items = [i for i in shown["items"] if i["source"] == main]
    kinds = [i["type"] for i in items]
    assert kinds.count("crash") == 1 and kinds.count("resume") == 1, kinds
    assert {i["turn"] for i in items} == {1}, [(i["type"], i["turn"]) for i in items]
    check_listed_turns(env, listed[0])
    assert [i for i in items if i["type"] == "prompt" and not i.get("resumed")
            and not i.get("synthetic")][:1], "the user's prompt opens the turn"
    crash_at = kinds.index("crash")
    assert kinds.index("resume") > crash_at
    assert "model_call" in kinds[:crash_at], "a model call finished before the kill"
    check_saved(db, env, listed[0]["id"], shown["totals"]["cost"], items[crash_at])
    check_exports(db, env, listed[0]["id"])
    with sqlite3.connect(db) as conn:
        # the price a plain query of the log reads, written by the mirror as the calls came
        priced = conn.execute("SELECT SUM(price_usd) FROM model_calls").fetchone()[0]
        turns = conn.execute("SELECT turn, crashes, resumes FROM turns WHERE source_id ="
                             " (SELECT MIN(id) FROM sources)").fetchall()
        attempts = conn.execute("SELECT attempt, outcome, calls_kept, turn FROM attempts"
                                " ORDER BY attempt").fetchall()
    total = shown["totals"]["cost"]["usd"]
    assert priced == (None if total is None else pytest.approx(total, abs=1e-6))
    assert turns == [(1, 1, 1)], turns
    assert [a[3] for a in attempts] == [1, 1], attempts
    assert attempts[0][1] in ("crashed", "hung") and attempts[1][2] is not None  # a resume plan


def check_listed_turns(env: dict, listed: dict) -> None:
    """`dh log list` counts the one turn too: --json and the text's TURNS column."""
    assert listed["turns"] == 1, listed
    text = dh("log", "list", env={**env, "COLUMNS": "100"}).stdout.splitlines()
    header, row = text[0].split(), text[1].split()
    assert row[header.index("TURNS")] == "1", text


def check_saved(db: Path, env: dict, session_id: str, cost: dict, crash: dict) -> None:
    """What resuming saved is the price of the calls kept, figured apart from the view; for a
    model the price table does not know, unknown ("-"), never $0.00."""
    kept = kept_calls_price(db, crash["at"])
    assert cost["crashes"] == 1
    expected = None if kept is None else pytest.approx(kept, abs=1e-9)
    assert cost["saved_usd"] == expected and crash["saved_usd"] == expected, (cost, crash, kept)
    text = dh("log", "show", session_id, "--no-pager", env=env).stdout
    said = "-" if kept is None else money(kept)
    assert f"re-billing after 1 crash(es): {said}\n" in text, text


def kept_calls_price(db: Path, crash_at: str) -> float | None:
    """The price of the main conversation's calls logged before the crash, from the tokens
    the log holds priced by genai-prices itself, and checked against the price the mirror
    wrote beside each call as it came; None when a call's model has no price."""
    with sqlite3.connect(db) as conn:
        calls = conn.execute(
            "SELECT model, tokens_prompt, tokens_cache_read, tokens_cache_write,"
            " tokens_cache_write_1h, tokens_out, tokens_reasoning, price_usd FROM model_calls"
            " WHERE source_id = (SELECT MIN(id) FROM sources) AND at < ?", [crash_at]).fetchall()
    assert calls, f"no call logged before the crash at {crash_at}"
    prices = [_genai_price(*call[:7]) for call in calls]
    assert [p is None for p in prices] == [call[7] is None for call in calls], (prices, calls)
    if None in prices:
        return None
    assert sum(call[7] for call in calls) == pytest.approx(sum(prices), abs=1e-9)
    return sum(prices)


def _genai_price(model, prompt, read, write_5m, write_1h, out, reasoning) -> float | None:
    from genai_prices import Usage, calc_price

    usage = Usage(input_tokens=prompt, cache_read_tokens=read, cache_write_tokens=write_5m + write_1h,
                  cache_write_1h_tokens=write_1h, output_tokens=out, output_reasoning_tokens=reasoning)
    try:
        return float(calc_price(usage, model_ref=model).total_price)
    except LookupError:
        return None


def check_exports(db: Path, env: dict, session_id: str) -> None:
    """The HTML export and the OTLP trace show the one turn, the crash inside it."""
    page = db.parent / "session.html"
    assert dh("log", "export", session_id, "--format", "html", "-o", str(page), env=env).returncode == 0
    check_html_turn(page.read_text())
    otlp = dh("log", "export", session_id, "--format", "otlp", env=env).stdout
    check_trace_turn([span for line in otlp.splitlines()
                      for rs in json.loads(line).get("resourceSpans", [])
                      for scope in rs["scopeSpans"] for span in scope["spans"]])


class _Trace(HTMLParser):
    """The trace's rows in page order, each as (its classes, the ids of the elements around
    it): what a reader sees inside which turn."""

    VOID = {"meta", "br", "img", "hr", "input", "link", "wbr"}

    def __init__(self):
        super().__init__()
        self.open: list[tuple[str, str]] = []
        self.rows: list[tuple[set, list[str]]] = []

    def handle_starttag(self, tag, attrs):
        if tag in self.VOID:
            return
        a = dict(attrs)
        self.rows.append((set((a.get("class") or "").split()), [i for _, i in self.open if i]))
        self.open.append((tag, a.get("id") or ""))

    def handle_endtag(self, tag):
        while self.open and self.open.pop()[0] != tag:
            pass


def _row_kind(classes: set) -> str | None:
    if {"span", "model"} <= classes:
        return "model call"
    return next((k for k in ("crash", "resume") if {"cut", k} <= classes), None)


def check_html_turn(html: str) -> None:
    """One turn section; the page's only crash mark inside it, after a model call of that
    turn and before the resume (the attempts bar above the trace has its own marks)."""
    parser = _Trace()
    parser.feed(html)
    sections = [ids for classes, ids in parser.rows if "turn" in classes]
    assert len(sections) == 1, sections
    rows = [(_row_kind(classes), ids) for classes, ids in parser.rows if _row_kind(classes)]
    crashes = [ids for kind, ids in rows if kind == "crash"]
    assert len(crashes) == 1 and "turn-1" in crashes[0], f"crash marks in {crashes}, not in turn-1"
    inside = [kind for kind, ids in rows if "turn-1" in ids]
    at = inside.index("crash")
    assert "model call" in inside[:at] and "resume" in inside[at + 1:], inside


def check_trace_turn(spans: list[dict]) -> None:
    """One turn span; the crash a span inside it (and an event on it), after a model call of
    the turn began and before the resume (an attempt span's `outcome: crashed` is no mark)."""
    turns = [span for span in spans if " turn " in span["name"]]
    assert len(turns) == 1, [span["name"] for span in spans]
    turn = turns[0]
    named = {prefix: [s for s in spans if s["name"].startswith(prefix)]
             for prefix in ("dh crash", "dh resumed", "chat ")}
    (crash,), (resume,) = named["dh crash"], named["dh resumed"]
    assert crash["parentSpanId"] == turn["spanId"] == resume["parentSpanId"], (crash, resume, turn)
    at = int(crash["startTimeUnixNano"])
    assert any(s["parentSpanId"] == turn["spanId"] and int(s["startTimeUnixNano"]) <= at
               for s in named["chat "]), "a model call of the turn before the crash"
    assert at <= int(resume["startTimeUnixNano"]), "the crash after the resume"
    events = [e["name"] for e in turn.get("events", [])]
    assert "dh.crash" in events and events.index("dh.crash") < events.index("dh.resume"), events
