"""Reading and appending the records of the local log: in native order, as the raw bytes a
rebuild writes back, as stored rows a push copies, and the counts the mirror and the views ask."""

from __future__ import annotations

import os
from collections import deque
from typing import Callable, Iterator

from ..models import Record, Source
from ..tokens import KINDS
from .rows import (DEFLATE, INSERT_RECORD, LZ4, ROW_WIDTH, STORED_RAW, decode_raw, position_range,
                   select_list, storage_row, stored_rows)

READ_ROWS = 1024  # rows per rebuild batch: writev takes at most IOV_MAX (1024) parts
# bytes per rebuild batch once decoded: a batch is decoded whole, and several are in flight
BATCH_BYTES = 16 << 20
DECODE_THREADS = min(4, os.cpu_count() or 1)


def decode_rows(rows: list[tuple]) -> list[bytes]:
    return [decode_raw(raw, codec) if codec else raw for raw, codec in rows]


def decoded_size(stored: bytes, codec: int | None) -> int:
    """What a stored row decodes to, for sizing batches: an LZ4 block says it in front; a
    deflate stream (logs before m006) is taken at its worst plausible ratio."""
    if codec == LZ4:
        return int.from_bytes(stored[:4], "little")
    return len(stored) * (16 if codec == DEFLATE else 1)


def stored_batches(cursor) -> Iterator[list[tuple]]:
    """Stored (bytes, codec) rows in batches of at most READ_ROWS rows and BATCH_BYTES once
    decoded; a row larger than that is a batch of its own, handed on before the next row is
    fetched, so at most one such record is in memory at a time."""
    batch, size = [], 0
    for row in cursor:
        grows = decoded_size(*row)
        if batch and (len(batch) >= READ_ROWS or size + grows > BATCH_BYTES):
            yield batch
            batch, size = [], 0
        if grows > BATCH_BYTES:
            yield [row]
            del row  # released before the cursor fetches the next one
            continue
        batch.append(row)
        size += grows
    if batch:
        yield batch


def decoded_batches(batches: Iterator[list[tuple]]) -> Iterator[list[bytes]]:
    """Each batch decoded, in order. Compressed lines are decompressed on helper threads
    (LZ4 and zlib let go of the GIL) while this one fetches the next rows; a batch of one
    large record is decoded here once those before it are out, so two are never held; a
    session of one small batch needs no threads."""
    pool, held, pending = None, None, deque()
    try:
        for rows in batches:
            if len(rows) == 1 and decoded_size(*rows[0]) > BATCH_BYTES:
                yield from _drained(held, pending)
                held = None
                yield decode_rows(rows)
            elif pool is None and held is None:
                held = rows  # decoded here if no other small batch follows
            else:
                pool = pool or _decode_pool()
                if held is not None:
                    pending.append(pool.submit(decode_rows, held))
                    held = None
                pending.append(pool.submit(decode_rows, rows))
                if len(pending) > 2 * DECODE_THREADS:
                    yield pending.popleft().result()
            del rows  # released before the next row is fetched
        yield from _drained(held, pending)
    finally:
        if pool is not None:
            pool.shutdown()


def _decode_pool():
    from concurrent.futures import ThreadPoolExecutor  # not on the live path

    return ThreadPoolExecutor(DECODE_THREADS)


def _drained(held: list[tuple] | None, pending: deque) -> Iterator[list[bytes]]:
    if held is not None:
        yield decode_rows(held)
    while pending:
        yield pending.popleft().result()


def insert_rows(conn, rows: list[tuple]) -> int:
    """Insert stored rows, and index the search text a row carries after its columns (the
    tailer's rows do: see wrappers/base.py search_text) in the same transaction. Only rows
    added now are indexed: their ids are above the largest before the insert. Rows without
    that text (pulled from another world) are parsed again to index them."""
    untexted = any(len(row) == ROW_WIDTH for row in rows)
    texted = not untexted and any(row[ROW_WIDTH] for row in rows)
    # the largest id before, only when there is text to index (a live sync of records
    # without text, e.g. Pi's custom entries, saves that statement)
    top = conn.execute("SELECT COALESCE(MAX(id), 0) FROM records").fetchone()[0] \
        if untexted or texted else 0
    # the rows this statement added (total_changes would count what triggers change too)
    added = conn.executemany(INSERT_RECORD, [storage_row(row[:ROW_WIDTH]) for row in rows]).rowcount
    if not added:
        return 0
    _drop_digests(conn, {row[0] for row in rows})
    if untexted:
        from .search import index_records

        index_records(conn, top)
    elif texted:
        _index_texts(conn, rows, top, added)
    return added


