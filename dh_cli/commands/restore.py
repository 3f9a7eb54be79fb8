"""`dh restore`: put back sessions their harness lost, where the harness itself looks."""

from __future__ import annotations

import sys
from typing import Annotated, Optional

import typer

from .. import output
from ..errors import DhError, UsageError
from ..resume.restore_lost import Restoring, find_lost, restore_sessions
from ..worlds.local import LocalWorld


def restore_command(
    sessions: Annotated[Optional[list[str]], typer.Argument(help="dh ids, unique prefixes of them, or the harness's own ids", show_default=False)] = None,
    lost: Annotated[bool, typer.Option("--lost", help="Every session of the log whose native state the harness no longer has")] = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="List what would be restored and write nothing")] = False,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask (for scripts)")] = False,
    force: Annotated[bool, typer.Option(help="Replace a native file that differs from the log (its bytes are kept beside it)")] = False,
    unhide: Annotated[bool, typer.Option("--unhide", help="Make the named sessions the harness has but its own picker hides listed there (rewrites the field that hides them; the original kept beside it)")] = False,
    json_: Annotated[bool, typer.Option("--json", help="Print JSON")] = False,
) -> None:
    """Put sessions the harness lost back where the harness looks, so it lists and resumes them itself.

    A session the harness still has is never touched; restoring twice changes nothing.
    With --unhide, a session whose harness hides it from its own picker (Claude Code: one
    started with -p) is listed there: dh says which field of which file it changes.

    Example:
      $ dh restore --lost --dry-run
      $ dh restore --lost --yes
      $ dh restore 1m8k6p
      $ dh restore --unhide 1m8k6p --dry-run
    """
    if unhide:
        return _unhide(sessions, lost or force, dry_run, json_)
    if bool(sessions) == lost:
        raise UsageError("name sessions or pass --lost (not both)", hint="dh restore --lost --dry-run")
    world = LocalWorld()
    chosen = _chosen(world, sessions) if sessions else [world.get_session(r.session) for r in find_lost(world)]
    if lost and not dry_run and chosen and not yes:
        _ask(len(chosen))
    done = restore_sessions(world, chosen, force=force, dry_run=dry_run)
    _print(done, json_)
    if any(r.status == "failed" for r in done):
        raise typer.Exit(1)


def _unhide(sessions: list[str] | None, other: bool, dry_run: bool, json_: bool) -> None:
    if not sessions or other:
        raise UsageError("--unhide takes named sessions only (not --lost or --force)",
                         hint="dh restore --unhide SESSION --dry-run")
    from ..resume.unhide import unhide_sessions

    world = LocalWorld()
    done = unhide_sessions(world, _chosen(world, sessions), dry_run=dry_run)
    if json_:
        output.print_json([r.to_dict() for r in done])
    for r in [] if json_ else done:
        output.print_text(_unhide_line(r))
    if any(r.status in ("failed", "lost", "not here") for r in done):
        raise typer.Exit(1)


def _unhide_line(r) -> str:
    what = f"{r.session} ({r.harness} {r.native_id}): {r.status}"
    if r.error:
        what += f": {r.error}"
    if r.change:
        c = r.change
        what += f"\n  {c['path']} line {c['line']}: {c['field']} {c['from']!r} -> {c['to']!r}"
    if r.change and r.change.get("kept"):
        what += f"\n  the original bytes are kept as {r.change['kept']}; the log keeps its copy"
    return what


def _chosen(world, refs: list[str]) -> list:
    return [world.find_session(ref) for ref in refs]


def _ask(count: int) -> None:
    if not sys.stdin.isatty():
        raise UsageError(f"refusing to restore {count} session(s) without --yes",
                         hint="not on a terminal: pass --yes, or --dry-run to list them")
    if not typer.confirm(f"Restore {count} session(s) the harness lost?", default=True, err=True):
        raise DhError("nothing restored")


def _print(done: list[Restoring], json_: bool) -> None:
    if json_:
        output.print_json([r.to_dict() for r in done])
        return
    if not done:
        output.print_text("No session to restore: the harnesses have every session of the log.")
    for r in done:
        output.print_text(_line(r))


def _line(r: Restoring) -> str:
    what = f"{r.session} ({r.harness} {r.native_id}): {r.status}"
    if r.why and r.status != "present":
        what += f" (the harness's copy: {r.why})"
    if r.error:
        what += f": {r.error}"
    if r.listed:
        what += (f"\n  listed again by the harness ({r.listed['via']})" if r.listed.get("listed")
                 else f"\n  not in the harness's own list: {r.listed.get('why')}")
        if r.listed.get("left"):
            what += f"\n  {r.listed['left']}"
    if r.hidden:
        what += (f"\n  its harness's picker hides it ({r.hidden['field']} {r.hidden['from']}): "
                 f"`dh restore --unhide {r.session}` lists it there")
    if r.resume and r.status in ("restored", "replaced"):
        what += f"\n  the harness goes on with it itself: {r.resume}"
    return what
