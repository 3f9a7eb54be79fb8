"""Rows read back from a team world, checked: any member of the team may have written them,
and a row that is not what dh writes is DamagedRow, which fails its own session's copy only
(team/sync.py). A Redis record row is its key (generation:offset) and a value of its columns
as JSON, a newline, then its stored bytes; an event is JSON in Redis, its details JSON text
in PostgreSQL."""

from __future__ import annotations

from dataclasses import fields

import orjson

from ..errors import DamagedRow
from ..models import Event, Record
from ..worlds.rows import RECORD_COLUMNS


def read_row(source_id: int, key: bytes, value: bytes | None) -> tuple:
    """A stored row from its key and value. Redis keeps the columns as JSON, so any JSON can
    be there: a row whose columns are not the Record's, each of its type, is DamagedRow."""
    try:
        generation, offset = map(int, key.split(b":"))
        head, raw = value.split(b"\n", 1)
        columns = orjson.loads(head)
    except (ValueError, AttributeError, orjson.JSONDecodeError):
        raise DamagedRow(f"record {_shown(key)} is not a row dh wrote") from None
    wrong = _wrong_column(columns)
    if wrong:
        raise DamagedRow(f"record {_shown(key)} has {wrong}")
    return (source_id, generation, offset, raw, *columns)


def _shown(key: bytes) -> str:
    return key.decode("utf-8", "backslashreplace")


# after raw: int columns take a whole number (bool is none), text columns a string; any may be null
_KINDS = [(name, int if f.type.startswith("int") else str)
          for name, f in zip(RECORD_COLUMNS[4:], fields(Record)[4:])]


def _wrong_column(columns) -> str | None:
    if not isinstance(columns, list) or len(columns) != len(_KINDS):
        return "not the columns of a record"
    for (name, kind), value in zip(_KINDS, columns):
        if value is not None and (type(value) is not kind):
            return f"a {type(value).__name__} in its {name} column"
    return None


_EVENT_KINDS = (str, int, str, (int, type(None)), str, (str, type(None)), dict)


def details_of(text: str | None, seq: int) -> dict:
    """An event's details from their JSON text (PostgreSQL keeps them so)."""
    try:
        value = orjson.loads(text or "{}")
    except orjson.JSONDecodeError:
        value = None
    if not isinstance(value, dict):
        raise DamagedRow(f"event {seq} has details that are no JSON object")
    return value


def events_of(values: list[bytes], after_seq: int) -> list[Event]:
    """Events after `after_seq`, in order, from their JSON rows (Redis keeps them so)."""
    out = []
    for value in values:
        try:
            row = orjson.loads(value)
        except orjson.JSONDecodeError:
            row = None
        if not isinstance(row, list) or len(row) != len(_EVENT_KINDS) or type(row[1]) is not int \
                or not all(isinstance(v, kind) for v, kind in zip(row, _EVENT_KINDS)):
            raise DamagedRow("an event of it is not one dh wrote")
        if row[1] > after_seq:
            out.append(Event(*row))
    return sorted(out, key=lambda e: e.seq)
