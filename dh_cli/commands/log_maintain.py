"""`dh log` commands that keep the log: rebuild native files from it, remove a session, show
where it is and its schema migrations."""

import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from .. import output
from ..resume.rebuild import rebuild_session
from ..worlds.local import LocalWorld
from ..worlds import migrations
from .args import JsonOpt, SessionArg


def log_rebuild(
    session: SessionArg,
    to: Annotated[Optional[Path], typer.Option("--to", help="Write under this folder instead of the harness home")] = None,
    force: Annotated[bool, typer.Option(help="Replace existing files that differ from the log")] = False,
    json_: JsonOpt = False,
) -> None:
    """Write a session's native files back from the log, byte-exact, in the harness's layout.

    Example:
      $ dh log rebuild 1m8k6p --to /tmp/restore
    """
    world = LocalWorld()
    found = world.find_session(session)
    files = rebuild_session(world, found, to, force)
    masked = world.masked_records(found.id)
    if masked:  # what the harness reads back is not what it wrote
        output.note(f"dh: session {found.id} came from a world that masks credentials: "
                    f"{masked} record(s) rebuilt with *** in place of what looked like a secret")
    if json_:
        output.print_json([{"path": str(f.path), "bytes": f.bytes, "status": f.status} for f in files])
        return
    for item in files:
        output.out.print(f"{item.status:9} {item.path} ({item.bytes} bytes)", markup=False)


def log_rm(
    session: SessionArg,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask (needed when not on a terminal)")] = False,
    json_: JsonOpt = False,
) -> None:
    """Remove a session and its records from the log (the harness's own files stay).

    Example:
      $ dh log rm 1m8k6p
      $ dh log rm 1m8k6p --yes
    """
    from ..sessions_rm import remove_session

    world = LocalWorld()
    found = world.find_session(session)
    removed = remove_session(world, found, yes, sys.stdin.isatty(), typer.confirm)
    if json_:
        output.print_json({"removed": found.id, "records": removed})
        return
    output.out.print(f"removed session {found.id} ({removed} record(s))", markup=False)


def log_status(
    json_: JsonOpt = False,
    path: Annotated[bool, typer.Option("--path", help="Print only the log's path")] = False,
) -> None:
    """Show where the log is and which schema migrations it has (never creates it).

    Example:
      $ dh log status
    """
    from .. import paths

    where = paths.db_path()
    if path:
        output.out.print(str(where), markup=False)
        return
    if not where.exists():
        data = {"path": str(where), "exists": False, "applied": [], "pending": migrations.names(),
                "sessions": 0}
        if json_:
            output.print_json(data)
        else:
            output.out.print(f"log: {where} (not created yet: dh creates it on first use)", markup=False)
        return
    world = LocalWorld(migrate=False)
    applied, pending = world.schema_state()
    data = {"path": str(world.path), "exists": True, "applied": applied, "pending": pending,
            "sessions": world.session_count()}
    if json_:
        output.print_json(data)
        return
    output.out.print(f"log: {data['path']}\nsessions: {data['sessions']}\n"
                     f"migrations: {len(applied)} applied, {len(pending)} pending", markup=False)
