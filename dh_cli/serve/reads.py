"""What `dh serve` reads from the log, as plain data: a page of the session list (with the
filters and the log's full-text search), one session's trace page through the HTML export's
own renderer, the records and journal events after a cursor for the live streams, and a cheap
stamp that changes whenever the log does. The log is opened read-only; every text that leaves
here is masked as `dh log show` masks it (redact.py)."""

from __future__ import annotations

import socket
from dataclasses import asdict, dataclass
from itertools import islice
from pathlib import Path

from .. import liveness
from ..logviews.sessionlist import describe, folder_match, parse_since
from ..errors import UsageError
from ..pricing import provider_of
from ..redact import clean
from ..worlds.local import LocalWorld

PAGE = 100  # sessions a list page shows (the list of 10,000 reads details for these only)
TURNS_PER_PAGE = 50
BATCH = 500  # records a live stream reads at a time (flat memory, any session size)
SEARCH_HITS = 500


def open_log(path: Path) -> LocalWorld:
    return LocalWorld(path, read_only=True)


def warm() -> None:
    """Loads what a first trace screen would load on its way (its renderer, the documents'
    models, the price table: 0.34 s of the first one), while the server waits for requests."""
    from ..documents import html  # noqa: F401
    from ..logviews import trace, tracehtml  # noqa: F401
    from ..pricing import Pricer

    Pricer().known("claude-opus-4-8")


@dataclass
class Filters:
    harness: str | None = None
    state: str | None = None
    folder: str | None = None
    since: str | None = None  # an age (3d) or a date, as `dh log list --since` takes it
    q: str | None = None  # words of the full-text search
    page: int = 1

    @classmethod
    def of(cls, params) -> "Filters":
        def text(name):
            value = (params.get(name) or "").strip()
            return value[:500] or None

        try:
            page = max(1, min(100_000, int(params.get("page") or 1)))
        except ValueError:
            page = 1
        return cls(text("harness"), text("state"), text("folder"), text("since"), text("q"), page)


def shown_state(row: dict, here: str) -> str:
    """running here / on HOST / waiting / interrupted / crashed / finished …, as the log and
    the session's lock say (liveness.py); a world's holding, when known, says orphaned."""
    hold = row.get("hold_state") or ""
    if hold.startswith(("orphaned", "refused")):  # "orphaned, left by HOST: why" too
        return hold
    state = row.get("state") or "-"
    if state in liveness.LIVE_STATES:
        host = row.get("host")
        elsewhere = host and host != here
        if state == "waiting":  # on a limit: the page says which, and counts down to its reset
            return f"waiting on {host}" if elsewhere else "waiting"
        return f"on {host}" if elsewhere else "running here"
    return state


