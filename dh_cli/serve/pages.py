"""The HTML of `dh serve`'s pages. Every value passes through `_e` (escaped for text and for
attribute values alike); links are built by dh from ids it checked, never taken from a
record. No inline script or style element: the page's CSS and JS are files of this package
(static/), the one session's trace is drawn by the HTML export's renderer (tracehtml.py)."""

from __future__ import annotations

import html
from urllib.parse import quote, urlencode

from ..logviews.render import money
from ..logviews.sessionlist import relative

STATES = ["running here", "on", "waiting", "interrupted", "orphaned", "crashed", "finished",
          "imported", "new"]


def _e(value) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def document(title: str, content: str, page: str, live: str | None = None) -> str:
    """A whole page: the header with its links, the content, this package's CSS and JS.
    `live` is the URL of the page's event stream (read by serve.js from the body)."""
    stream = f' data-stream="{_e(live)}"' if live else ""
    nav = "".join(f'<a href="{href}"{" aria-current=page" if name == page else ""}>{label}</a>'
                  for name, href, label in (("sessions", "/", "Sessions"), ("team", "/team", "Team")))
    return ('<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">\n'
            '<meta name="viewport" content="width=device-width,initial-scale=1">\n'
            f"<title>{_e(title)} · dh</title>\n"
            '<link rel="stylesheet" href="/static/trace.css">\n'
            '<link rel="stylesheet" href="/static/serve.css">\n'
            '<script src="/static/serve.js" defer></script>\n'
            f'</head>\n<body data-page="{_e(page)}"{stream}>\n'
            f'<header class="top"><a class="brand" href="/">dh</a><nav>{nav}</nav>'
            '<span id="live-state" class="live" role="status" aria-live="polite"></span></header>\n'
            f"<div class=\"content\">\n{content}</div>\n</body></html>\n")


# the list -------------------------------------------------------------------------------------
def filters_form(filters, harnesses: list[str]) -> str:
    def options(name: str, values: list[str], chosen: str | None) -> str:
        items = "".join(f'<option value="{_e(v)}"{" selected" if v == chosen else ""}>{_e(v)}</option>'
                        for v in values)
        return f'<select name="{name}" id="f-{name}"><option value="">any</option>{items}</select>'

    return ('<form class="filters" method="get" action="/" role="search">\n'
            f'<label>Search <input type="search" name="q" id="f-q" value="{_e(filters.q)}"'
            ' placeholder="words in prompts, answers, tools" accesskey="s"></label>\n'
            f'<label>Harness {options("harness", harnesses, filters.harness)}</label>\n'
            f'<label>State {options("state", STATES, filters.state)}</label>\n'
            f'<label>Folder <input name="folder" id="f-folder" value="{_e(filters.folder)}"'
            ' placeholder="/path/to/project"></label>\n'
            f'<label>Active since <input name="since" id="f-since" value="{_e(filters.since)}"'
            ' placeholder="3d, 12h, 2026-11-29" size="10"></label>\n'
            '<button type="submit">Show</button> <a href="/" class="reset">clear</a>\n</form>\n')


def session_rows(page: dict, world_columns: bool) -> str:
    """The table body (also sent alone when the list changes)."""
    rows = [_row(r, world_columns) for r in page["rows"]]
    return "".join(rows) or '<tr class="empty"><td colspan="9">No sessions to show.</td></tr>'


