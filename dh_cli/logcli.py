"""`dh log …`: list, show and rebuild sessions from the log; schema status."""

from pathlib import Path
from typing import Annotated, Optional

import typer

from . import output, render
from .logview import build_view
from .resume.rebuild import rebuild_session
from .worlds.local import LocalWorld
from .worlds.migrations import migrations

app = typer.Typer(help="Read the log: sessions, timelines, native records.", no_args_is_help=True)

JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table")]


@app.command("list")
def log_list(
    harness: Annotated[Optional[str], typer.Option(help="Only sessions of this harness")] = None,
    json_: JsonOpt = False,
) -> None:
    """List the sessions in the log.

    Example:
      $ dh log list --harness claude-code --json
    """
    from .wrappers import get

    name = get(harness).name if harness else None
    sessions = LocalWorld().list_sessions(name)
    if json_:
        output.print_json(sessions)
    else:
        render.session_table(sessions)


@app.command("show")
def log_show(
    session: Annotated[str, typer.Argument(help="dh id, a unique prefix of it, or the harness's own id")],
    json_: JsonOpt = False,
    raw: Annotated[bool, typer.Option("--raw", help="Print the native records byte-exact")] = False,
) -> None:
    """Show a session's timeline: turns, prompts, tool calls, tokens, crashes and resumes.

    Example:
      $ dh log show 1m8k6p
      $ dh log show 1m8k6p --raw > transcript.jsonl
    """
    world = LocalWorld()
    found = world.find_session(session)
    if raw:
        render.write_raw(world.records(found.id))
        return
    view = build_view(world, found)
    if json_:
        output.print_json(view.to_dict())
    else:
        render.session_view(view)


@app.command("rebuild")
def log_rebuild(
    session: Annotated[str, typer.Argument(help="dh id, a unique prefix of it, or the harness's own id")],
    to: Annotated[Optional[Path], typer.Option("--to", help="Write under this folder instead of the harness home")] = None,
    force: Annotated[bool, typer.Option(help="Replace existing files that differ from the log")] = False,
    json_: JsonOpt = False,
) -> None:
    """Write a session's native files back from the log, byte-exact, in the harness's layout.

    Example:
      $ dh log rebuild 1m8k6p --to /tmp/restore
    """
    world = LocalWorld()
    files = rebuild_session(world, world.find_session(session), to, force)
    if json_:
        output.print_json([{"path": str(f.path), "bytes": f.bytes, "status": f.status} for f in files])
        return
    for item in files:
        output.out.print(f"{item.status:9} {item.path} ({item.bytes} bytes)", markup=False)


@app.command("status")
def log_status(json_: JsonOpt = False) -> None:
    """Show where the log is and which schema migrations it has.

    Example:
      $ dh log status
    """
    world = LocalWorld()
    applied = [m.name for m in migrations.applied(world.db)]
    pending = [m.name for m in migrations.pending(world.db)]
    data = {"path": str(world.path), "applied": applied, "pending": pending,
            "sessions": len(world.list_sessions())}
    if json_:
        output.print_json(data)
        return
    output.out.print(f"log: {data['path']}\nsessions: {data['sessions']}\n"
                     f"migrations: {len(applied)} applied, {len(pending)} pending", markup=False)
