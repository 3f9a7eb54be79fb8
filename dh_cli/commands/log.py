"""`dh log …`: list, show (or follow), export and rebuild sessions from the log; schema status."""

import sys
from enum import Enum
from pathlib import Path
from typing import Annotated, Optional

import typer

from .. import liveness, output
from ..logviews import render
from ..logviews.export import export_session, export_stream
from ..logviews.follow import follow
from ..logviews.logview import select_turns, stream_items, view_header
from ..outfile import write_output
from ..redact import clean, clean_bytes, clean_view
from ..resume.rebuild import rebuild_session
from ..worlds.local import LocalWorld
from ..errors import UsageError
from .. import team
from ..worlds import migrations
from .args import HarnessOpt, SessionArg, StateOpt

app = typer.Typer(help="""Read the log: sessions, timelines, native records, exports.

Example:
  $ dh log list
  $ dh log show 1m8k6p --follow
""", no_args_is_help=True, rich_markup_mode="rich")

class ExportFormat(str, Enum):
    md = "md"
    html = "html"
    jsonl = "jsonl"
    otlp = "otlp"


JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table")]
SecretsOpt = Annotated[bool, typer.Option("--show-secrets", help="Show what looks like a credential (keys, tokens, passwords) instead of ***")]


@app.command("list")
def log_list(
    harness: HarnessOpt = None,
    limit: Annotated[Optional[int], typer.Option(help="Show at most this many (the most recent)", min=1)] = None,
    since: Annotated[Optional[str], typer.Option(help="Only sessions active since this age (30m, 12h, 3d, 2w) or date (2026-11-29)")] = None,
    cwd: Annotated[Optional[Path], typer.Option(help="Only sessions started in this folder or below it")] = None,
    here: Annotated[bool, typer.Option("--here", help="Only sessions started in the current folder or below it")] = False,
    state: StateOpt = None,
    json_: JsonOpt = False,
    show_secrets: SecretsOpt = False,
    world: Annotated[Optional[str], typer.Option("--world", help=f"List the sessions of this team world instead, with who holds each ({team.listed()})")] = None,
    url: Annotated[Optional[str], typer.Option("--url", help=team.URL_HELP)] = None,
) -> None:
    """List the sessions in the log (or in a world, with holder, lease age, epoch and state).

    Example:
      $ dh log list --limit 10
      $ dh log list --here --since 3d
      $ dh log list --harness claude-code --json
      $ dh log list --world postgres
    """
    from ..logviews.sessionlist import ListFilter, here as current, list_sessions, parse_since
    from ..wrappers import get

    if world is not None:
        from ..team.listing import list_world

        return list_world(world, url, get(harness).name if harness else None, json_)
    folder = current() if here else (str(cwd.expanduser().absolute()) if cwd else None)
    wanted = ListFilter(get(harness).name if harness else None,
                        parse_since(since) if since else None, folder, state, limit)
    world = LocalWorld()
    sessions = clean(liveness.mark(list_sessions(world, wanted), world.path), show_secrets,
                     output.is_terminal())
    if json_:
        output.print_json(sessions, cleaned=True)
    else:
        import shutil

        render.session_list(sessions, output.is_terminal(), shutil.get_terminal_size().columns)


@app.command("search")
def log_search(
    text: Annotated[str, typer.Argument(help="Words to find (every one must occur)")],
    harness: HarnessOpt = None,
    since: Annotated[Optional[str], typer.Option(help="Only records since this age (30m, 12h, 3d, 2w) or date (2026-11-29)")] = None,
    limit: Annotated[int, typer.Option(help="Show at most this many hits", min=1)] = 50,
    json_: JsonOpt = False,
) -> None:
    """Search every session's prompts, answers, tool inputs and tool outputs.

    Example:
      $ dh log search "failing test"
      $ dh log search migration --harness codex --since 3d --json
    """
    from ..logviews.sessionlist import parse_since, short_prefixes
    from ..wrappers import get

    world = LocalWorld()
    hits = world.search(text, get(harness).name if harness else None,
                        parse_since(since) if since else None, limit)
    if json_:
        output.print_json([h.to_dict() for h in hits])
        return
    import shutil
    from dataclasses import replace

    hits = [replace(h, **output.shown({k: v for k, v in vars(h).items() if isinstance(v, str)}))
            for h in hits]
    render.search_hits(hits, short_prefixes(world, [h.session_id for h in hits]),
                       shutil.get_terminal_size().columns)


