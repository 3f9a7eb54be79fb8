"""Tail one native JSONL file into the log.

Reads from the committed offset, cuts complete lines (a line is complete when its newline is
written), and commits each batch of records together with the new offset. A torn last line
stays pending until its newline arrives. The committed prefix is fingerprinted (first and last
4 KiB before the offset); when the file shrinks or that prefix changes, the file was rewritten:
the old generation stays in the log, and the file is read again as a new generation."""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..events import Event, source_back, source_deleted, source_rewritten, source_unreadable
from ..models import Source
from ..util import short_hash
from ..worlds.local import encode_rows
from ..worlds.rows import ROW_WIDTH
from ..wrappers.base import Wrapper, to_record
from ..wrappers.clip import INDEXED, bounded
from ..worlds.log import Log

if TYPE_CHECKING:  # a live sync never needs them: imported by the first batch that does
    from concurrent.futures import Future, ThreadPoolExecutor

CHUNK = 1 << 20
BATCH_BYTES = 8 << 20
BATCH_RECORDS = 5000
SPAN = 4096
# A batch past this holds a huge line: committed before the next line is read, so that two
# huge lines (each as read, packed and bound by SQLite) are never in memory at once.
ALONE_BYTES = 4 * BATCH_BYTES
# A line still without its newline past this is not kept in the read buffer: its end is found
# by reading on, and the line read in one piece (the buffer, grown by a chunk at a time, and
# the line copied out of it were two copies of the line and an eighth).
HUGE_LINE = 16 << 20


@dataclass
class TailResult:
    added: int = 0
    pending: int = 0
    rewritten: bool = False
    missing: bool = False


def fingerprint(fd: int, offset: int) -> tuple[str, str]:
    head, tail = ends(fd, offset)
    return short_hash(head), short_hash(tail)


def ends(fd: int, offset: int) -> tuple[bytes, bytes]:
    """The first and the last SPAN bytes before `offset`: what the fingerprint is made of."""
    start = max(0, offset - SPAN)
    return os.pread(fd, min(SPAN, offset), 0), os.pread(fd, offset - start, start)


class Fingerprint:
    """The committed prefix's ends as this tailer last committed them. A live mirror syncs
    many times a second: comparing the ends with these bytes costs two short reads, where
    hashing them again cost 20 us per sync (a tenth of a live sync's CPU at 200 records/s).
    Until the tailer has committed once, the hashes in the log are the reference."""

    def __init__(self):
        self.ends: tuple[bytes, bytes] | None = None
        self.at = 0  # the offset `ends` are of
        self.head_hash: str | None = None

    def matches(self, fd: int, source: Source) -> bool:
        now = ends(fd, source.offset)
        if self.ends is not None:
            return now == self.ends
        if (source.head_hash, source.tail_hash) != (short_hash(now[0]), short_hash(now[1])):
            return False
        self.ends, self.at, self.head_hash = now, source.offset, source.head_hash
        return True

    def tail_at(self, offset: int) -> bytes | None:
        """The SPAN bytes before `offset`, when they are known without a read."""
        if offset == 0:
            return b""
        return self.ends[1] if self.ends is not None and self.at == offset else None

    def update(self, fd: int, offset: int, tail: bytes | None = None) -> tuple[str, str]:
        """The new ends after `offset` moved, and their (head, tail) hashes for the log. A
        head of SPAN bytes stays as it is while the file grows (a rewrite is what matches()
        looks for), and the reader passes the tail it has just read: a live sync then reads
        neither again (two system calls fewer)."""
        if self.ends is not None and len(self.ends[0]) == SPAN <= offset:
            head = self.ends[0]
            tail = tail if tail is not None else os.pread(fd, SPAN, offset - SPAN)
        else:
            head, tail = ends(fd, offset)
        if self.ends is None or head != self.ends[0]:
            self.head_hash = short_hash(head)  # the head stops changing past SPAN bytes
        self.ends, self.at = (head, tail), offset
        return self.head_hash, short_hash(tail)


def _same_prefix(fd: int, size: int, source: Source, known: Fingerprint) -> str | None:
    """Why the committed prefix no longer matches, or None when it still does."""
    if size < source.offset:
        return "shrunk"
    if not known.matches(fd, source):
        return "prefix_changed"
    return None


