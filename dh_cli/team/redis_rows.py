"""A record row as the Redis world keeps it: its key (generation:offset) and a value of its
columns as JSON, a newline, then its stored bytes. Any JSON can be there, so a row is read
back only when its columns are the Record's, each of its type."""

from __future__ import annotations

from dataclasses import fields

import orjson

from ..errors import DamagedRow
from ..models import Record
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
