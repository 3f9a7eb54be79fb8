"""`dh workspace …`: list a session's snapshots, restore one into a folder, show what changed."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from .. import output
from ..worlds.local import LocalWorld
from ..workspace.views import snapshot_line
from .args import SessionArg

app = typer.Typer(help="""A session's workspace snapshots: list, restore, diff.

dh snapshots a supervised session's working directory after every tool call that may write
and at each turn's end (files ignored by git, secret-looking names and files over the size
limit are listed but never stored; see [workspace] in config.toml).

Example:
  $ dh workspace list 1m8k6p
  $ dh workspace restore 1m8k6p --to /tmp/fork --turn 2
  $ dh workspace diff 1m8k6p --turn 2
""", no_args_is_help=True, rich_markup_mode="rich")

TurnOpt = Annotated[Optional[int], typer.Option("--turn", help="The last snapshot of turn N")]
StepOpt = Annotated[Optional[str], typer.Option("--step", help="The snapshot taken after tool call ID (or a prefix of it)")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of text")]


@app.command("list")
def list_command(session: SessionArg, json_: JsonOpt = False) -> None:
    """List the workspace snapshots of a session.

    Example:
      $ dh workspace list 1m8k6p
    """
    from ..workspace.store import store_for

    world = LocalWorld()
    snaps = store_for(world).snapshots(world.find_session(session).id)
    if json_:
        output.print_json([s.to_dict() for s in snaps])
        return
    for snap in snaps:
        output.out.print(snapshot_line(snap), markup=False)
    if not snaps:
        output.note("dh: no workspace snapshots for this session")


@app.command("restore")
def restore_command(
    session: SessionArg,
    to: Annotated[str, typer.Option("--to", help="The folder to write the files into (created if missing)")],
    turn: TurnOpt = None, step: StepOpt = None, json_: JsonOpt = False,
) -> None:
    """Write a snapshot's files into a folder (time travel, or to fork a session at a step).

    Files already equal are left alone; files the snapshot lacks are kept. Nothing is written
    outside the folder.

    Example:
      $ dh workspace restore 1m8k6p --to /tmp/fork --step toolu_01
    """
    from ..errors import NativeStateError
    from ..workspace.restore import pick, restore_into

    world = LocalWorld()
    sid = world.find_session(session).id
    snap = pick(world, sid, turn, step)
    if snap is None:
        raise NativeStateError(f"session {sid} has no workspace snapshot",
                               hint="snapshots are taken for sessions run under `dh run`")
    done = restore_into(world, snap, to)
    if json_:
        output.print_json(done.to_dict())
        return
    output.out.print(f"restored {snapshot_line(snap)}\ninto {done.target}: {len(done.written)}"
                     f" file(s) written, {done.unchanged} already equal, {len(done.extra)} other"
                     " file(s) kept", markup=False)
    for path, why in done.not_stored:
        output.out.print(f"  not stored ({why}): {path}", markup=False)


@app.command("diff")
def diff_command(session: SessionArg, turn: TurnOpt = None, json_: JsonOpt = False) -> None:
    """Show what a turn changed in the workspace (default: the last turn with a snapshot).

    Example:
      $ dh workspace diff 1m8k6p --turn 2
    """
    from ..workspace.restore import before_turn, diff, flat_tree, pick

    world = LocalWorld()
    sid = world.find_session(session).id
    end = pick(world, sid, turn)
    if end is None:
        if json_:
            output.print_json({"turn": None, "from": None, "to": None, "changes": []})
        else:
            output.note("dh: no workspace snapshots for this session")
        return
    start = before_turn(world, sid, end.turn or 0)
    changes = diff(flat_tree(world, start.root) if start else {}, flat_tree(world, end.root))
    if json_:
        output.print_json({"turn": end.turn, "from": start.seq if start else None, "to": end.seq,
                           "changes": [c.__dict__ for c in changes]})
        return
    label = f"turn {end.turn}" if end.turn else "the session"
    output.out.print(f"{label}: snapshot {start.seq if start else '(none)'} -> {end.seq},"
                     f" {len(changes)} change(s)", markup=False)
    for change in changes:
        note = f" ({change.note}, not stored)" if change.note else ""
        output.print_text(f"  {change.status:9} {change.path}{note}")