class Tailer:
    def __init__(self, world: Log, wrapper: Wrapper, source: Source):
        self.world, self.wrapper, self.source = world, wrapper, source
        self.known = Fingerprint()
        self.parser = None  # a ParsePool while a large import parses in a second process
        self.model: str | None = None  # the last model named, for usage rows that name none

    def sync(self) -> TailResult:
        try:
            fd = os.open(self.source.path, os.O_RDONLY | os.O_NONBLOCK)  # a FIFO must not block the mirror
        except FileNotFoundError:
            if self.source.inode is None:  # not written yet (e.g. a harness still starting)
                return TailResult(missing=True)
            return self._mark(TailResult(missing=True), "deleted", source_deleted(self.source.relpath))
        except OSError as exc:
            return self._mark(TailResult(missing=True), "unreadable",
                              source_unreadable(exc.strerror, self.source.relpath))
        try:
            return self._sync_fd(fd)
        finally:
            os.close(fd)

    def _mark(self, result: TailResult, status: str, event: Event) -> TailResult:
        if self.source.status != status:
            self.source.status = status
            self.world.commit(self.source, [], [event.pair()])
        return result

    def _sync_fd(self, fd: int) -> TailResult:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return self._mark(TailResult(missing=True), "unreadable",
                              source_unreadable("not a regular file", self.source.relpath))
        events, result = [], TailResult()
        if self.source.status != "live":
            events.append(source_back(self.source.relpath).pair())
            self.source.status = "live"
        check = self.source.offset and self.source.kind != "file"
        reason = _same_prefix(fd, info.st_size, self.source, self.known) if check else None
        if check and not reason and self.source.inode not in (None, info.st_ino) \
                and not self._prefix_is_logged(fd):
            reason = "replaced"  # a new file whose bytes differ between the sampled ends
        if reason:
            events.append(self._new_generation(reason, info.st_size))
            result.rewritten = True
        self.source.inode = info.st_ino
        if self.source.kind == "file":
            result.added = self._read_whole(fd, events)
        else:
            result.added, result.pending = self._read_lines(fd, events, info.st_size)
        return result

    def _prefix_is_logged(self, fd: int) -> bool:
        """A file replaced by another (a new inode) is compared with the log in full, not
        just at its ends: cheap enough for something that happens once per rewrite."""
        pos = 0
        for raw in self.world.raw_lines(self.source.id, self.source.generation):
            if os.pread(fd, len(raw), pos) != raw:
                return False
            pos += len(raw)
        return pos == self.source.offset

    def _new_generation(self, reason: str, size: int) -> tuple:
        old = self.source.generation
        event = source_rewritten(self.source.relpath, reason, old_generation=old,
                                 old_offset=self.source.offset, new_size=size)
        self.source.generation, self.source.offset, self.source.pending = old + 1, 0, 0
        self.known = Fingerprint()
        return event.pair()

    def _read_whole(self, fd: int, events: list) -> int:
        """A small whole-file source (e.g. a subagent's meta.json): one record per version."""
        data = os.pread(fd, os.fstat(fd).st_size, 0)
        digest = short_hash(data)
        if digest == self.source.tail_hash and not events:
            return 0
        if self.source.tail_hash is not None:
            self.source.generation += 1
            events.append(source_rewritten(self.source.relpath, "changed").pair())
        record = (self.source.id, self.source.generation, 0, data, None, "meta") + (None,) * (ROW_WIDTH - 6)
        self.source.offset = self.source.size = len(data)
        self.source.tail_hash = digest
        return self.world.commit(self.source, [record], events)

    def _read_lines(self, fd: int, events: list, size: int) -> tuple[int, int]:
        """Up to `size` (the fstat before): what is appended after it is read by the next
        sync, which its own change event asks for; reading on to an empty pread cost a
        system call more per live sync."""
        take, rows = self._record, encode_rows
        if self.parser is not None:  # the worker parses (mirror/parse_pool.py)
            take, rows = _as_line, lambda batch: self.parser.submit(self.source, batch)
        with _Encoder(self, fd) as encoder:
            pos, batch, batch_bytes = self.source.offset, [], 0
            pending, scan_from, torn_at = bytearray(), 0, None
            tail = self.known.tail_at(pos)  # the SPAN bytes before pos, as it moves on
            while (at := pos + len(pending)) < size and (chunk := os.pread(fd, min(CHUNK, size - at), at)):
                pending += chunk
                begin = 0
                while (newline := pending.find(b"\n", max(scan_from, begin))) >= 0:
                    raw = _line(pending, begin, newline + 1)
                    batch.append(take(raw, pos))
                    pos += len(raw)
                    batch_bytes += len(raw)
                    begin = newline + 1
                if tail is not None:
                    tail = _last_span(tail, pending, begin)
                del pending[:begin]
                scan_from = len(pending)
                if len(pending) >= HUGE_LINE and torn_at != size:
                    end = _line_end(fd, pos + len(pending), size)
                    if end is None:
                        torn_at = size  # no newline before size: the buffer takes the rest
                        continue
                    pending = bytearray()  # dropped before the line is read whole, once
                    raw = os.pread(fd, end - pos, pos)
                    if not raw.endswith(b"\n"):  # cut short under us: read on as any line
                        pending, scan_from = bytearray(raw), len(raw)
                        continue
                    batch.append(take(raw, pos))
                    pos, batch_bytes, scan_from = pos + len(raw), batch_bytes + len(raw), 0
                    tail = _last_span(tail, raw, len(raw)) if tail is not None else None
                if batch_bytes >= BATCH_BYTES or len(batch) >= BATCH_RECORDS:
                    encoder.submit(rows(batch), pos, len(pending), events, tail,
                                   alone=batch_bytes >= ALONE_BYTES)
                    batch, batch_bytes, events = [], 0, []
            if batch or events or self.source.pending != len(pending) or pos != encoder.offset:
                encoder.submit(rows(batch) if batch else batch, pos, len(pending), events, tail)
        return encoder.added, len(pending)

    def _record(self, raw: bytes, offset: int) -> tuple:
        parsed = self.wrapper.parse(bounded(raw, INDEXED))  # the bytes stored stay whole
        self.model = carry_model(parsed, self.model)
        return to_record(parsed, self.source.id, self.source.generation, offset, raw)

    def _commit(self, fd: int, batch: list, pos: int, pending: int, events: list,
                tail: bytes | None = None) -> int:
        self.source.offset, self.source.pending = pos, pending
        self.source.size = pos + pending
        self.source.head_hash, self.source.tail_hash = self.known.update(fd, pos, tail)
        return self.world.commit(self.source, batch, events)


