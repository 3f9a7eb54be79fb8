"""Rows on their way from one world to another: each checked before it is stored, and read
ahead by a thread while the receiver commits the last chunk."""

from __future__ import annotations

import queue
import threading
from typing import Iterator

from ..errors import DamagedRow, LogDbError
from ..tokens import plausible
from ..worlds.rows import RECORD_COLUMNS, decode_raw


def checked(chunks: Iterator[list[tuple]]) -> Iterator[list[tuple]]:
    """Rows as they come, each compressed one decoded once first: a row from a world with an
    unknown codec or damaged bytes stops the session's copy (DamagedRow, naming the record),
    before it is stored. A token count no call can have (negative, past tokens.MOST: a forged
    or damaged row) is stored as none, the row flagged `bad_field` as a parse flags such a
    record."""
    try:
        for rows in chunks:
            for row in rows:
                if row[4] is not None:
                    decoded(row)
            yield [_counts_checked(row) for row in rows]
    finally:  # a reader stopped by a damaged row ends its read (a COPY holds its connection)
        getattr(chunks, "close", lambda: None)()


def decoded(row: tuple) -> bytes:
    """A stored row's native bytes; DamagedRow, naming the record, when they do not decode."""
    try:
        return decode_raw(row[3], row[4])
    except LogDbError as exc:
        text, named = str(exc), f"record {row[1]}:{row[2]}"
        said = named + text[len("a record"):] if text.startswith("a record") else f"{named}: {text}"
        raise DamagedRow(said) from None


_COUNTS = [RECORD_COLUMNS.index(c) for c in RECORD_COLUMNS if c.startswith("tokens_")]
_FLAGS = RECORD_COLUMNS.index("flags")


def _counts_checked(row: tuple) -> tuple:
    if all(row[i] is None or plausible(row[i]) for i in _COUNTS):
        return row
    out = [None if i in _COUNTS and not plausible(v) else v for i, v in enumerate(row)]
    out[_FLAGS] = ",".join(filter(None, [row[_FLAGS], "bad_field"]))
    return tuple(out)


class _Failed:
    def __init__(self, exc: BaseException):
        self.exc = exc


_END = object()


def prefetched(items: Iterator, depth: int = 1) -> Iterator:
    """Yield from `items`, produced up to `depth` items ahead by a thread: reading the next
    chunk overlaps with the receiver committing this one (about a fifth faster). The thread
    alone touches the sender until the loop ends; an error on either side stops both."""
    channel: queue.Queue = queue.Queue(depth)
    stop = threading.Event()

    def produce() -> None:
        try:
            for item in items:
                channel.put(item)
                if stop.is_set():
                    break
            channel.put(_END)
        except BaseException as exc:  # handed to the consumer, raised there
            channel.put(_Failed(exc))
        finally:
            getattr(items, "close", lambda: None)()

    thread = threading.Thread(target=produce, name="dh-prefetch", daemon=True)
    thread.start()
    try:
        while (item := channel.get()) is not _END:
            if isinstance(item, _Failed):
                raise item.exc
            yield item
    finally:
        stop.set()
        while thread.is_alive():  # drain, so a producer blocked on a full queue can finish
            try:
                channel.get(timeout=0.05)
            except queue.Empty:
                pass
