"""`dh log` commands that read the log: list, search, show (or follow), docs, schema, cost."""

from enum import Enum
from pathlib import Path
from typing import Annotated, Optional

import typer

from .. import liveness, output
from ..logviews import render
from ..logviews.follow import follow
from ..logviews.logview import select_turns, stream_items, view_header
from ..redact import clean, clean_bytes, clean_view
from ..worlds.local import LocalWorld
from .. import team
from .args import HarnessOpt, JsonOpt, SecretsOpt, SessionArg, StateOpt


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
        del record  # a record may be huge: let it go before the next one is read


def _follow(world, session_id: str, json_: bool, show_secrets: bool = False) -> None:
    """Runs until Ctrl-C, which ends it with 130 and no traceback."""
    output.note(f"dh: following session {session_id} (Ctrl-C to stop)")
    terminal = output.is_terminal()
    try:
        for update in follow(world, session_id):
            render.follow_update(clean(update, show_secrets, terminal), json_)
    except KeyboardInterrupt:
        raise typer.Exit(130) from None


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


def log_cost(
    by: Annotated[Optional[list[CostGroup]], typer.Option("--by", help="Group by day, session, harness or model (repeat to group by several; default: day)")] = None,
    tz: Annotated[Optional[str], typer.Option("--tz", help="Time zone of the days, an IANA name such as Europe/Paris or UTC (default: this machine's)")] = None,
    json_: JsonOpt = False,
) -> None:
    """Show what the model calls of every session cost, across every harness in one table.

    Each call is counted once, its tokens in one vocabulary for every harness (uncached input,
    cache reads, 5-minute and 1-hour cache writes, output with its reasoning) and priced from
    the genai-prices table; a model the table does not know is counted but not priced. When dh
    relaunched a session, RE-CACHE is the input of each resume's first call and SAVED the calls
    of a cut turn a resume kept from being billed again, in the group of each call.

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
