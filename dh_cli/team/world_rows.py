"""Rows read back from a team world, checked: any member of the team may have written them,
and a row that is not what dh writes is DamagedRow, which fails its own session's copy only
(team/sync.py). A Redis record row is its key (generation:offset) and a value of its columns
as JSON, a newline, then its stored bytes; an event is JSON in Redis, its details JSON text
in PostgreSQL."""

from __future__ import annotations

from dataclasses import fields

import orjson

from ..errors import DamagedRow
from ..models import Event, Record, Session, Source
from ..workspace.store import Snapshot


def read_row(source_id: int, key: bytes, value: bytes | None) -> tuple:
    """A stored row from its key and value. Redis keeps the columns as JSON, so any JSON can
    be there: a row whose columns are not the Record's, each of its type, is DamagedRow."""
    generation, offset = position(key)
    try:
        head, raw = value.split(b"\n", 1)
    except (ValueError, AttributeError):
        raise DamagedRow(f"record {_shown(key)} is not a row dh wrote") from None
    return (source_id, generation, offset, raw, *columns_of(head, RECORD_KINDS, f"record {_shown(key)}"))


def position(key: bytes) -> tuple[int, int]:
    """(generation, offset) from a record's key."""
    try:
        generation, offset = map(int, key.split(b":"))
    except ValueError:
        raise DamagedRow(f"record {_shown(key)} is not a row dh wrote") from None
    return generation, offset


def _shown(key: bytes) -> str:
    return key.decode("utf-8", "backslashreplace")


def _kinds(cls, skip: int = 0) -> list[tuple[str, type]]:
    """(name, int or str) of each field of cls from `skip` on: what its JSON row holds. An
    int column takes a whole number (a bool is none), a text column a string, any a null
    (the local log's columns may hold NULL where the dataclass says otherwise)."""
    return [(f.name, int if f.type.startswith("int") else str) for f in fields(cls)[skip:]]


RECORD_KINDS = _kinds(Record, 4)  # after source_id, generation, offset, raw
SESSION_KINDS, SOURCE_KINDS, SNAPSHOT_KINDS = _kinds(Session), _kinds(Source, 1), _kinds(Snapshot)


def columns_of(value: bytes, kinds: list, what: str) -> list:
    """The JSON row's columns, each of its kind; DamagedRow naming `what` otherwise."""
    try:
        row = orjson.loads(value)
    except (orjson.JSONDecodeError, TypeError):
        row = None
    wrong = _wrong_column(row, kinds)
    if wrong:
        raise DamagedRow(f"{what} {wrong}")
    return row


def _wrong_column(row, kinds: list) -> str | None:
    if not isinstance(row, list) or len(row) != len(kinds):
        return "is not a row dh wrote"
    for (name, kind), value in zip(kinds, row):
        if value is not None and type(value) is not kind:
            return f"has a {type(value).__name__} in its {name} column"
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


def session_of(value: bytes, sid: str = "") -> Session:
    """A session from its JSON row (`sid`: its id, to name it when the row is damaged)."""
    return Session(*columns_of(value, SESSION_KINDS, f"the row of session {sid}".rstrip()))


def damaged(sid: str) -> Session:
    """What a listing shows for a session whose row is damaged: its id and that state (the
    session itself is refused by name wherever it is read: get_session)."""
    return Session(sid, "", state="damaged")


def in_order(found) -> list[tuple[str, Session | DamagedRow]]:
    """(id, its session, or why its row is damaged) by creation, as sessions() lists them."""
    out = []
    for key, value in found:
        sid = key.decode("utf-8", "backslashreplace") if isinstance(key, bytes) else key
        try:
            out.append((sid, session_of(value, sid)))
        except DamagedRow as exc:
            out.append((sid, exc))
    return sorted(out, key=lambda pair: (getattr(pair[1], "created_at", "") or "", pair[0]))


def event_seqs(keys: list[bytes]) -> list[int]:
    """The seqs of a session's events from their keys (Redis keeps them so)."""
    try:
        return [int(k) for k in keys]
    except ValueError:
        raise DamagedRow("an event of it is under a key that is no number") from None


def source_of(found: bytes, value: bytes | None, relpath: str) -> Source:
    """A source from its id and its JSON row."""
    try:
        source_id = int(found)
    except ValueError:
        raise DamagedRow(f"the source {relpath} has no id dh gave") from None
    return Source(source_id, *columns_of(value, SOURCE_KINDS, f"the source {relpath}"))


def snapshot_rows(values: list[bytes], after_seq: int) -> list[tuple]:
    """Workspace snapshot rows after `after_seq`, in order, from their JSON rows."""
    rows = [tuple(columns_of(v, SNAPSHOT_KINDS, "a workspace snapshot")) for v in values]
    if any(r[1] is None for r in rows):
        raise DamagedRow("a workspace snapshot has no number")
    return sorted((r for r in rows if r[1] > after_seq), key=lambda r: r[1])


def object_row(digest: str, value: bytes) -> tuple:
    """A workspace object row (hash, kind, size, codec, data) from its value: its kind, size
    and codec as JSON, a newline, its stored bytes."""
    try:
        head, data = value.split(b"\n", 1)
        kind, size, codec = orjson.loads(head)
    except (ValueError, TypeError, orjson.JSONDecodeError):
        raise DamagedRow(f"the workspace object {digest[:12]} is not one dh wrote") from None
    return (digest, kind, size, codec, data)
