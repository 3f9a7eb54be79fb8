"""How a record is laid out in the local log: the column lists of dh's dataclasses, the stored
row (a tuple in RECORD_COLUMNS order whose `raw` is as stored) and the codecs of `raw`. The
local log, the PostgreSQL world, the mirror and the search index all read rows through here;
nothing in this module opens a database."""

from __future__ import annotations

import os
import zlib
from dataclasses import fields

import lz4.block

from ..errors import LogDbError
from ..models import Record, Session, Source

RECORD_COLUMNS = [f.name for f in fields(Record)]
SOURCE_COLUMNS = [f.name for f in fields(Source)]
SESSION_COLUMNS = [f.name for f in fields(Session)]

# A stored row (RECORD_COLUMNS order, raw as stored with its codec) goes in as
# (source_id, generation, offset, text, packed, codec, ...): see storage_row(). The line lands in
# `raw` only when SQLite's own json_valid() accepts it, so no JSON function over `raw` can
# fail; everything else keeps its bytes in `packed`. session_id comes from the source's row.
_AFTER_RAW = RECORD_COLUMNS[4:]


def _param(name: str) -> str:
    return f"?{_AFTER_RAW.index(name) + 6}"


# A model call's price in USD (records.price_usd), from the token columns, by the dh_price()
# SQL function the local log registers (pricing.register_price).
_PRICE = "CASE WHEN {} IS NOT NULL THEN dh_price({}) END".format(
    _param("tokens_in"), ", ".join(_param(c) for c in (
        "model", "tokens_in", "tokens_cache_read", "tokens_cache_write", "tokens_cache_write_1h",
        "tokens_out", "tokens_reasoning")))
INSERT_RECORD = (
    "INSERT OR IGNORE INTO records (session_id, source_id, generation, \"offset\", raw, packed, {},"
    " price_usd)"
    " VALUES ((SELECT session_id FROM sources WHERE id = ?1), ?1, ?2, ?3,"
    " CASE WHEN json_valid(?4) THEN ?4 END,"
    " CASE WHEN ?4 IS NULL THEN ?5 WHEN json_valid(?4) THEN NULL ELSE CAST(?4 AS BLOB) END, {}, {})"
).format(", ".join(_AFTER_RAW), ", ".join(f"?{i + 6}" for i in range(len(_AFTER_RAW))), _PRICE)
# The stored bytes of a row, whichever column holds them (TEXT comes back as its UTF-8).
STORED_RAW = "COALESCE(CAST(raw AS BLOB), packed)"


def select_list(prefix: str = "") -> str:
    """RECORD_COLUMNS as a select list, raw as its stored bytes."""
    return ", ".join(STORED_RAW.replace("raw", prefix + "raw").replace("packed", prefix + "packed")
                     if c == "raw" else prefix + column(c) for c in RECORD_COLUMNS)


def storage_row(row: tuple) -> tuple:
    """A stored row as INSERT_RECORD takes it: a line stored as written goes in as text
    when it is UTF-8 without NUL and shorter than TEXT_MAX (json_valid decides the rest), any
    other bytes as packed."""
    raw, codec = row[3], row[4] or 0
    if codec == 0 and len(raw) < TEXT_MAX and b"\x00" not in raw:
        try:
            return row[:3] + (raw.decode("utf-8"), None, 0) + row[5:]
        except UnicodeDecodeError:
            pass
    return row[:3] + (None, bytes(raw), codec) + row[5:]


# A line stored as written from this size on goes in `packed` (its bytes, codec 0), not `raw`:
# SQLite's json_valid() of a 48 MB line peaked at 243 MB beside the line itself (its parse),
# and SQL reads no line this long anyway (the LZ4-packed ones are bytes too).
TEXT_MAX = 16 << 20

ROW_WIDTH = len(RECORD_COLUMNS)  # a tailer's row carries its search text after these

# Lines shorter than this are stored as they are, as text in `raw`, where SQL reads them (a
# person's query, datasette, the views); only longer ones (file contents, images) are packed.
PACK_MIN = 64 * 1024
# codec 0/None: stored as written; 1: raw deflate, 4 KiB window (logs written before m006);
# 2: LZ4 block with its size in front (m006 on). LZ4 packs JSON lines a little less tightly
# (the 100 MB bench log: 0.71x -> 0.76x of native) but costs a seventh of deflate's time to
# compress and half to inflate, which took import throughput past half a raw insert.
DEFLATE, LZ4 = 1, 2
_WBITS = -12