def _drop_digests(conn, source_ids: set[int]) -> None:
    """What `dh log list` kept of the sessions these sources belong to is made again
    (worlds/migrations.py m045, m050)."""
    marks = ", ".join("?" * len(source_ids))
    conn.execute(f"DELETE FROM session_digests WHERE session_id IN"
                 f" (SELECT session_id FROM sources WHERE id IN ({marks}))", list(source_ids))


def _index_texts(conn, rows: list[tuple], top: int, added: int) -> None:
    """When every row went in and the largest id is now `top` + their number, SQLite gave
    them the ids after `top` in order (ids grow with each insert), so each text goes in
    under its id. Else (OR IGNORE kept some out) each is found by its place. Indexing the
    15,040 records of a 21 MB transcript took 0.31 s by insert ... select, 0.07 s by id."""
    from .search import INDEX_TEXT, INDEX_TEXT_AT

    if added == len(rows) and conn.execute("SELECT MAX(id) FROM records").fetchone()[0] == top + added:
        conn.executemany(INDEX_TEXT_AT, [(top + n, row[ROW_WIDTH])
                                         for n, row in enumerate(rows, 1) if row[ROW_WIDTH]])
    else:
        conn.executemany(INDEX_TEXT, [row[:3] + (row[ROW_WIDTH], top) for row in rows if row[ROW_WIDTH]])


# the model_calls view's columns, in tokens.KINDS order
_TOKEN_COLUMNS = ("tokens_in", "tokens_cache_read", "tokens_cache_write", "tokens_cache_write_1h",
                  "tokens_out", "tokens_reasoning")

