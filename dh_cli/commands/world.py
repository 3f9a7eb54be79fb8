"""`dh world …`: push the local log to a shared world, pull from it, compare the two."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from .. import output
from ..errors import CopiedWithFailures, UsageError
from .. import team
from ..worlds.local import LocalWorld
from ..team import open_world
from ..team.sync import SyncReport, damaged_hint, pull, push, status

app = typer.Typer(help=f"""Share sessions through a team world ({team.listed()}): push, pull, status.

Example:
  $ dh world push postgres
  $ dh world status
""", no_args_is_help=True, rich_markup_mode="rich")

WorldArg = Annotated[str, typer.Argument(help=f"The team world to sync with: {team.listed()}")]
SessionOpt = Annotated[Optional[str], typer.Option("--session", help="Only this session (dh id, prefix, or the harness's id)")]
UrlOpt = Annotated[Optional[str], typer.Option("--url", help=team.URL_HELP)]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of text")]


def _with_bar(label: str, run):
    """Run `run(progress)` under a progress bar (shown on a terminal only)."""
    with output.progress(label) as bar:
        task = bar.add_task(label, total=None)
        return run(lambda done, total: bar.update(task, completed=done, total=total))


def _summary(report: SyncReport, json_: bool) -> None:
    if json_:
        output.print_json(report.to_dict())
    else:
        _print_summary(report)
    if report.failed:
        raise CopiedWithFailures(f"{len(report.failed)} of {len(report.sessions)} session(s) could not be"
                                 f" {report.direction}ed whole (each named above); the others were",
                                 hint=damaged_hint(report.direction))


def _print_summary(report: SyncReport) -> None:
    for sync in report.failed:
        output.note_shown(f"dh: {sync.failed}")
    for sync in report.sessions:
        for item in sync.diverged:  # both copies went on: neither is dropped nor spliced
            where = "this machine's copy stored in the world" if report.direction == "push" \
                else "the world's copy stored here"
            kept = (f"{where} as generation {item['generation']}" if item["generation"] is not None
                    else "both copies were kept before")
            output.note(f"dh: session {sync.session_id} diverged ({item['relpath']}): {kept}")
    verb = "pushed to" if report.direction == "push" else "pulled from"
    output.out.print(f"{verb} {report.world}: {report.records:,} record(s) and {report.events:,} event(s)"
                     f" added, {report.changed} of {len(report.sessions)} session(s) changed,"
                     f" in {report.seconds:.1f} s", markup=False)


@app.command("push")
def push_command(world: WorldArg, session: SessionOpt = None, url: UrlOpt = None,
                 json_: JsonOpt = False) -> None:
    """Copy to the world every session, record and event it lacks (idempotent, resumable).
    A session with a damaged record or workspace object is named on stderr and left out;
    the others are pushed, and dh exits 7.

    Example:
      $ dh world push postgres
      $ dh world push postgres --session 1m8k6p --url postgresql://dh@db.internal/dh
    """
    remote, local = open_world(world, url), LocalWorld()
    ids = [local.find_session(session).id] if session else None
    _summary(_with_bar("pushing", lambda progress: push(local, remote, ids, progress, True)), json_)


@app.command("pull")
def pull_command(world: WorldArg, session: SessionOpt = None, url: UrlOpt = None,
                 json_: JsonOpt = False) -> None:
    """Copy into the local log every session, record and event of the world it lacks.
    A session with a damaged record or workspace object (an unknown codec, bytes that do not
    decode, columns of the wrong types, a tree that is no tree) is named on stderr with why,
    and nothing of it is kept if it was new here; every other session is pulled, and dh
    exits 7 ("pulled with failures").

    Example:
      $ dh world pull postgres
      $ dh world pull postgres --session 1m8k6p
    """
    remote, local = open_world(world, url), LocalWorld()
    ids = [remote.find_session(session).id] if session else None
    _summary(_with_bar("pulling", lambda progress: pull(remote, local, ids, progress, True)), json_)


@app.command("status")
def status_command(world: Annotated[str, typer.Argument(help=f"The team world to compare with: {team.listed()}")] = "postgres",
                   url: UrlOpt = None, json_: JsonOpt = False) -> None:
    """Compare the local log with the world (local only, server only, in sync, ahead,
    diverged), and show who holds each session: holder, lease age, epoch, state (running
    here, running on HOST, orphaned, finished). A session whose rows the comparison reads are
    damaged in the world is `damaged`, with why on stderr (`reason` in JSON); the others are
    listed as they stand and dh exits 0 (`dh world pull` checks every row it copies).

    Example:
      $ dh world status
      $ dh world status postgres --json
    """
    from ..team.listing import HOLD_COLUMNS, hold_cells, hold_dict
    from ..team.takeover import holdings

    remote = open_world(world, url)
    rows, held = status(LocalWorld(), remote), holdings(remote)
    if json_:
        output.print_json([{**r.to_dict(), **hold_dict(held.get(r.session_id))} for r in rows])
        return
    for row in rows:
        if row.reason:
            output.note_shown(f"dh: session {row.session_id} damaged: {row.reason}")
    leased = any(h.holder for h in held.values())  # the lease columns only once there are leases
    output.table(None, ["session", "harness", "status", "local records", "server records",
                        *(HOLD_COLUMNS if leased else [])],
                 [[r.session_id, r.harness, r.status, r.local_records, r.server_records,
                   *(hold_cells(held.get(r.session_id)) if leased else [])] for r in rows])


@app.command("records")
def records_command(world: WorldArg,
                    mode: Annotated[Optional[str], typer.Argument(help="masked (the default) or raw; none: show it")] = None,
                    url: UrlOpt = None, json_: JsonOpt = False) -> None:
    """Show or set how the world keeps the records pushed to it: `masked` (what looks like
    a credential is replaced by *** before it leaves this machine) or `raw` (native bytes,
    for a world the team trusts). A setting of the world: it holds for everyone's pushes.

    Example:
      $ dh world records postgres
      $ dh world records postgres raw
    """
    remote = open_world(world, url)
    if mode is not None:
        if mode not in ("masked", "raw"):
            raise UsageError(f"unknown records mode {mode!r}", hint="masked or raw")
        remote.set_records_mode(mode)
    shown, now = remote.shown, "masked" if remote.masks_records else "raw"
    if json_:
        output.print_json({"world": shown, "records": now})
        return
    output.out.print(f"{shown}: records {now}", markup=False)
