"""`dh log` commands that carry a session out of the log: export (md, html, jsonl, otlp) and
trace (to an OpenTelemetry backend)."""

import sys
from enum import Enum
from pathlib import Path
from typing import Annotated, Optional

import typer

from .. import output
from ..logviews.export import export_stream
from ..outfile import write_output
from ..redact import clean_bytes
from ..worlds.local import LocalWorld
from ..errors import UsageError
from .args import JsonOpt, SecretsOpt, SessionArg


class ExportFormat(str, Enum):
    md = "md"
    html = "html"
    jsonl = "jsonl"
    otlp = "otlp"


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
        from ..logviews.otel import emit_session
        from ..logviews.otel_export import JsonLinesExporter

        emit_session(world, found, JsonLinesExporter(sys.stdout))
    elif out is None:
        for chunk in export_stream(world, found, format_.value):
            sys.stdout.buffer.write(clean_bytes(chunk, show_secrets, terminal))
        sys.stdout.buffer.flush()
    else:
        parts = (clean_bytes(part, show_secrets) for part in export_stream(world, found, format_.value))
        size = write_output(out, parts, output.note)  # 0600, a regular file only (outfile.py)
        output.note(f"dh: wrote {out} ({size:,} bytes)")


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
    for number, data in enumerate(pages(view, turns, per_page, name if out else None, docs, show_secrets), 1):
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
    from ..logviews.otel_export import send_session

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
