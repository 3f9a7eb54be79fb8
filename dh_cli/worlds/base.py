"""The World interface: what the local SQLite log and every team world do, so that
push and pull are one copy loop between any two worlds.

Rows are addressed by natural keys, never by a world's own ids (a source's integer id differs
from world to world): a session by its id, a source by (session id, relpath), a record by
(session id, relpath, generation, offset), an event by (session id, seq). Every append is
idempotent on those keys. Records travel as *stored rows*: tuples in `RECORD_COLUMNS` order
whose `raw` is as stored (compressed when codec is set), so copying never re-encodes."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator, Protocol

from ..models import Event, Record, Session, Source

Position = tuple[int, int]  # (generation, offset) of a record within its source
BEFORE_ALL: Position = (-1, -1)  # sorts before every real position

# A copy commits this many records at a time: a kill or a dropped connection loses at most
# one chunk, and a chunk is big enough that per-commit costs vanish.
CHUNK = 50_000


@dataclass(frozen=True)
class Mark:
    """A source's high-water mark: how many records a world has for it and the last position."""

    count: int = 0
    last: Position | None = None

    @property
    def position(self) -> Position:
        return self.last if self.last is not None else BEFORE_ALL


@dataclass
class SessionMarks:
    """What a world holds of one session: per-source marks and the last event's seq."""

    session_id: str
    harness: str
    updated_at: str
    sources: dict[str, Mark] = field(default_factory=dict)
    last_seq: int = 0
    damaged: str | None = None  # why the world's rows of it cannot be read (a team world's)

    @property
    def records(self) -> int:
        return sum(m.count for m in self.sources.values())


class Lock(Protocol):
    def release(self) -> None: ...
    def __enter__(self) -> "Lock": ...
    def __exit__(self, *exc) -> None: ...


class World(Protocol):
    name: str

    def close(self) -> None: ...

    # sessions: `put_session` inserts, or updates when the given copy is newer (updated_at);
    # it returns "added", "updated" or None (nothing changed).
    def put_session(self, session: Session) -> str | None: ...
    def get_session(self, session_id: str) -> Session: ...
    def find_session(self, ref: str) -> Session: ...
    def sessions(self, harness: str | None = None) -> list[Session]: ...

    # sources: `put_source` inserts by (session id, relpath) and returns this world's row;
    # with update=True it also overwrites the row's progress (generation, offset, hashes…).
    def put_source(self, source: Source, update: bool = False) -> Source: ...
    def sources(self, session_id: str) -> list[Source]: ...

    # records
    def append_rows(self, rows: list[tuple]) -> int: ...
    def append_records(self, source: Source, records: list[Record]) -> int: ...
    def read_rows(self, source: Source, after: Position | None = None,
                  upto: Position | None = None, as_source_id: int | None = None,
                  chunk: int = CHUNK) -> Iterator[list[tuple]]: ...
    def read_records(self, session_id: str, relpath: str, after: Position | None = None,
                     limit: int | None = None) -> list[Record]: ...
    def count_upto(self, source: Source, last: Position) -> int: ...

    # events
    def append_events(self, events: list[Event]) -> int: ...
    def events(self, session_id: str, after_seq: int = 0) -> list[Event]: ...

    # high-water marks and locks
    def marks(self, session_id: str | None = None) -> dict[str, SessionMarks]: ...
    def high_water(self, session_id: str) -> dict[str, Mark]: ...
    def lock_session(self, session_id: str) -> Lock: ...


def group_marks(rows) -> dict[str, SessionMarks]:
    """SessionMarks from rows of (session id, harness, updated_at, relpath, count, generation,
    offset, last seq), one per source (relpath None for a session without sources)."""
    out: dict[str, SessionMarks] = {}
    for sid, harness, updated_at, relpath, count, generation, offset, last_seq in rows:
        marks = out.setdefault(sid, SessionMarks(sid, harness, updated_at, last_seq=last_seq or 0))
        if relpath is not None:
            last = (generation, offset) if generation is not None else None
            marks.sources[relpath] = Mark(count or 0, last)
    return out