def _line_end(fd: int, at: int, size: int) -> int | None:
    """Where the line holding `at` ends (after its newline), read on up to `size` in CHUNKs
    that are not kept; None when no newline comes before `size`."""
    while at < size and (chunk := os.pread(fd, min(CHUNK, size - at), at)):
        newline = chunk.find(b"\n")
        if newline >= 0:
            return at + newline + 1
        at += len(chunk)
    return None


def _line(pending: bytearray, begin: int, end: int) -> bytes:
    """pending[begin:end] as bytes; a long line copied once (a bytearray slice is a copy
    of its own, the bytes a second)."""
    if end - begin < CHUNK:
        return bytes(pending[begin:end])
    with memoryview(pending) as view:
        return view[begin:end].tobytes()


def _last_span(tail: bytes, data: bytearray, end: int) -> bytes:
    """The SPAN bytes before data[end], given the SPAN bytes before data[0]."""
    if end >= SPAN:
        return bytes(data[end - SPAN:end])
    return (tail + data[:end])[-SPAN:]


def carry_model(parsed, model: str | None) -> str | None:
    """Codex names the model in its turn_context, not on its token counts: a usage row that
    names no model gets the last one named. Returns the model to carry on."""
    if parsed.model and not parsed.usage:
        return parsed.model
    if parsed.usage and not parsed.model:
        parsed.model = model
    return model


def _as_line(raw: bytes, offset: int) -> tuple[int, bytes]:
    return offset, raw


class _Encoder:
    """Commits batch N on a helper thread (SQLite lets go of the GIL) while this thread
    parses and compresses batch N+1 (or the worker process of mirror/parse_pool.py does;
    with the compression on the commit thread, the insert waited for it); one batch at a
    time, so batches are committed strictly in order, each with its own offset. The thread
    is started only once a read yields a second batch: a live sync (one small batch, many
    times a second) commits in place instead of starting a thread each time. While a batch
    is on the helper thread, this one does not touch the database (parsing needs none of
    it)."""

    def __init__(self, tailer: Tailer, fd: int):
        self.tailer, self.fd, self.added = tailer, fd, 0
        self.offset = tailer.source.offset
        self.waiting: Future | tuple | None = None
        self.pool: ThreadPoolExecutor | None = None

    def _commit(self, rows: list | Future, pos: int, pending: int, events: list,
                tail: bytes | None) -> int:
        if not isinstance(rows, list):  # a Future: parsed and encoded by the worker process
            rows = rows.result()
        return self.tailer._commit(self.fd, rows, pos, pending, events, tail)

    def _flush(self) -> None:
        if self.waiting is not None:
            work, self.waiting = self.waiting, None
            self.added += self._commit(*work) if isinstance(work, tuple) else work.result()

    def submit(self, batch: list, pos: int, pending: int, events: list,
               tail: bytes | None = None, alone: bool = False) -> None:
        """Commit the batch, after the one before it; with `alone`, before returning."""
        if self.waiting is not None and self.pool is None:
            from concurrent.futures import ThreadPoolExecutor

            self.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="dh-commit")
        self._flush()
        self.offset = pos
        work = (batch, pos, pending, events, tail)
        self.waiting = self.pool.submit(self._commit, *work) if self.pool is not None else work
        if alone:
            self._flush()

    def __enter__(self) -> "_Encoder":
        return self

    def __exit__(self, *exc) -> None:
        try:
            if exc[0] is None:
                self._flush()
        finally:
            if self.pool is not None:
                self.pool.shutdown(wait=True)
