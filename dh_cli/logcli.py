"""`dh log …`: list, show (or follow), export and rebuild sessions from the log; schema status."""

import sys
from enum import Enum
from pathlib import Path
from typing import Annotated, Optional

import typer

from . import output, render
from .export import export_session
from .follow import follow
from .outfile import write_output
from .redact import clean, clean_bytes, clean_view
from .logview import build_view
from .resume.rebuild import rebuild_session
from .worlds.local import LocalWorld
from .worlds import migrations

app = typer.Typer(help="""Read the log: sessions, timelines, native records, exports.

Example:
  $ dh log list
  $ dh log show 1m8k6p --follow
""", no_args_is_help=True, rich_markup_mode="rich")

class ExportFormat(str, Enum):
    md = "md"
    html = "html"
    jsonl = "jsonl"


JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table")]
SecretsOpt = Annotated[bool, typer.Option("--show-secrets", help="Show what looks like a credential (keys, tokens, passwords) instead of ***")]


@app.command("list")
def log_list(
    harness: Annotated[Optional[str], typer.Option(help="Only sessions of this harness")] = None,
    json_: JsonOpt = False,
    show_secrets: SecretsOpt = False,
    world: Annotated[Optional[str], typer.Option("--world", help="List the sessions of this world instead, with who holds each (postgres)")] = None,
    url: Annotated[Optional[str], typer.Option("--url", help="PostgreSQL URL for --world (default: $DH_POSTGRES_URL, then $WORKFLOW_POSTGRES_URL)")] = None,
) -> None:
    """List the sessions in the log (or in a world, with holder, lease age, epoch and state).

    Example:
      $ dh log list --harness claude-code --json
      $ dh log list --world postgres
    """
    from .wrappers import get

    name = get(harness).name if harness else None
    if world is not None:
        from .worlds.listing import list_world
        from .worlds.sync import open_remote

        open_remote(world, url).close()  # the world's name checked: one Error: line
        return list_world(url, name, json_)
    sessions = clean(LocalWorld().list_sessions(name), show_secrets, output.is_terminal())
    if json_:
        output.print_json(sessions)
    else:
        render.session_table(sessions)


@app.command("show")
def log_show(
    session: Annotated[str, typer.Argument(help="dh id, a unique prefix of it, or the harness's own id")],
    json_: JsonOpt = False,
    raw: Annotated[bool, typer.Option("--raw", help="Print the native records byte-exact")] = False,
    follow: Annotated[bool, typer.Option("--follow", "-f", help="Keep printing new timeline items and events as they are logged (Ctrl-C to stop); with --json, one JSON object a line")] = False,
    show_secrets: SecretsOpt = False,
) -> None:
    """Show a session's timeline: turns, prompts, tool calls, tokens, crashes and resumes.

    Example:
      $ dh log show 1m8k6p
      $ dh log show 1m8k6p --raw > transcript.jsonl
      $ dh log show 1m8k6p --follow
    """
    world = LocalWorld()
    found = world.find_session(session)
    terminal = output.is_terminal()  # control sequences in records never reach a terminal
    if raw:
        render.write_raw(_cleaned(world.records(found.id), show_secrets, terminal))
        return
    if follow:
        _follow(world, found.id, json_, show_secrets)
        return
    view = clean_view(build_view(world, found), show_secrets, terminal)
    if json_:
        output.print_json(view.to_dict())
    else:
        render.session_view(view)


def _cleaned(records, show_secrets: bool, terminal: bool):
    for record in records:
        record.raw = clean_bytes(record.raw, show_secrets, terminal)
        yield record


def _follow(world, session_id: str, json_: bool, show_secrets: bool = False) -> None:
    """Runs until Ctrl-C, which ends it with 130 and no traceback."""
    output.note(f"dh: following session {session_id} (Ctrl-C to stop)")
    terminal = output.is_terminal()
    try:
        for update in follow(world, session_id):
            render.follow_update(clean(update, show_secrets, terminal), json_)
    except KeyboardInterrupt:
        raise typer.Exit(130) from None


@app.command("export")
def log_export(
    session: Annotated[str, typer.Argument(help="dh id, a unique prefix of it, or the harness's own id")],
    format_: Annotated[ExportFormat, typer.Option("--format", help="md, html (one self-contained page) or jsonl (the native records)")] = ExportFormat.md,
    out: Annotated[Optional[Path], typer.Option("--output", "-o", help="Write to this file (mode 0600) instead of stdout")] = None,
    show_secrets: SecretsOpt = False,
) -> None:
    """Export a session as Markdown, a self-contained HTML page, or its native records.

    Example:
      $ dh log export 1m8k6p --format html -o session.html
      $ dh log export 1m8k6p --format md > session.md
    """
    world = LocalWorld()
    data = export_session(world, world.find_session(session), format_.value)
    data = clean_bytes(data, show_secrets, out is None and output.is_terminal())
    if out is None:
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
    else:
        write_output(out, data, output.note)  # 0600, a regular file only (outfile.py)
        output.note(f"dh: wrote {out} ({len(data):,} bytes)")


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


@app.command("rm")
def log_rm(
    session: Annotated[str, typer.Argument(help="dh id, a unique prefix of it, or the harness's own id")],
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask (needed when not on a terminal)")] = False,
    json_: JsonOpt = False,
) -> None:
    """Remove a session and its records from the log (the harness's own files stay).

    Example:
      $ dh log rm 1m8k6p
      $ dh log rm 1m8k6p --yes
    """
    from .sessions_rm import remove_session

    world = LocalWorld()
    found = world.find_session(session)
    removed = remove_session(world, found, yes, sys.stdin.isatty(), typer.confirm)
    if json_:
        output.print_json({"removed": found.id, "records": removed})
        return
    output.out.print(f"removed session {found.id} ({removed} record(s))", markup=False)


@app.command("status")
def log_status(json_: JsonOpt = False) -> None:
    """Show where the log is and which schema migrations it has.

    Example:
      $ dh log status
    """
    world = LocalWorld()
    applied, pending = migrations.applied(world.conn), migrations.pending(world.conn)
    data = {"path": str(world.path), "applied": applied, "pending": pending,
            "sessions": len(world.list_sessions())}
    if json_:
        output.print_json(data)
        return
    output.out.print(f"log: {data['path']}\nsessions: {data['sessions']}\n"
                     f"migrations: {len(applied)} applied, {len(pending)} pending", markup=False)
