"""`dh` with no arguments: a short status of the log (see logviews/status.py), always exit 0."""

from __future__ import annotations

from .. import output, paths
from ..logviews.status import Status, gather


def _row(session: dict) -> str:
    cwd = session.get("cwd") or ""
    return f"  {session['id']}  {session['harness']:<11} {cwd}"


def _section(title: str, sessions: list[dict], extra=None) -> None:
    if not sessions:
        return
    output.out.print(f"[bold]{title}[/bold] ({len(sessions)})")
    for session in sessions:
        line = _row(session) + (extra(session) if extra else "")
        output.out.print(line, markup=False)


def print_status(status: Status) -> None:
    if not status.exists or not status.total:
        output.out.print(f"dh: no sessions in the log yet ({status.log}).", markup=False)
        output.out.print("See it work:  dh demo      Run a harness:  dh run claude -- …      "
                         "All commands:  dh --help", markup=False)
        return
    output.out.print(f"dh: {status.total} session(s) in {status.log}", markup=False)
    _section("running now", status.running, lambda s: f"  attempt {s['attempts']}")
    _section("running on another host (cannot be checked from here)", status.elsewhere,
             lambda s: f"  on {s['host']}")
    _section("interrupted (their dh is gone)", status.interrupted, lambda s: f"  → {s['hint']}")
    _section("last ended", status.recent, lambda s: f"  {s['state']}  {s['updated_at'][:19]}")
    output.out.print("More: dh log list, dh log show ID, dh --help", markup=False)


def status_command() -> None:
    status = gather(paths.db_path())
    for name in ("running", "elsewhere", "interrupted", "recent"):  # rows from transcripts, worlds
        setattr(status, name, output.shown(getattr(status, name)))
    print_status(status)
