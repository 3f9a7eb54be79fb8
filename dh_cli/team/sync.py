"""Push, pull and status between two worlds. Push and pull are one copy loop in opposite
directions: for each source, the receiver's high-water mark says where to start, and the
sender's rows after it travel in chunks, each committed on its own.

Why that is idempotent and resumable: a source's rows are sent in (generation, offset) order
and the mark is read from the rows themselves, so after a kill or a dropped connection the
receiver holds exactly the chunks that committed and the next run starts right after them.
Pushing twice finds every mark at the end and sends nothing. A receiver that lacks rows *below*
its mark (its count is short of the sender's up to that position) gets them re-sent; appends
skip what exists, so that too converges to one copy of each record.

A source's progress (offset, hashes) is copied only after its records, and so is the newer
state of a session the receiver already has: the receiver never claims rows it does not hold.

A damaged row or workspace object stops its own session only (DAMAGED): the copy goes on with
the others and the report names it (`failed`). A receiver that can remove a session (the local
log) keeps nothing of one that was new to it, so no part of it looks like the whole; one it
already had keeps the rows that came whole before the damage, the sender's progress not
claimed, as an interrupted copy leaves it."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field, replace
from typing import Callable, Iterator

from .. import events
from ..errors import DamagedRow, UsageError
from ..models import Source
from ..workspace import copy_workspace
from ..workspace.store import DamagedObject
from ..worlds.base import Mark, SessionMarks, World
from ..redact import mask_bytes, one_line
from .diverge import diverged, keep_both, masked_chunks, masked_events
from .protocol import TeamWorld
from .sync_rows import checked, prefetched  # noqa: F401 - prefetched re-exported

Progress = Callable[[int, int], None]  # (records done, records expected)
DAMAGED = (DamagedRow, DamagedObject)  # what stops one session's copy, not the others'


@dataclass(frozen=True)
class Masks:
    """How a copy treats credentials (a world set to `masked`, `dh world records`): `sent`,
    the receiver masks, so rows and files are masked before they leave; `compared`, either
    side does, so bytes are compared masked. Between two logs: neither."""

    sent: bool = False
    compared: bool = False

    @classmethod
    def pushing_to(cls, remote: TeamWorld) -> "Masks":
        masks = remote.masks_records
        return cls(masks, masks)

    @classmethod
    def pulling_from(cls, remote: TeamWorld) -> "Masks":
        return cls(False, remote.masks_records)


def moved_here(local: World, session_id: str) -> bool:
    """Whether this log moved the session elsewhere (`dh resume --cwd`): the world may still
    hold it as it was before the move, and a pull must not bring that back."""
    try:
        local.get_session(session_id)
    except Exception:
        return False
    return any(e.type == events.MOVED and e.details.get("from") != e.details.get("to")
               for e in local.events(session_id))


@dataclass
class SessionSync:
    session_id: str
    harness: str
    session: str | None = None  # "added" | "updated" | None
    sources: int = 0  # sources new to the receiver
    records: int = 0  # records added
    events: int = 0  # events added
    diverged: list = field(default_factory=list)  # {"relpath", "generation"}: both copies kept
    snapshots: int = 0  # workspace snapshots added (with the objects they reach)
    failed: str | None = None  # why the session could not be copied whole


@dataclass
class SyncReport:
    direction: str  # push | pull
    world: str  # where to (push) or from (pull), password masked
    sessions: list[SessionSync] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def records(self) -> int:
        return sum(s.records for s in self.sessions)

    @property
    def events(self) -> int:
        return sum(s.events for s in self.sessions)

    @property
    def failed(self) -> list[SessionSync]:
        return [s for s in self.sessions if s.failed]

    @property
    def changed(self) -> int:
        return sum(1 for s in self.sessions
                   if s.session or s.records or s.events or s.sources or s.snapshots)

    def to_dict(self) -> dict:
        return {"direction": self.direction, "world": self.world, "records": self.records,
                "events": self.events, "sessions_changed": self.changed,
                "seconds": round(self.seconds, 3), "sessions": [asdict(s) for s in self.sessions]}


@dataclass
class SessionStatus:
    session_id: str
    harness: str
    status: str  # local only | server only | in sync | local ahead | server ahead | diverged | damaged
    local_records: int | None
    server_records: int | None  # None also where the world's rows of it are damaged
    reason: str | None = None  # why it is damaged: one line, clipped (a world's rows wrote it)

    def to_dict(self) -> dict:
        return asdict(self)


class _Counter:
    """Counts records moved and reports them to the progress callback."""

    def __init__(self, total: int, progress: Progress | None):
        self.done, self.total, self.progress = 0, total, progress

    def add(self, n: int) -> None:
        self.done += n
        self.total = max(self.total, self.done)
        if self.progress:
            self.progress(self.done, self.total)


def push(local: World, remote: TeamWorld, session_ids: list[str] | None = None,
         progress: Progress | None = None, keep_going: bool = False) -> SyncReport:
    """Copy to `remote` everything of the local log it lacks (`keep_going`: as pull's)."""
    return copy_sessions(local, remote, "push", remote.shown, session_ids, progress,
                         Masks.pushing_to(remote), keep_going)


def pull(remote: TeamWorld, local: World, session_ids: list[str] | None = None,
         progress: Progress | None = None, keep_going: bool = False) -> SyncReport:
    """Copy into the local log everything of `remote` it lacks. A damaged session raises
    DamagedRow, unless `keep_going`: then the report lists it and the others are copied."""
    return copy_sessions(remote, local, "pull", remote.shown, session_ids, progress,
                         Masks.pulling_from(remote), keep_going)


def copy_sessions(src: World, dst: World, direction: str, where: str,
                  session_ids: list[str] | None, progress: Progress | None,
                  masks: Masks = Masks(), keep_going: bool = False) -> SyncReport:
    """The copy loop of push and pull, between any two worlds (`where`: the other one, as
    the report shows it)."""
    start = time.monotonic()
    src_marks, dst_marks = _marks_of(src, session_ids), _marks_of(dst, session_ids)
    ids = list(src_marks) if session_ids is None else session_ids
    missing = [sid for sid in ids if sid not in src_marks]
    if missing:
        raise UsageError(f"no session {missing[0]!r} to {direction}")
    counter = _Counter(sum(_lacking(src_marks[s], dst_marks.get(s)) for s in ids), progress)
    report = SyncReport(direction, where)
    for sid in ids:
        done = _copy_or_fail(src, dst, src_marks[sid], dst_marks.get(sid), counter, masks, direction)
        if done.failed and not keep_going:
            raise DamagedRow(done.failed, hint=damaged_hint(direction))
        report.sessions.append(done)
    report.seconds = time.monotonic() - start
    return report


def _marks_of(world: World, session_ids: list[str] | None) -> dict[str, SessionMarks]:
    if session_ids is None:
        return world.marks()
    out: dict[str, SessionMarks] = {}
    for sid in session_ids:
        out.update(world.marks(sid))
    return out


def _lacking(src: SessionMarks, dst: SessionMarks | None) -> int:
    """About how many records the receiver lacks (for the progress bar's total)."""
    have = dst.sources if dst else {}
    return sum(max(0, m.count - have.get(rel, Mark()).count) for rel, m in src.sources.items())


def damaged_hint(direction: str) -> str:
    """What to do about the sessions a copy could not take whole. A pull met a damaged world
    copy, which another machine's push can make whole; a push compared this log's copy with
    the world's, and the damaged one may be either (the line names the row, not the side)."""
    if direction == "pull":
        return "push each again from a machine that holds it whole"
    return ("if the damaged copy is the world's, no dh command removes a session from a world: delete"
            " it there with the server's own client, then push again; if it is this log's (`dh log"
            " show` fails on it too), `dh log rm` it")


def _copy_or_fail(src: World, dst: World, src_marks: SessionMarks, dst_marks: SessionMarks | None,
                  counter: _Counter, masks: Masks, direction: str) -> SessionSync:
    """copy_session, or the session marked failed, with why, when something of it is damaged;
    a session new to a receiver that can remove one is removed there again."""
    result = SessionSync(src_marks.session_id, src_marks.harness)
    try:
        return copy_session(src, dst, src_marks, dst_marks, counter, masks, result)
    except DAMAGED as exc:
        if dst_marks is None and hasattr(dst, "remove_session"):
            dst.remove_session(result.session_id)
            result = SessionSync(result.session_id, result.harness)
        result.failed = one_line(f"session {result.session_id} not {direction}ed: {exc}")
        return result


def copy_session(src: World, dst: World, src_marks: SessionMarks, dst_marks: SessionMarks | None,
                 counter: _Counter, masks: Masks = Masks(),
                 into: SessionSync | None = None) -> SessionSync:
    """Copy one session's rows, events and snapshots the receiver lacks, then its newer
    state; `into`: the result to count them in (what came before a failure stays counted)."""
    session = src.get_session(src_marks.session_id)
    result = into or SessionSync(session.id, session.harness)
    if dst_marks is None:  # sources need their session row first
        result.session = dst.put_session(session)
    have = dst_marks.sources if dst_marks else {}
    for source in src.sources(session.id):
        mark = have.get(source.relpath)
        result.sources += mark is None
        try:
            result.records += copy_source(src, dst, source, mark or Mark(),
                                          src_marks.sources.get(source.relpath, Mark()), counter,
                                          result.diverged, masks)
        except DamagedRow as exc:
            raise DamagedRow(f"{source.relpath}: {exc}") from None
    result.events = dst.append_events(masked_events(src.events(session.id, dst_marks.last_seq if dst_marks else 0),
                                                    masks.sent))
    result.snapshots = copy_workspace(src, dst, session.id, masks.sent)  # dh_cli/workspace/sync.py
    result.session = dst.put_session(session) or result.session  # its newer state, last
    return result


def _fresh(source: Source) -> Source:
    """The source as the receiver first records it: no progress claimed yet."""
    return replace(source, generation=0, offset=0, size=0, inode=None, head_hash=None,
                   tail_hash=None, pending=0, updated_at="")


def copy_source(src: World, dst: World, source: Source, have: Mark, sent: Mark,
                counter: _Counter, diverged_out: list | None = None, masks: Masks = Masks()) -> int:
    target = dst.put_source(_fresh(source))
    masking = masks.sent
    same = mask_bytes if masks.compared else None
    if diverged(src, source, sent, dst, target, have, same):  # never spliced: a generation
        added, generation = keep_both(src, dst, source, target, have, sent, masking)
        counter.add(added)
        if diverged_out is not None:
            diverged_out.append({"relpath": source.relpath, "generation": generation})
        return added
    added = 0
    if have.last is not None and src.count_upto(source, have.last) > have.count:
        # Holes below the receiver's mark (rows lost or deleted there): re-send that part.
        added += _send(dst, masked_chunks(src.read_rows(source, upto=have.last, as_source_id=target.id),
                                          masking), counter)
    added += _send(dst, masked_chunks(src.read_rows(source, after=have.last, as_source_id=target.id),
                                      masking), counter)
    # The receiver now holds everything the sender has of this source: take its progress too,
    # unless the receiver was already further along (it is mirroring the source itself).
    if have.position <= sent.position and (target.updated_at or "") < (source.updated_at or ""):
        dst.put_source(source, update=True)
    return added


def _send(dst: World, chunks: Iterator[list[tuple]], counter: _Counter) -> int:
    """Append each chunk in its own transaction as it arrives: a kill loses one chunk at most."""
    added = 0
    for rows in prefetched(checked(chunks)):
        added += dst.append_rows(rows)
        counter.add(len(rows))
    return added


# status -------------------------------------------------------------------------------------
def status(local: World, remote: TeamWorld) -> list[SessionStatus]:
    """Every session either world has, and how the two copies compare. A session whose rows
    the comparison reads (its row, its sources, the record both copies hold last) are damaged
    is `damaged`, with why; status reads no other record (pull checks every one it copies)."""
    mine, theirs = local.marks(), remote.marks()
    same = mask_bytes if remote.masks_records else None
    return [_status_of(local, remote, mine.get(sid), theirs.get(sid), same)
            for sid in list(mine) + [s for s in theirs if s not in mine]]


def _status_of(local: World, remote: World, here: SessionMarks | None, there: SessionMarks | None,
               same) -> SessionStatus:
    state, reason = compare(here, there), _damage(here) or _damage(there)
    if here and there and state not in ("diverged", "damaged"):
        try:
            state = "diverged" if _any_diverged(local, remote, here, there, same) else state
        except DamagedRow as exc:
            state, reason = "damaged", str(exc)
    server = there.records if there and not there.damaged else None
    return SessionStatus((here or there).session_id, (here or there).harness, state,
                         here.records if here else None, server, one_line(reason) if reason else None)


def _damage(marks: SessionMarks | None) -> str | None:
    return marks.damaged if marks else None


def _any_diverged(local: World, remote: World, here: SessionMarks, there: SessionMarks,
                  same) -> bool:
    """Same key, different bytes (or a record spanning it) in any source both copies have."""
    theirs = {s.relpath: s for s in remote.sources(here.session_id)}
    for source in local.sources(here.session_id):
        other = theirs.get(source.relpath)
        try:
            if other and diverged(local, source, here.sources.get(source.relpath, Mark()),
                                  remote, other, there.sources.get(source.relpath, Mark()), same):
                return True
        except DamagedRow as exc:
            raise DamagedRow(f"{source.relpath}: {exc}") from None
    return False


def compare(here: SessionMarks | None, there: SessionMarks | None) -> str:
    if _damage(here) or _damage(there):
        return "damaged"
    if there is None:
        return "local only"
    if here is None:
        return "server only"
    local_more = _has_more(here, there)
    server_more = _has_more(there, here)
    if local_more and server_more:
        return "diverged"
    return "local ahead" if local_more else "server ahead" if server_more else "in sync"


def _has_more(a: SessionMarks, b: SessionMarks) -> bool:
    """Whether a holds records or events that b lacks (by counts and last positions)."""
    if a.last_seq > b.last_seq:
        return True
    for relpath, mark in a.sources.items():
        other = b.sources.get(relpath, Mark())
        if mark.count > other.count or mark.position > other.position:
            return True
    return False
