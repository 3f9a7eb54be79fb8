"""The JSONL-file store: a session is files of its own under the harness home (Claude Code,
Codex, Pi, the demo), appended line by line (`jsonl` sources) or rewritten whole (`file`
sources, e.g. Claude's subagent meta). A source's offsets are byte positions; a rewrite of
the file is a new generation of the source."""

from __future__ import annotations

import base64
import os
from dataclasses import replace
from pathlib import Path
from typing import Iterator

from ..models import Parsed, Record, Session, Source
from ..tokens import counts
from ..util import short_hash
from ..wrappers.clip import bounded
from .files import RebuiltFile, safe_target, source_bytes, write_file, write_parts
from .turns import chain_turn

SPAN = 4096  # as the tailer fingerprints a file: its first and last 4 KiB
# How far before the turn's prompt row (in bytes) the current turn looks for records of the
# turn that were written before it (see turns.py): those can only have been written after the
# prompt was submitted, so they sit just before it; 1 MiB holds a large tool_use row too.
LOOKBEHIND = 1 << 20


class JsonlStore:
    name = "jsonl"
    kinds = frozenset({"jsonl", "file"})
    session_files = True  # each session in files of its own (not one database for all)
    offsets_are_bytes = True

    # mirroring ---------------------------------------------------------------------------
    def tailer(self, world, wrapper, source: Source, native_id: str | None):
        from .tailer import Tailer

        return Tailer(world, wrapper, source)

    def warm(self) -> None:
        from .tailer import Tailer  # noqa: F401

    def conversation(self, world, session_id: str, source: Source, wrapper,
                     clip: int | None = None) -> Iterator[Parsed]:
        """The latest generation, one record at a time: records map one-to-one to parsed
        ones. A call's usage is the one the log counts (a message streamed as several rows:
        its last), in the kinds of tokens.py, with the model of the call (which a Codex token
        record does not name)."""
        top = world.latest_generation(source.id)
        for record, counted in counted_calls(world.records(session_id, source.id, generation=top)):
            parsed = wrapper.parse(bounded(record.raw, clip))
            parsed.usage = None if not counted else counts(
                input=record.tokens_in or 0, cache_read=record.tokens_cache_read or 0,
                cache_write=record.tokens_cache_write or 0,
                cache_write_1h=record.tokens_cache_write_1h or 0, output=record.tokens_out or 0,
                reasoning=record.tokens_reasoning or 0)
            parsed.model = record.model or parsed.model
            yield parsed

    # turns -------------------------------------------------------------------------------
    def last_turn(self, world, session_id: str, source: Source,
                  clip: int | None = None) -> list[Record]:
        """From the last record the wrapper marked as opening a turn (`dh log show`)."""
        top = world.latest_generation(source.id)
        start = world.last_turn_start(source.id, top)
        records = world.records(session_id, source.id, generation=top, from_offset=start or 0)
        return [r if clip is None else replace(r, raw=bounded(r.raw, clip)) for r in records]

    def current_turn(self, world, session: Session, source: Source) -> list[Record]:
        """The records of the current turn, in the latest generation: where a dangling call
        and the turn's end can be. By the parent chain where the records carry one."""
        generation = world.latest_generation(source.id) or 0
        start = world.last_offset_of_kind(source.id, generation, "user")
        window = list(world.records(session.id, source.id, generation,
                                    from_offset=max(0, start - LOOKBEHIND)))
        return chain_turn(window, start)

    # repairing a cut tool call -----------------------------------------------------------
    def repair(self, world, wrapper, session: Session, source: Source, call, text: str,
               records: list[Record]) -> bool:
        """Append the wrapper's native records that close the call (confined source path)."""
        try:
            lines = wrapper.repair_lines(records, call, text)
        except (TypeError, AttributeError, ValueError, KeyError, IndexError):
            lines = []  # damaged records around the call: reported as a skipped repair
        if lines:
            _append(Path(source.path), lines)
        return bool(lines)

    # restoring and rebuilding ------------------------------------------------------------
    def restore(self, world, wrapper, session: Session, source: Source, harness) -> dict | None:
        """Rewrite the (confined) file from the log unless it is the logged bytes exactly;
        the `rebuilt` event's details, or None when nothing was written."""
        path = Path(source.path)
        if source.kind == "jsonl" and _mirrored_exactly(source, path):
            return None
        logged = source_bytes(world, source)
        if not logged or _native_matches_log(path, logged):
            return None
        torn = _torn_tail(path, logged)
        write_file(path, logged, force=True)
        details = {"path": source.relpath, "bytes": len(logged)}
        if torn:
            details["dropped_torn_tail_b64"] = base64.b64encode(torn[:65536]).decode()
        return details

    def bring_back(self, world, wrapper, session: Session, source: Source, harness,
                   force: bool, dry_run: bool) -> dict:
        from .restore_files import bring_back_file

        return bring_back_file(world, source, force, dry_run)

    def rebuild(self, world, wrapper, session: Session, source: Source, home: Path,
                to_dir: Path | None, force: bool) -> RebuiltFile | None:
        latest = world.latest_generation(source.id)
        if latest is None:
            return None
        return write_parts(safe_target(home, source.relpath),
                           lambda: world.raw_batches(source.id, latest), force)

    # moving to another checkout ------------------------------------------------------------
    def rewritten(self, world, session: Session, source: Source, rewrite) -> tuple[list[Record], int]:
        """The latest generation with `rewrite` applied to each record, as generation
        latest+1 (offsets counted afresh), and how many records changed; nothing when none
        did."""
        latest = world.latest_generation(source.id)
        if latest is None:
            return [], 0
        out, offset, changed = [], 0, 0
        for record in world.records(session.id, source.id, latest):
            raw = rewrite(record.raw)
            changed += raw != record.raw
            out.append(replace(record, generation=latest + 1, offset=offset, raw=raw, codec=None))
            offset += len(raw)
        return (out, changed) if changed else ([], 0)

    def advance(self, source: Source, records: list[Record]) -> None:
        """The source's progress as if the tailer had just read the rewritten file: its size
        and fingerprint, so the file rebuilt from the log is recognised as already logged."""
        data = b"".join(r.raw for r in records)
        source.generation, source.offset, source.size = records[0].generation, len(data), len(data)
        if source.kind == "file":
            source.tail_hash = short_hash(data)
            return
        source.head_hash = short_hash(data[:SPAN])
        source.tail_hash = short_hash(data[max(0, len(data) - SPAN):])