def _row(r: dict, world_columns: bool) -> str:
    tokens = r.get("tokens") or {}
    total = sum(tokens.get(k, 0) or 0 for k in ("input", "output", "cache_read", "cache_write"))
    title = r.get("title") or "(no prompt)"
    snippet = f'<div class="snippet">{_e(r["snippet"])}</div>' if r.get("snippet") else ""
    holder = ""
    if world_columns:
        age = f" · lease {r['lease_age']:.0f} s" if r.get("lease_age") is not None else ""
        holder = (f'<td class="holder">{_e(r.get("holder") or "-")}'
                  f'<div class="sub">epoch {_e(r.get("epoch") if r.get("epoch") is not None else "-")}{_e(age)}</div></td>')
    kept = f'<div class="sub">{_e(r.get("kept"))} call(s) kept</div>' if r.get("kept") else ""
    lost = (f'<div class="sub lost">its harness lost it: {_e(r["restore"])}</div>'
            if r.get("lost") and r.get("restore") else "")
    state = r.get("shown_state") or r.get("state")
    hint = f' title="{_e(r.get("why") or r.get("hint"))}"' if r.get("why") or r.get("hint") else ""
    version = f' <span class="sub">{_e(r.get("harness_version"))}</span>' if r.get("harness_version") else ""
    return (f'<tr data-id="{_e(r["id"])}" data-state="{_e(state)}">'
            f'<td class="session"><a href="/s/{quote(r["id"], safe="")}">{_e(r.get("prefix") or r["id"])}</a>'
            f'<div class="title">{_e(title)}</div>{snippet}</td>'
            f'<td class="harness">{_e(r["harness"])}{version}</td>'
            f'<td class="state"><span class="badge {_badge(state)}"{hint}>{_e(state)}</span>{lost}</td>'
            f'{holder}<td class="cwd">{_e(r.get("cwd") or "-")}</td>'
            f'<td class="num turns">{_e(r.get("turns", 0))}</td>'
            f'<td class="num tokens">{total:,}</td>'
            f'<td class="num cost">{_e(money(r.get("cost")))}{kept}</td>'
            f'<td class="when" title="{_e(r.get("last_activity"))}">{_e(relative(r.get("last_activity")))}</td></tr>\n')


def _badge(state: str | None) -> str:
    state = state or ""
    for word in ("running", "on ", "waiting", "interrupted", "orphaned", "crashed", "finished", "refused"):
        if state.startswith(word):
            return "b-" + word.strip()
    return "b-other"


def list_page(page: dict, filters, harnesses: list[str], world_name: str | None, live: str) -> str:
    world_columns = world_name is not None
    head = "".join(f"<th scope=col>{h}</th>" for h in
                   ["Session", "Harness", "State"] + (["Holder"] if world_columns else [])
                   + ["Folder", "Turns", "Tokens", "Cost", "Last activity"])
    what = "matching sessions" if page["searched"] or _any_filter(filters) else "sessions"
    content = (f"<h1>Sessions</h1>\n{filters_form(filters, harnesses)}"
               f'<p class="meta" id="count">{page["total"]:,} {what}</p>\n'
               f'<div class="table-wrap"><table class="sessions"><thead><tr>{head}</tr></thead>'
               f'<tbody id="rows">{session_rows(page, world_columns)}</tbody></table></div>\n'
               + _pager(page, filters))
    return document("Sessions", content, "sessions", live)


def _any_filter(filters) -> bool:
    return any((filters.harness, filters.state, filters.folder, filters.since, filters.q))


def _pager(page: dict, filters) -> str:
    if page["pages"] <= 1:
        return ""

    def link(n: int) -> str:
        params = {k: v for k, v in vars(filters).items() if v and k != "page"}
        return "/?" + urlencode({**params, "page": n})

    prev = f'<a rel="prev" href="{_e(link(page["page"] - 1))}">← newer</a>' if page["page"] > 1 else ""
    nxt = f'<a rel="next" href="{_e(link(page["page"] + 1))}">older →</a>' if page["page"] < page["pages"] else ""
    return f'<nav class="pages">page {page["page"]} of {page["pages"]} {prev} {nxt}</nav>\n'


# one session ------------------------------------------------------------------------------------
def session_page(data: dict, live: str) -> str:
    s = data["session"]
    content = (f'<p class="back"><a href="/">← all sessions</a></p>\n'
               f'<div class="trace-page">{data["trace"]}</div>\n'
               + _attempts(data["attempts"]) + _snapshots(data["snapshots"])
               + '<h2>Live</h2>\n<p class="meta">New records and dh events as the log commits them.'
               ' <button type="button" id="live-toggle" aria-pressed="false">pause</button></p>\n'
               '<ol class="feed" id="feed" aria-live="polite"></ol>\n')
    return document(f"session {s['id']}", content, "session", live)


def _attempts(rows: list[dict]) -> str:
    if not rows:
        return ""
    body = "".join(
        f'<tr><td>{_e(r["attempt"])}</td><td>{_e(r.get("started_at"))}</td><td>{_e(r.get("ended_at"))}</td>'
        f'<td>{_e(_ending(r))}</td><td class="num">{_e(r.get("calls_kept") if r.get("calls_kept") is not None else "-")}</td></tr>'
        for r in rows)
    return ('<h2>Attempts and resumes</h2>\n<div class="table-wrap"><table class="attempts" id="attempts">'
            '<thead><tr><th scope=col>Attempt</th><th scope=col>Started</th><th scope=col>Ended</th>'
            '<th scope=col>How it ended</th><th scope=col>Finished calls kept (not paid again)</th>'
            f'</tr></thead><tbody>{body}</tbody></table></div>\n')


