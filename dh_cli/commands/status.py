"""`dh` with no arguments: a short status of the log (see logviews/status.py), always exit 0.
Each session is one line fitted to the terminal (its cwd clipped at the front); how to
resume an interrupted one goes on a line of its own."""

from __future__ import annotations

from .. import output, paths
from ..logviews.render import clip_path
from ..output import cells, fitted
from ..logviews.sessionlist import relative
from ..logviews.status import Status, gather


def _row(session: dict, fact: str, width: int | None) -> str:
    """The session's line, its cwd clipped at the front to what is left of the width; wrapped
    when even the rest is wider (a long host name)."""
    head = f"  {session['id']}  {session['harness']:<11} {fact}  "
    cwd = session.get("cwd") or ""
    return fitted((head + (clip_path(cwd, max(12, width - cells(head) - 1)) if width else cwd)).rstrip(),
                  width)


def _section(title: str, sessions: list[dict], fact, width: int | None, after=None) -> None:
    if not sessions:
        return
    output.out.print(f"[bold]{title}[/bold] ({len(sessions)})")
    for session in sessions:
        output.out.print(_row(session, fact(session), width), markup=False)
        if after:
            output.out.print(fitted(f"    → {after(session)}", width), markup=False)


def print_status(status: Status, width: int | None = None) -> None:
    """The status, each line fitted to `width` columns (None: not wrapped, not clipped)."""
    if not status.exists or not status.total:
        output.out.print(fitted(f"dh: no sessions in the log yet ({status.log}).", width), markup=False)
        output.out.print("See it work:   dh demo\nRun a harness: dh run claude -- ARGS\n"
                         "All commands:  dh --help", markup=False)
        return
    output.out.print(fitted(f"dh: {status.total} session(s) in {status.log}", width), markup=False)
    _section("running now", status.running, lambda s: f"attempt {s['attempts']}", width)
    _section("running on another host (cannot be checked from here)", status.elsewhere,
             lambda s: f"on {s['host']}", width)
    _section("interrupted (their dh is gone)", status.interrupted, lambda s: "interrupted", width,
             lambda s: s["hint"])
    _section("lost by their harness (dh still has them)", status.lost,
             lambda s: f"native state {s['lost']}", width, lambda s: s["restore"])
    _section("last ended", status.recent,
             lambda s: f"{s['state']:<9} {relative(s['updated_at']):>8}", width)
    output.out.print("More: dh log list, dh log show ID, dh --help", markup=False)


def status_command() -> None:
    status = gather(paths.db_path())
    for name in ("running", "elsewhere", "interrupted", "lost", "recent"):  # rows from transcripts, worlds
        setattr(status, name, output.shown(getattr(status, name)))
    print_status(status, output.terminal_width())
