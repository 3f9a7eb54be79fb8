"""Columns added to the log after records were written, filled from the native lines
(used by migration m008): a tool result's status, the mark of a turn's first record, and the
model of calls whose usage line does not name it (the tailer fills them for new lines)."""

from __future__ import annotations

import sqlite3

from ..errors import UnknownHarness
from ..wrappers import get as get_wrapper
from .rows import RECORD_COLUMNS, STORED_RAW, decode_raw


def fill_status_and_model(conn: sqlite3.Connection) -> None:
    sources = conn.execute("SELECT o.id, s.harness FROM sources o"
                           " JOIN sessions s ON s.id = o.session_id").fetchall()
    for source_id, harness in sources:
        try:
            wrapper = get_wrapper(harness)
        except UnknownHarness:  # a harness this dh does not know: its rows keep NULL
            continue
        conn.executemany("UPDATE records SET status = ?, turn_start = ?, model = COALESCE(model, ?)"
                         " WHERE id = ?",
                         list(_updates(conn, wrapper, source_id)))


def _updates(conn, wrapper, source_id: int):
    model = None
    rows = conn.execute(f"SELECT id, {STORED_RAW}, codec, tokens_in FROM records"
                        " WHERE source_id = ? ORDER BY generation, \"offset\"", [source_id])
    for row_id, stored, codec, tokens_in in rows:
        parsed = wrapper.parse(decode_raw(stored, codec))
        if parsed.model and not parsed.usage:
            model = parsed.model
        result = parsed.tool_results[0] if parsed.tool_results else None
        status = ("error" if result.is_error else "ok") if result else None
        filled = model if tokens_in is not None and not parsed.model else None
        if status or filled or parsed.turn_start:
            yield status, 1 if parsed.turn_start else None, filled, row_id


def fill_tokens_and_tools(conn: sqlite3.Connection) -> None:
    """m035's columns for what was logged before it, and every call's usage in the one token
    vocabulary (tokens.py), each read again from its native line: all token kinds; the usage
    of every row of a streamed message (the views count its last row); a tool call's input
    and the opening of a tool result."""
    sources = conn.execute("SELECT o.id, s.harness FROM sources o"
                           " JOIN sessions s ON s.id = o.session_id").fetchall()
    for source_id, harness in sources:
        try:
            wrapper = get_wrapper(harness)
        except UnknownHarness:
            continue
        conn.executemany(
            "UPDATE records SET tokens_in = ?, tokens_out = ?, tokens_cache_read = ?,"
            " tokens_cache_write = ?, tokens_cache_write_1h = ?, tokens_reasoning = ?,"
            " model = COALESCE(model, ?), msg_id = COALESCE(msg_id, ?), tool_input = ?,"
            " tool_output = ? WHERE id = ?", list(_token_updates(conn, wrapper, source_id)))


def _token_updates(conn, wrapper, source_id: int):
    from ..wrappers.record_row import to_record

    rows = conn.execute(f"SELECT id, {STORED_RAW}, codec, tokens_in FROM records WHERE source_id = ?"
                        " AND (tokens_in IS NOT NULL OR role = 'assistant' OR tool_name IS NOT NULL"
                        " OR status IS NOT NULL)", [source_id])
    for row_id, stored, codec, tokens_in in rows:
        parsed = wrapper.parse(decode_raw(stored, codec))
        if parsed.usage is None and tokens_in is not None:
            continue  # usage dh found some other way (an OpenCode export): kept as it is
        row = dict(zip(RECORD_COLUMNS, to_record(parsed, source_id, 0, 0, b"")))
        if parsed.usage or row["tool_input"] or row["tool_output"]:
            yield (*(row[c] for c in _FILLED), row_id)


_FILLED = ("tokens_in", "tokens_out", "tokens_cache_read", "tokens_cache_write",
           "tokens_cache_write_1h", "tokens_reasoning", "model", "msg_id", "tool_input", "tool_output")
