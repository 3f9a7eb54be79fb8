"""`dh workspace …`: list a session's snapshots, restore one into a folder, show what changed."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from .. import output
from ..worlds.local import LocalWorld

app = typer.Typer(help="""A session's workspace snapshots: list, restore, diff.

dh snapshots a supervised session's working directory after every tool call that may write
and at each turn's end (files ignored by git, secret-looking names and files over the size
limit are listed but never stored; see [workspace] in config.toml).

Example:
  $ dh workspace list 1m8k6p
  $ dh workspace restore 1m8k6p --to /tmp/fork --turn 2
  $ dh workspace diff 1m8k6p --turn 2
""", no_args_is_help=True, rich_markup_mode="rich")

SessionArg = Annotated[str, typer.Argument(help="dh id, a unique prefix of it, or the harness's own id")]
TurnOpt = Annotated[Optional[int], typer.Option("--turn", help="The last snapshot of turn N")]
StepOpt = Annotated[Optional[str], typer.Option("--step", help="The snapshot taken after tool call ID (or a prefix of it)")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of text")]


def snapshot_line(snap) -> str:
    """One readable line per snapshot (also what `dh log show` prints for one)."""
    where = f"turn {snap.turn}" if snap.turn else "before the first turn"
    after = f"after tool call {snap.step}" if snap.step else snap.reason.replace("_", " ")
    git = f", git {snap.branch or 'detached'}@{snap.head[:10]}" if snap.head else ""
    skipped = f", {snap.skipped} not stored (secret or large)" if snap.skipped else ""
    return (f"snapshot {snap.seq}: {where}, {after}: {snap.files} file(s),"
            f" {snap.bytes:,} bytes{skipped}{git}")


def with_snapshots(items, snaps: list):
    """`dh log show`'s items with a mark for each snapshot where it was taken: after the tool
    call whose result ended its step, else (a turn's end) before the next turn's prompt, and
    the rest at the end."""
    by_step: dict[str, list] = {}
    for snap in snaps:
        if snap.step:
            by_step.setdefault(snap.step, []).append(snap)
    left, source = list(snaps), None
    for item in items:
        if item.get("type") == "prompt" and not item.get("resumed") and not item.get("synthetic"):
            due = [s for s in left if (s.turn or 0) < (item.get("turn") or 0)]
            yield from _marks(due, left, item.get("source", source))
        source = item.get("source", source)
        yield item
        if item.get("type") == "tool_call" and item.get("call_id") in by_step:
            yield from _marks(by_step.pop(item["call_id"]), left, source)
    yield from _marks(list(left), left, source)


def _marks(due: list, left: list, source):
    for snap in due:
        if snap in left:
            left.remove(snap)
            yield {"type": "workspace", "source": source, "seq": snap.seq,
                   "text": snapshot_line(snap)}


def snapshots_of(world, session_id: str) -> list:
    from .store import store_for

    return store_for(world).snapshots(session_id)


@app.command("list")
def list_command(session: SessionArg, json_: JsonOpt = False) -> None:
    """List the workspace snapshots of a session.

    Example:
      $ dh workspace list 1m8k6p
    """
    from .store import store_for

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
    from .restore import pick, restore_into

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
    from .restore import before_turn, diff, flat_tree, pick

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
        output.out.print(f"  {change.status:9} {change.path}{note}", markup=False)
