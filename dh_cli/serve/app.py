"""The web app of `dh serve`: its routes, each a read of the log (reads.py) or the world
(team.py) drawn by pages.py, behind the guard (guard.py). Every route is GET; each request
opens the log read-only and closes it, so any number of dh processes go on writing."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from ..errors import DhError, SessionNotFound, UsageError
from . import live, pages, reads
from .guard import Guard, GuardMiddleware


MAX_STREAMS = 32  # a tab holds one; 400 took every descriptor of a 1,024 limit


@dataclass
class Options:
    log: Path
    guard: Guard
    world: str | None = None  # a team world (postgres, redis) beside the log
    url: str | None = None
    stream_seconds: float = 300.0  # a stream's lifetime (the browser reconnects from its cursor)
    max_streams: int = MAX_STREAMS
    streams: int = 0  # open now


class StreamsFull(DhError):
    """More event streams than max_streams are open (each holds a descriptor and a reader)."""


def create_app(options: Options) -> GuardMiddleware:
    routes = [
        Route("/", _handler(options, _sessions)),
        Route("/rows", _handler(options, _rows)),
        Route("/events/list", _handler(options, _list_events)),
        Route("/s/{ref}", _handler(options, _session)),
        Route("/s/{ref}/trace", _handler(options, _trace)),
        Route("/s/{ref}/events", _handler(options, _session_events)),
        Route("/s/{ref}/documents", _handler(options, _documents)),
        Route("/team", _handler(options, _team)),
        Route("/cost", _handler(options, _cost)),
        Route("/static/trace.css", _trace_css),
        Mount("/static", StaticFiles(packages=[(__package__, "static")]), name="static"),
    ]
    # the guard outermost: even a 500 answered by Starlette's error layer carries its headers
    return GuardMiddleware(Starlette(routes=routes, exception_handlers=ERRORS), options.guard)


def _handler(options: Options, endpoint):
    async def handle(request: Request) -> Response:
        return await endpoint(options, request)
    return handle


def _error(status: int, text: str) -> HTMLResponse:
    return HTMLResponse(pages.error_page(status, text), status)


async def _not_found(request: Request, exc: SessionNotFound) -> Response:
    return _error(404, str(exc))


async def _refused(request: Request, exc: UsageError) -> Response:
    return _error(400, str(exc))


async def _busy(request: Request, exc: StreamsFull) -> Response:
    return PlainTextResponse(str(exc) + "\n", 503, headers={"retry-after": "10"})


async def _unavailable(request: Request, exc: DhError) -> Response:
    return _error(503, str(exc))


async def _http(request: Request, exc: HTTPException) -> Response:
    return _error(exc.status_code, exc.detail)


ERRORS = {SessionNotFound: _not_found, UsageError: _refused, StreamsFull: _busy, DhError: _unavailable,
          HTTPException: _http}


def _stream(options: Options, events):
    """An event stream of `events`, counted against max_streams while it is open."""
    from sse_starlette.sse import EventSourceResponse

    if options.streams >= options.max_streams:
        raise StreamsFull(f"{options.streams} event streams are open already")

    async def counted():  # counted from its first step, so that every count has its finally
        options.streams += 1
        try:
            async for event in events:
                yield event
        finally:
            options.streams -= 1
            await events.aclose()

    return EventSourceResponse(counted(), ping=15)


def _with_log(options: Options, read):
    """read(world) on a read-only connection of its own, in a worker thread."""
    def run():
        world = reads.open_log(options.log)
        try:
            return read(world)
        finally:
            world.close()
    return run_in_threadpool(run)


def _holdings(options: Options) -> dict | None:
    if options.world is None:
        return None
    from . import team

    world = team.open_world(options.world, options.url)
    try:
        return team.holdings_of(world)
    finally:
        world.close()


# the list ---------------------------------------------------------------------------------------
async def _sessions(options: Options, request: Request) -> Response:
    filters = reads.Filters.of(request.query_params)
    held = await run_in_threadpool(_holdings, options)
    page, harnesses = await _with_log(options, lambda w: (reads.list_page(w, filters, held),
                                                          w.harness_names()))
    stream = "/events/list"
    return HTMLResponse(pages.list_page(page, filters, harnesses, options.world, stream))


async def _rows(options: Options, request: Request) -> Response:
    """The list's rows and count alone, for the page to swap in when the log changed."""
    filters = reads.Filters.of(request.query_params)
    held = await run_in_threadpool(_holdings, options)
    page = await _with_log(options, lambda w: reads.list_page(w, filters, held))
    return JSONResponse({"rows": pages.session_rows(page, options.world is not None),
                         "total": page["total"]})


