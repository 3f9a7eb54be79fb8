"""The HTML of `dh serve`'s pages: Jinja2 templates (templates/) with autoescape on, so every
value a page shows is escaped unless it is marked as markup, and only the trace, drawn by the
HTML export's renderer (tracehtml.py, which escapes and masks its own texts), is. Links are
built by dh from ids it checked, never taken from a record. No inline script or style
element: the page's CSS and JS are files of this package (static/)."""

from __future__ import annotations

from urllib.parse import quote, urlencode

from jinja2 import Environment, PackageLoader, Undefined
from markupsafe import Markup

from ..logviews.render import money
from ..logviews.sessionlist import relative

STATES = ["running here", "on", "waiting", "interrupted", "orphaned", "crashed", "finished",
          "imported", "new"]
TOKEN_KINDS = ("input", "output", "cache_read", "cache_write")


def _badge(state: str | None) -> str:
    state = state or ""
    for word in ("running", "on ", "waiting", "interrupted", "orphaned", "crashed", "finished", "refused"):
        if state.startswith(word):
            return "b-" + word.strip()
    return "b-other"


def _ending(row: dict) -> str:
    if row.get("signal"):
        return f"killed (signal {row['signal']})"
    if row.get("outcome"):
        return str(row["outcome"])
    return f"exit {row['exit_code']}" if row.get("exit_code") is not None else "-"


def _seconds(value) -> str:
    return f"{value:.0f} s" if isinstance(value, (int, float)) else "-"


def _local_time(ms) -> str:
    """Epoch ms as this machine's local date and time (the page's script shows the browser's)."""
    import datetime as _dt

    return _dt.datetime.fromtimestamp(ms / 1000).astimezone().strftime("%Y-%m-%d %H:%M:%S %Z")


def _dash(value):
    """A value, or "-" where there is none (None, or a key the row lacks)."""
    return "-" if value is None or isinstance(value, Undefined) else value


def _defined(show):
    """show(value), a key the row lacks read as None."""
    return lambda value: show(None if isinstance(value, Undefined) else value)


def _environment() -> Environment:
    env = Environment(loader=PackageLoader(__package__, "templates"), autoescape=True,
                      trim_blocks=True, lstrip_blocks=True,
                      finalize=lambda value: "" if value is None else value)
    env.filters.update(money=_defined(money), relative=_defined(relative), badge=_badge, ending=_ending, seconds=_seconds, dash=_dash, local_time=_local_time,
                       q=lambda value: quote(str(value), safe=""),
                       token_total=lambda t: sum(t.get(k, 0) or 0 for k in TOKEN_KINDS))
    return env


ENV = _environment()


def render(name: str, **context) -> str:
    return ENV.get_template(name).render(**context)


def error_page(status: int, text: str) -> str:
    return render("error.html", title=str(status), page_name="error", status=status, text=text)


# the list -------------------------------------------------------------------------------------
def session_rows(page: dict, world_columns: bool) -> str:
    """The table body (also sent alone when the list changes)."""
    return render("rows.html", rows=page["rows"], world_columns=world_columns)


def list_page(page: dict, filters, harnesses: list[str], world_name: str | None, live: str) -> str:
    world_columns = world_name is not None
    heads = (["Session", "Harness", "State"] + (["Holder"] if world_columns else [])
             + ["Folder", "Turns", "Tokens", "Cost", "Last activity"])
    what = "matching sessions" if page["searched"] or _any_filter(filters) else "sessions"

    def link(n: int) -> str:
        params = {k: v for k, v in vars(filters).items() if v and k != "page"}
        return "/?" + urlencode({**params, "page": n})

    return render("list.html", title="Sessions", page_name="sessions", page=page["page"],
                  pages=page["pages"], total=page["total"], rows=page["rows"], filters=filters,
                  harnesses=harnesses, states=STATES, heads=heads, what=what, link=link,
                  world_columns=world_columns, live=live)


def _any_filter(filters) -> bool:
    return any((filters.harness, filters.state, filters.folder, filters.since, filters.q))


# one session ------------------------------------------------------------------------------------
def session_page(data: dict, live: str, documents: str = "") -> str:
    """The trace is the renderer's HTML (escaped and masked there), marked as such;
    `documents` the address of its documents column, fetched by the page."""
    return render("session.html", title=f"session {data['session']['id']}", page_name="session",
                  trace=Markup(data["trace"]), attempts=data["attempts"], snapshots=data["snapshots"],
                  live=live, documents=documents, sid=data["session"]["id"], q=data.get("q") or "",
                  limit=data.get("limit"),
                  hits=data.get("hits"))


def cost_page(report: dict) -> str:
    return render("cost.html", title="Cost", page_name="cost", report=report)


# the team ----------------------------------------------------------------------------------------
def team_page(team: dict | None, world: str | None = None) -> str:
    return render("team.html", title="Team", page_name="team", team=team, world=world)