def list_page(world, filters: Filters, holdings: dict | None = None) -> dict:
    """One page of the list: {"rows", "total", "page", "pages", "searched"}, most recent first."""
    rows = world.session_summaries(filters.harness, None, *folder_match(filters.folder))
    if filters.since:
        since = _since(filters.since)
        rows = [r for r in rows if r["last_activity"] >= since]
    hits = _search(world, filters) if filters.q else None
    if hits is not None:
        rows = [r for r in rows if r["id"] in hits]
    if filters.state:
        rows = [r for r in _with_states(world, rows, holdings or {}) if r["shown_state"] == filters.state
                or r["shown_state"].startswith((filters.state + " ", filters.state + ","))]
    pages = max(1, -(-len(rows) // PAGE))
    page = min(filters.page, pages)
    shown = rows[(page - 1) * PAGE:page * PAGE]
    if not filters.state:  # each session's lock looked at for the page's rows alone
        shown = _with_states(world, shown, holdings or {})
    shown = describe(world, shown, with_resumes=False)
    kept = world.resumes_kept([r["id"] for r in shown]) if shown else {}
    for row in shown:  # describe() counted its turns (sessionlist.turn_counts)
        row["limit"] = waiting_on(world, row["id"]) if row["shown_state"].startswith("waiting") else None
        row["snippet"] = (hits or {}).get(row["id"], "")
        row["kept"] = kept.get(row["id"], 0)
    return {"rows": clean(shown), "total": len(rows), "page": page, "pages": pages,
            "searched": hits is not None}


def waiting_on(world, session_id: str, local=None) -> dict | None:
    """What a waiting session waits for: its latest limit event's label and reset time (ms
    since the epoch, None when the harness did not say), its harness, the provider that
    refused (the event's, else the one serving the last model the log `local` names, by
    default `world`: a team world keeps no parsed records) and how many times dh launched it
    again so far."""
    from ..events import LIMIT

    limits = [e for e in world.events(session_id) if e.type == LIMIT]
    if not limits:
        return None
    details, session = limits[-1].details, world.get_session(session_id)
    reset = details.get("reset_at")
    return {"label": details.get("label") or details.get("which") or "usage",
            "reset_ms": int(reset * 1000) if isinstance(reset, (int, float)) else None,
            "harness": session.harness, "relaunches": max(0, (session.attempts or 1) - 1),
            "provider": details.get("provider") or provider_of((local or world).last_model(session_id))}


def _since(text: str):
    try:
        return parse_since(text)
    except (OverflowError, ValueError):  # 99999999d: past the calendar
        raise UsageError(f"--since {text[:40]!r} is out of range") from None


def _search(world, filters: Filters) -> dict[str, str]:
    """session id -> the snippet of its best hit."""
    found: dict[str, str] = {}
    for hit in world.search(filters.q, filters.harness, None, SEARCH_HITS):
        found.setdefault(hit.session_id, hit.snippet)
    return found


def _with_states(world, rows: list[dict], holdings: dict) -> list[dict]:
    liveness.mark(rows, world.path)
    here = socket.gethostname()
    for row in rows:
        held = holdings.get(row["id"])
        if held is not None:
            row.update({"holder": held.holder, "lease_age": held.lease_age, "epoch": held.epoch,
                        "hold_state": held.state})
        row["shown_state"] = shown_state(row, here)
    return rows


# one session ----------------------------------------------------------------------------------
def session_page(world, ref: str, page: int, link, turn: int | None = None) -> dict:
    """The trace page of one session as `dh log export --format html` draws it, masked, with
    its attempts, workspace snapshots (and their files) and the live cursor to start from.
    The documents column is left out: it reads every record (10.7 s of a 200,832-record
    session), so the page fetches it apart (`documents`)."""
    from ..logviews.trace import session_trace
    from ..logviews.tracehtml import body

    session = world.find_session(ref)
    view, turns = session_trace(world, session)
    liveness.mark([view.session], world.path)
    if turn is not None:
        page, batch = _page_with(turns, turn)
    else:
        start = (page - 1) * TURNS_PER_PAGE
        batch = list(islice(turns, start, start + TURNS_PER_PAGE + 1))
    more = len(batch) > TURNS_PER_PAGE
    html = body(view, page, batch[:TURNS_PER_PAGE], more, link)
    waiting = view.session.get("state") == "waiting"
    return {"session": clean(view.session), "trace": html, "cursor": cursor_now(world, session.id),
            "limit": waiting_on(world, session.id) if waiting else None,
                    "attempts": clean(world.attempt_rows(session.id)), "snapshots": snapshots(world, session.id)}


def _page_with(turns, turn: int) -> tuple[int, list]:
    """(the page holding turn number `turn`, its turns and the next one when there is one);
    the last page when no turn has that number. One page of turns held at a time."""
    page, batch = 1, []
    for span in turns:
        batch.append(span)
        if len(batch) > TURNS_PER_PAGE:
            if any(s.attrs.get("turn") == turn for s in batch[:TURNS_PER_PAGE]):
                return page, batch
            page, batch = page + 1, batch[TURNS_PER_PAGE:]
    return page, batch


def session_search(world, ref: str, words: str, limit: int = SEARCH_HITS) -> list[dict]:
    """The session's records holding every word, in turn order: {"turn", "kind", "at",
    "snippet"}, masked."""
    session = world.find_session(ref)
    hits = world.search(words, session.harness, None, limit, session.id)
    rows = [{"turn": h.turn, "kind": h.kind, "at": h.at, "snippet": h.snippet} for h in hits]
    return clean(sorted(rows, key=lambda r: (r["turn"], r["at"] or "")))


def documents(world, ref: str) -> str:
    """The session's documents column (todo list, plan, tasks) as the HTML export draws it,
    masked; "" when it has none."""
    from ..documents.html import aside
    from ..logviews.export import documents_of

    return aside(documents_of(world, world.find_session(ref)), {})


def snapshots(world, session_id: str, files: int = 200) -> list[dict]:
    """The session's workspace snapshots, each with (up to `files` of) its files."""
    from ..workspace.restore import flat_tree
    from ..workspace.views import snapshot_line, snapshots_of

    out = []
    for snap in snapshots_of(world, session_id):
        try:
            paths = sorted(flat_tree(world, snap.root))
        except Exception:  # noqa: BLE001 a tree the log lacks or refuses: the line alone
            paths = []
        out.append({**asdict(snap), "line": snapshot_line(snap), "paths": paths[:files],
                    "more": max(0, len(paths) - files)})
    return clean(out)


# live ----------------------------------------------------------------------------------------
def cursor_now(world, session_id: str) -> str:
    """The stream cursor at the log's present: the last record id and event seq."""
    top, seq = world.last_ids(session_id)
    return f"{top}.{seq}"


def parse_cursor(text: str | None) -> tuple[int, int] | None:
    """RECORD.SEQ; None when absent; a UsageError (400) when it is no cursor, or past what
    SQLite's integers hold."""
    if not text:
        return None
    record, dot, seq = text.partition(".")
    if not (dot and record.isdigit() and seq.isdigit() and len(record) < 19 and len(seq) < 19):
        raise UsageError(f"not a stream cursor: {text[:40]!r}", hint="RECORD.SEQ, as the stream's ids are")
    return int(record), int(seq)


def news(world, session_id: str, record_after: int, seq_after: int) -> tuple[list, list, int]:
    """(records after the record id, journal events after the seq, the record cursor to go on
    from), at most BATCH records, each record as a short masked summary."""
    from ..wrappers import get

    wrapper = get(world.get_session(session_id).harness)
    rows, cursor = world.records_after(session_id, record_after, BATCH)
    events = [asdict(e) for e in world.events(session_id, seq_after)]
    return clean([_summary(wrapper, row) for row in rows]), clean(events), cursor


def _summary(wrapper, row: tuple) -> dict:
    from ..worlds.rows import decode_raw

    record_id, kind, ts, stored, codec = row
    parsed = wrapper.parse(decode_raw(stored, codec))
    text = " ".join((parsed.text or "").split())[:300]
    tools = ", ".join(c.name or "?" for c in parsed.tool_calls)
    return {"id": record_id, "kind": kind or parsed.kind, "ts": ts, "text": text, "tools": tools}