@app.command("show")
def log_show(
    session: SessionArg,
    json_: JsonOpt = False,
    raw: Annotated[bool, typer.Option("--raw", help="Print the native records byte-exact")] = False,
    follow: Annotated[bool, typer.Option("--follow", "-f", help="Keep printing new timeline items and events as they are logged (Ctrl-C to stop); with --json, one JSON object a line")] = False,
    show_secrets: SecretsOpt = False,
    turn: Annotated[Optional[int], typer.Option("--turn", help="Show only this turn of the main conversation", min=1)] = None,
    last: Annotated[Optional[int], typer.Option("--last", help="Show only the last N turns of the main conversation", min=1)] = None,
    no_pager: Annotated[bool, typer.Option("--no-pager", help="Print straight to the terminal instead of through $PAGER (less -R)")] = False,
) -> None:
    """Show a session's timeline: turns, prompts, tool calls, tokens, crashes and resumes.

    On a terminal the timeline is paged ($PAGER, else less -R), as git does.

    Example:
      $ dh log show 1m8k6p
      $ dh log show 1m8k6p --last 2
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
    view = clean_view(view_header(world, found), show_secrets, terminal)
    liveness.mark([view.session], world.path)
    savings = view.totals["cost"]  # stream_items adds what dh's resumes saved
    items = select_turns(stream_items(world, found, events=view.events, savings=savings), turn, last)
    from ..workspace.views import snapshots_of, with_snapshots  # a mark where each snapshot was taken

    snaps = snapshots_of(world, found.id)
    if not json_:
        items = with_snapshots(items, snaps)
    items = (clean(item, show_secrets, terminal) for item in items)  # one at a time: it streams
    if json_:
        output.stream_json("items", items, lambda: {
            **{k: v for k, v in view.to_dict().items() if k != "items"},
            "workspace": clean([s.to_dict() for s in snaps], show_secrets)})
        return
    width = output.terminal_width()
    with output.pager(not no_pager):
        render.session_head(view, width)
        render.session_items(items, width)
        render.session_tail(view, width)


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


@app.command("docs")
def log_docs(
    session: SessionArg,
    json_: JsonOpt = False,
) -> None:
    """Show a session's documents (todo list, plan, tasks) and every edit that made them.

    Example:
      $ dh log docs 1m8k6p
      $ dh log docs 1m8k6p --json
    """
    from ..documents.build import session_documents
    from ..documents.show import print_documents
    from ..wrappers import get as get_wrapper

    world = LocalWorld()
    found = world.find_session(session)
    docs = session_documents(world, get_wrapper(found.harness), found.id)
    if json_:
        output.print_json({kind: doc.model_dump() for kind, doc in docs.items()})
    else:
        print_documents({kind: type(doc).model_validate(output.shown(doc.model_dump()))
                         for kind, doc in docs.items()})


@app.command("export")
def log_export(
    session: SessionArg,
    format_: Annotated[ExportFormat, typer.Option("--format", help="md, html (a trace view, self-contained pages), jsonl (the native records) or otlp (OpenTelemetry traces as OTLP/JSON lines)")] = ExportFormat.md,
    out: Annotated[Optional[Path], typer.Option("--output", "-o", help="Write to this file (mode 0600) instead of stdout; an HTML export of many turns also writes NAME-2.html, NAME-3.html ... next to it")] = None,
    page: Annotated[int, typer.Option("--page", help="With html to stdout: which page to print", min=1)] = 1,
    turns_per_page: Annotated[int, typer.Option("--turns-per-page", help="With html: turns on each page", min=1)] = 100,
    show_secrets: SecretsOpt = False,
) -> None:
    """Export a session as Markdown, an HTML trace view, or its native records.

    Example:
      $ dh log export 1m8k6p --format html -o session.html
      $ dh log export 1m8k6p --format md > session.md
    """
    world = LocalWorld()
    found = world.find_session(session)
    terminal = out is None and output.is_terminal()
    if format_ is ExportFormat.html:
        _export_html(world, found, out, page, turns_per_page, show_secrets)
    elif format_ is ExportFormat.otlp and out is None:
        from ..logviews.otel import JsonLinesExporter, emit_session

        emit_session(world, found, JsonLinesExporter(sys.stdout))
    elif out is None:
        for chunk in export_stream(world, found, format_.value):
            sys.stdout.buffer.write(clean_bytes(chunk, show_secrets, terminal))
        sys.stdout.buffer.flush()
    else:
        data = clean_bytes(export_session(world, found, format_.value), show_secrets)
        write_output(out, data, output.note)  # 0600, a regular file only (outfile.py)
        output.note(f"dh: wrote {out} ({len(data):,} bytes)")


def _export_html(world, found, out: Optional[Path], wanted: int, per_page: int,
                 show_secrets: bool = False) -> None:
    """Pages of the trace view: every page next to `out` (page n as NAME-n.html), or the
    wanted page on stdout. One page is held in memory at a time."""
    from ..logviews.trace import session_trace
    from ..logviews.tracehtml import pages

    def name(n: int) -> str:
        return out.name if n == 1 else f"{out.stem}-{n}{out.suffix}"

    from ..logviews.export import documents_of

    view, turns = session_trace(world, found)
    docs = documents_of(world, found)
    for number, data in enumerate(pages(view, turns, per_page, name if out else None, docs), 1):
        data = clean_bytes(data, show_secrets)
        if out is None:
            if number == wanted:
                sys.stdout.buffer.write(data)
                sys.stdout.buffer.flush()
                return
            continue
        target = out if number == 1 else out.with_name(name(number))
        write_output(target, data, output.note)  # 0600, a regular file only (outfile.py)
        output.note(f"dh: wrote {target} ({len(data):,} bytes)")
    if out is None:
        raise UsageError(f"--page {wanted}: the export has {number} page(s)")


@app.command("trace")
def log_trace(
    session: SessionArg,
    endpoint: Annotated[str, typer.Option("--endpoint", help="OTLP/HTTP traces URL, e.g. http://127.0.0.1:6006/v1/traces (Phoenix) or http://127.0.0.1:4318/v1/traces (a collector)")],
    header: Annotated[Optional[list[str]], typer.Option("--header", help="An HTTP header for the endpoint, NAME=VALUE (repeatable)")] = None,
    json_: JsonOpt = False,
) -> None:
    """Send a session to an OpenTelemetry backend as a trace: turns, model calls and tool calls
    as spans (GenAI semantic conventions), crashes and resumes as span events.

    Example:
      $ dh log trace 1m8k6p --endpoint http://127.0.0.1:6006/v1/traces
    """
    from ..logviews.otel import send_session

    headers = dict(_header(h) for h in header or [])
    world = LocalWorld()
    found = world.find_session(session)
    turns, spans = send_session(world, found, endpoint, headers)
    result = {"session": found.id, "endpoint": endpoint, "turns": turns, "spans": spans}
    if json_:
        output.print_json(result)
    else:
        output.out.print(f"sent session {found.id}: {turns} turn(s), {spans} span(s) to {endpoint}",
                         markup=False)


def _header(text: str) -> tuple[str, str]:
    name, sep, value = text.partition("=")
    if not sep or not name.strip():
        raise UsageError(f"--header {name.strip()!r}: give NAME=VALUE")
    return name.strip(), value


@app.command("rebuild")
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


@app.command("rm")
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


@app.command("schema")
def log_schema(json_: JsonOpt = False) -> None:
    """Show what the log's tables and views hold, with example queries.

    Example:
      $ dh log schema
      $ sqlite-utils query "$(dh log status --path)" "select * from tool_calls"
    """
    from ..logviews.logschema import EXAMPLES, SCHEMA, text

    if json_:
        output.print_json({"schema": SCHEMA, "examples": [{"title": t, "sql": q} for t, q in EXAMPLES]})
        return
    output.out.print(text(), markup=False)


class CostGroup(str, Enum):
    day = "day"
    session = "session"
    harness = "harness"
    model = "model"


@app.command("cost")
def log_cost(
    by: Annotated[Optional[list[CostGroup]], typer.Option("--by", help="Group by day, session, harness or model (repeat to group by several; default: day)")] = None,
    tz: Annotated[Optional[str], typer.Option("--tz", help="Time zone of the days, an IANA name such as Europe/Paris or UTC (default: this machine's)")] = None,
    json_: JsonOpt = False,
) -> None:
    """Show what the model calls of every session cost, across every harness in one table.

    Each call is counted once, its tokens in one vocabulary for every harness (uncached input,
    cache reads, 5-minute and 1-hour cache writes, output with its reasoning) and priced from
    the genai-prices table; a model the table does not know is counted but not priced.

    Example:
      $ dh log cost
      $ dh log cost --by session --by model
      $ dh log cost --tz UTC --json
    """
    from ..logviews.costs import costs, zone

    report = costs(LocalWorld(), [g.value for g in by or [CostGroup.day]], zone(tz))
    if json_:
        output.print_json(report)
    else:
        render.cost_table(report)


@app.command("status")
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