def encode_raw(raw: bytes) -> tuple[bytes, int]:
    """The bytes as stored, and their codec (0: as written, the one marker for that)."""
    if len(raw) < PACK_MIN:
        return raw, 0
    packed = lz4.block.compress(raw)
    return (packed, LZ4) if len(packed) < len(raw) else (raw, 0)


def max_record() -> int:
    """The most one record may decode to (DH_MAX_RECORD_MB, default 256): a world chose the
    bytes, and a small LZ4 block may declare, and expand to, a gigabyte."""
    try:
        return max(1, int(os.environ.get("DH_MAX_RECORD_MB") or 256)) * 1024 * 1024
    except ValueError:
        return 256 * 1024 * 1024


def decode_raw(data: bytes | str, codec: int | None) -> bytes:
    """A record's native bytes. An unknown codec, damaged compressed bytes or a record past
    max_record() (a row from a world) is one LogDbError, never bytes handed back as if they
    were native; an LZ4 block is refused on the size it declares, before it is expanded."""
    if isinstance(data, str):  # read from `raw` itself (a JSON line, stored as text)
        return data.encode("utf-8")
    try:
        if codec == LZ4:
            _check_size(int.from_bytes(bytes(data[:4]), "little"))
            return lz4.block.decompress(data)
        if codec == DEFLATE:
            inflater = zlib.decompressobj(_WBITS)
            out = inflater.decompress(data, max_record() + 1)
            _check_size(len(out))
            if not inflater.eof:
                raise zlib.error("the compressed stream is cut short")
            return out
    except (lz4.block.LZ4BlockError, zlib.error, ValueError) as exc:
        raise LogDbError(f"a record's compressed bytes are damaged (codec {codec}: {exc})",
                         hint="pull the session again from a good copy, or `dh log rm` it") from None
    if codec not in (None, 0):
        raise LogDbError(f"a record is stored with codec {codec!r}, which this dh does not know",
                         hint="upgrade dh, or `dh log rm` the session")
    return bytes(data)


def _check_size(size: int) -> None:
    if size > max_record():
        raise LogDbError(f"a record would decode to {size} bytes, more than the "
                         f"{max_record() // (1024 * 1024)} MB one record may hold (DH_MAX_RECORD_MB)",
                         hint="the session is damaged or was not written by dh: `dh log rm` it")


def record_row(record: Record | tuple) -> tuple:
    """A record as the row tuple the log stores, its raw bytes encoded. The tailer passes
    ready tuples (built without a dataclass: this is the hot path of every import), already
    encoded when their codec slot is set."""
    row = record if isinstance(record, tuple) else tuple(getattr(record, c) for c in RECORD_COLUMNS)
    if row[4] is not None:
        return row
    raw, codec = encode_raw(row[3])
    return row[:3] + (raw, codec) + row[5:]


def encode_rows(rows: list[tuple]) -> list[tuple]:
    """Encode a batch of row tuples; codec 0 marks a row already stored as it is."""
    out = []
    for row in rows:
        raw, codec = encode_raw(row[3])
        out.append(row[:3] + (raw, codec) + row[5:])
    return out


def column(name: str) -> str:
    """A column name from dh's own dataclasses, quoted (`offset` is an SQL keyword)."""
    if not name.isidentifier():
        raise ValueError(f"not a column name: {name!r}")
    return f'"{name}"'


def position_range(after, upto) -> tuple[str, list]:
    """SQL for positions after `after` and up to `upto` (both (generation, offset) or None)."""
    clause, args = "", []
    if after is not None:
        clause += " AND (generation, offset) > (?, ?)"
        args += list(after)
    if upto is not None:
        clause += " AND (generation, offset) <= (?, ?)"
        args += list(upto)
    return clause, args


def stored_rows(source: Source, records: list[Record]) -> list[tuple]:
    """Records (plain raw bytes) as stored rows of `source` in some world: encoded afresh."""
    rows = (tuple(getattr(r, c) for c in RECORD_COLUMNS) for r in records)
    return [record_row((source.id,) + row[1:4] + (None,) + row[5:]) for row in rows]