def _native_matches_log(path: Path, logged: bytes) -> bool:
    """True when the file holds exactly the logged bytes (no torn tail, nothing missing)."""
    try:
        return path.stat().st_size == len(logged) and path.read_bytes() == logged
    except OSError:
        return False


def _mirrored_exactly(source: Source, path: Path) -> bool:
    """The tailer just read this file to its end: it holds exactly the logged bytes when it
    has no torn tail, its size is the committed offset, and the committed prefix still has
    the fingerprint the tailer recorded (cheap: two 4 KiB reads, not the whole file)."""
    from .tailer import fingerprint

    if source.status != "live" or source.pending or source.generation:
        return False
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return False
    try:
        if os.fstat(fd).st_size != source.offset:
            return False
        return (source.head_hash, source.tail_hash) == fingerprint(fd, source.offset)
    finally:
        os.close(fd)


def _torn_tail(path: Path, logged: bytes) -> bytes:
    try:
        data = path.read_bytes()
    except OSError:
        return b""
    return data[len(logged):] if data.startswith(logged) else b""


def _append(path: Path, lines: list[bytes]) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_APPEND)
    try:
        os.write(fd, b"".join(lines))
        os.fsync(fd)
    finally:
        os.close(fd)


def counted_calls(records: Iterator[Record]) -> Iterator[tuple[Record, bool]]:
    """Each record of one generation (in offset order) with whether the log counts it as a
    model call, by the `model_calls` view's rule for a file source: a record with usage,
    unless the next record that has usage or opens a turn carries the same message id (a
    message streamed as several rows counts once, as its last row). Decided on the way, a
    call's record held only until that next record: reading the view for the offsets took
    2.0 s of a 200,832-record session's first trace screen (4.4 s in all)."""
    pending: Record | None = None  # the latest record with usage, not yet decided
    held: list[Record] = []  # the records after it, until the next one that decides
    for record in records:
        if record.tokens_in is None and record.turn_start != 1:
            if pending is None:
                yield record, False
            else:
                held.append(record)
            continue
        if pending is not None:
            yield pending, pending.msg_id is None or record.msg_id != pending.msg_id
            yield from ((r, False) for r in held)
            pending, held = None, []
        if record.tokens_in is not None:
            pending = record
        else:
            yield record, False
    if pending is not None:
        yield pending, True
        yield from ((r, False) for r in held)