class LocalRecords:
    """Mixed into LocalWorld: needs self.conn, self._write() and self.get_source()."""

    def records(self, session_id: str, source_id: str | None = None,
                generation: int | None = None, from_offset: int = 0) -> Iterator[Record]:
        """Records of a session in native order: by source, generation, then byte offset.
        Read source by source along the records' (source, generation, offset) index: one
        query joined and ordered over the session sorted every row, its bytes included,
        before the first came out (a session of 200 MB of lines took 190 MB more)."""
        clause, args = ("", []) if source_id is None else (" AND id = ?", [source_id])
        sources = self.conn.execute(f"SELECT id FROM sources WHERE session_id = ?{clause}"
                                    " ORDER BY rowid", [session_id] + args).fetchall()
        for (source,) in sources:
            yield from self._source_records(source, generation, from_offset)

    def _source_records(self, source_id: int, generation: int | None,
                        from_offset: int) -> Iterator[Record]:
        clause, args = ("", []) if generation is None else (" AND generation = ?", [generation])
        cursor = self.conn.execute(
            f"SELECT {select_list()} FROM records WHERE source_id = ? AND offset >= ?{clause}"
            " ORDER BY generation, offset", [source_id, from_offset] + args)
        for row in cursor:
            record = Record(*row)
            record.raw = decode_raw(record.raw, record.codec)
            yield record
            del record, row  # a record may be huge: let it go before the next one is read

    def records_kept(self, session_id: str, source_id: int, generation: int,
                     keep: Callable[[bytes], bool]) -> Iterator[Record]:
        """The generation's records, in order, whose native bytes keep(bytes) wants (asked
        one record at a time, in order, so it may change its mind on the way): the bytes
        alone are read for the others, no record made of them (a long session's documents
        column read all 200,832 records whole: 5.3 s)."""
        cursor = self.conn.execute(f'SELECT id, {STORED_RAW}, codec FROM records WHERE source_id = ?'
                                   ' AND generation = ? ORDER BY "offset"', [source_id, generation])
        for record_id, stored, codec in cursor:
            raw = decode_raw(stored, codec)
            if keep(raw):
                row = self.conn.execute(f"SELECT {select_list()} FROM records WHERE id = ?",
                                        [record_id]).fetchone()
                yield Record(*row[:3], raw, *row[4:])

    def raw_lines(self, source_id: int, generation: int) -> Iterator[bytes]:
        """Just the native bytes of one generation, in order."""
        for batch in self.raw_batches(source_id, generation):
            yield from batch

    def raw_batches(self, source_id: int, generation: int) -> Iterator[list[bytes]]:
        """The native bytes of one generation in order, as batches of at most IOV_MAX lines:
        the fast path for rebuilds (see decoded_batches)."""
        cursor = self.conn.execute(
            f"SELECT {STORED_RAW}, codec FROM records WHERE source_id = ? AND generation = ?"
            " ORDER BY offset",
            [source_id, generation])
        return decoded_batches(stored_batches(cursor))

    def last_offset_of_kind(self, source_id: int, generation: int, kind: str) -> int:
        row = self.conn.execute(
            "SELECT MAX(offset) FROM records WHERE source_id = ? AND generation = ? AND kind = ?",
            [source_id, generation, kind]).fetchone()
        return row[0] or 0

    def finished_calls(self, source_id: int) -> int:
        """Tool calls with a result in the source's latest generation, by call id: a result
        is its own record in JSONL harnesses, a version of the call's part row in OpenCode
        (so counting result records said 0 for every OpenCode resume)."""
        return self.conn.execute(
            "SELECT COUNT(DISTINCT tool_call_id) FROM records WHERE source_id = ?"
            " AND status IS NOT NULL AND tool_call_id IS NOT NULL AND tool_call_id <> ''"
            " AND generation = (SELECT MAX(generation) FROM records WHERE source_id = ?)",
            [source_id, source_id]).fetchone()[0]

    def record_count(self, session_id: str) -> int:
        return self.conn.execute(
            "SELECT COUNT(*) FROM records r JOIN sources o ON o.id = r.source_id"
            " WHERE o.session_id = ?", [session_id]).fetchone()[0]

    def latest_generation(self, source_id: str) -> int | None:
        return self.conn.execute("SELECT MAX(generation) FROM records WHERE source_id = ?",
                                 [source_id]).fetchone()[0]

    def source_stats(self, source_id: str) -> tuple[int, int]:
        """(number of generations, number of records) logged for a source."""
        return self.conn.execute(
            "SELECT COUNT(DISTINCT generation), COUNT(*) FROM records WHERE source_id = ?",
            [source_id]).fetchone()

    def token_totals(self, session_id: str) -> dict:
        """Token usage summed once per model call (the `model_calls` view decides what one
        call is), in the kinds of tokens.py, with the number of calls."""
        row = self.conn.execute(
            f"SELECT {', '.join(f'COALESCE(SUM({c}), 0)' for c in _TOKEN_COLUMNS)}, COUNT(*)"
            " FROM model_calls WHERE session_id = ?", [session_id]).fetchone()
        return {**dict(zip(KINDS, row)), "model_calls": row[-1]}

    def append_rows(self, rows: list[tuple]) -> int:
        """Stored rows (RECORD_COLUMNS order, raw as stored, source_id this log's), in one
        transaction; rows already present are skipped. Also the tests' bulk-insert helper."""
        with self._write() as conn:
            return insert_rows(conn, rows)

    def append_records(self, source: Source, records: list[Record]) -> int:
        return self.append_rows(stored_rows(source, records))

    def read_rows(self, source: Source, after=None, upto=None, as_source_id: int | None = None,
                  chunk: int = 50_000) -> Iterator[list[tuple]]:
        """Stored rows of a source in order, with `as_source_id` in the source_id column (the
        id the receiving world gave the source), so they can be appended there as they are."""
        clause, args = position_range(after, upto)
        cursor = self.conn.execute(
            f"SELECT ?, {select_list().split(', ', 1)[1]} FROM records WHERE source_id = ?{clause}"
            " ORDER BY generation, offset",
            [source.id if as_source_id is None else as_source_id, source.id] + args)
        while batch := cursor.fetchmany(chunk):
            yield batch

    def read_records(self, session_id: str, relpath: str, after=None,
                     limit: int | None = None) -> list[Record]:
        source = self.get_source(session_id, relpath)
        if source is None:
            return []
        clause, args = position_range(after, None)
        rows = self.conn.execute(
            f"SELECT {select_list()} FROM records WHERE source_id = ?{clause}"
            " ORDER BY generation, offset LIMIT ?", [source.id] + args + [-1 if limit is None else limit])
        return [Record(*row[:3], decode_raw(row[3], row[4]), *row[4:]) for row in rows]

    def count_upto(self, source: Source, last) -> int:
        return self.conn.execute("SELECT COUNT(*) FROM records WHERE source_id = ?"
                                 " AND (generation, offset) <= (?, ?)", [source.id, *last]).fetchone()[0]