def _ending(row: dict) -> str:
    if row.get("signal"):
        return f"killed (signal {row['signal']})"
    if row.get("outcome"):
        return str(row["outcome"])
    return f"exit {row['exit_code']}" if row.get("exit_code") is not None else "-"


def _snapshots(snaps: list[dict]) -> str:
    if not snaps:
        return ""
    items = "".join(f'<li id="snapshot-{_e(s["seq"])}"><details><summary>{_e(s["at"])} · {_e(s["line"])}'
                    f'</summary><ul class="files">{_files(s)}</ul></details></li>' for s in snaps)
    return f'<h2>Workspace snapshots</h2>\n<ol class="snapshots" id="snapshots">{items}</ol>\n'


def _files(snap: dict) -> str:
    more = f"<li>… {_e(snap['more'])} more</li>" if snap.get("more") else ""
    return "".join(f"<li>{_e(p)}</li>" for p in snap["paths"]) + more


# the team ----------------------------------------------------------------------------------------
def team_page(team: dict | None) -> str:
    if team is None:
        content = ('<h1>Team</h1>\n<p class="meta">No team world: start dh serve with'
                   ' <code>--world postgres</code> to see which machines hold which sessions.</p>\n')
        return document("Team", content, "team")
    machines = "".join(
        f'<tr><td>{_e(m["host"])}</td><td class="num">{_e(m["held"])}</td>'
        f'<td class="num">{_e(m["running"])}</td><td class="num">{_e(m["orphaned"])}</td>'
        f'<td class="num">{_e(_seconds(m["freshest_lease_s"]))}</td><td class="num">{_e(m["takeovers"])}</td>'
        f'<td class="num">{_e(_seconds(m["lag_s"]))}</td><td class="num">{_e(m.get("behind", "-"))}</td></tr>'
        for m in team["machines"])
    held = "".join(
        f'<tr><td><a href="/s/{quote(h["id"], safe="")}">{_e(h["id"])}</a></td><td>{_e(h["harness"])}</td>'
        f'<td>{_e(h["holder"] or "-")}</td><td class="num">{_e(h["epoch"] if h["epoch"] is not None else "-")}</td>'
        f'<td class="num">{_e(_seconds(h["lease_age"]))}</td><td>{_e(h["state"])}</td></tr>'
        for h in team["sessions"])
    takeovers = "".join(
        f'<li>{_e(t["at"])}: <a href="/s/{quote(t["session_id"], safe="")}">{_e(t["session_id"])}</a>'
        f' taken from {_e(t.get("from_host"))} (epoch {_e(t.get("from_epoch"))}) by {_e(t.get("host"))}'
        f' ({_e(t.get("by"))}, epoch {_e(t.get("epoch"))})</li>' for t in team["takeovers"])
    content = ('<h1>Team</h1>\n<h2>Machines</h2>\n<div class="table-wrap"><table class="machines">'
               '<thead><tr><th scope=col>Machine</th><th scope=col>Holds</th><th scope=col>Running</th>'
               '<th scope=col>Orphaned</th><th scope=col>Freshest lease</th><th scope=col>Takeovers by it</th>'
               '<th scope=col>Replication lag</th><th scope=col>Records not yet in the world</th></tr></thead>'
               f'<tbody>{machines}</tbody></table></div>\n'
               '<h2>Sessions held</h2>\n<div class="table-wrap"><table class="held"><thead><tr>'
               '<th scope=col>Session</th><th scope=col>Harness</th><th scope=col>Holder</th>'
               '<th scope=col>Epoch</th><th scope=col>Lease age</th><th scope=col>State</th></tr></thead>'
               f'<tbody>{held}</tbody></table></div>\n'
               f'<h2>Takeovers</h2>\n<ol class="takeovers">{takeovers or "<li>none</li>"}</ol>\n')
    return document("Team", content, "team")


def _seconds(value) -> str:
    return "-" if value is None else f"{value:.0f} s"