async def _list_events(options: Options, request: Request) -> Response:
    return _stream(options, live.list_changes(options.log, options.stream_seconds))


# one session --------------------------------------------------------------------------------------
def _page_number(request: Request) -> int:
    try:
        return max(1, min(1_000_000, int(request.query_params.get("page") or 1)))
    except ValueError:
        return 1


def _turn_number(request: Request) -> int | None:
    value = request.query_params.get("turn") or ""
    return int(value) if value.isdigit() and len(value) < 10 else None


async def _session(options: Options, request: Request) -> Response:
    ref, page, turn = request.path_params["ref"], _page_number(request), _turn_number(request)
    words = (request.query_params.get("q") or "").strip()[:500]

    def read(world):
        data = reads.session_page(world, ref, page, _page_link(world, ref), turn)
        data["hits"] = reads.session_search(world, ref, words) if words else None
        return data

    data = await _with_log(options, read)
    sid = quote(data["session"]["id"], safe="")
    data["q"] = words
    stream = f"/s/{sid}/events?after={data['cursor']}"
    return HTMLResponse(pages.session_page(data, stream, f"/s/{sid}/documents"))


async def _trace(options: Options, request: Request) -> Response:
    """The trace alone (the page swaps it in when the log changed)."""
    ref, page, turn = request.path_params["ref"], _page_number(request), _turn_number(request)
    data = await _with_log(options, lambda w: reads.session_page(w, ref, page, _page_link(w, ref), turn))
    return HTMLResponse(data["trace"])


async def _documents(options: Options, request: Request) -> Response:
    """The documents column alone (the session page fetches it once drawn)."""
    ref = request.path_params["ref"]
    return HTMLResponse(await _with_log(options, lambda w: reads.documents(w, ref)))


def _page_link(world, ref: str):
    sid = world.find_session(ref).id
    return lambda n: f"/s/{quote(sid, safe='')}?page={n}"


async def _session_events(options: Options, request: Request) -> Response:
    ref = request.path_params["ref"]
    sid = await _with_log(options, lambda w: w.find_session(ref).id)
    cursor = (reads.parse_cursor(request.headers.get("last-event-id"))
              or reads.parse_cursor(request.query_params.get("after")) or (0, 0))
    return _stream(options, live.session_news(options.log, sid, cursor, options.stream_seconds))


# the cost ------------------------------------------------------------------------------------------
async def _cost(options: Options, request: Request) -> Response:
    from .cost import cost_page, day_of

    since = day_of(request.query_params.get("since"), "from")
    until = day_of(request.query_params.get("until"), "to")
    report = await _with_log(options, lambda w: cost_page(w, since, until))
    return HTMLResponse(pages.cost_page(report))


# the team ------------------------------------------------------------------------------------------
async def _team(options: Options, request: Request) -> Response:
    if options.world is None:
        return HTMLResponse(pages.team_page(None))
    from . import team

    def read():
        world = team.open_world(options.world, options.url)
        local = reads.open_log(options.log) if options.log.exists() else None
        try:
            return team.team(world, local)
        finally:
            world.close()
            if local is not None:
                local.close()

    return HTMLResponse(pages.team_page(await run_in_threadpool(read), options.world))


# files of this package ------------------------------------------------------------------------------
async def _trace_css(request: Request) -> Response:
    """The HTML export's own styles (one renderer, one look), served as a file."""
    from ..logviews.tracehtml import stylesheet

    return Response(stylesheet(), media_type="text/css", headers={"cache-control": "no-cache"})
