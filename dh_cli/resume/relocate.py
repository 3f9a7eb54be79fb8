"""Make a session from the log resumable on this machine, and optionally in another checkout.

A session pulled from another machine names that machine's harness home and paths. When the
recorded home does not exist here (or the session is being moved or was just pulled), its
native files are placed under this machine's harness home instead, each source's path
re-derived from its relpath. Moving to another working directory (`dh resume --cwd DIR`)
also rewrites the records that carry the cwd (see cwd_rewrite) and the harness's path keys
(Claude Code's project folder, Pi's session folder): the rewritten records are a NEW
generation of each source, the old generation stays in the log as it was. The session row is
updated last, so a relocation cut short is simply done again by the next resume."""

from __future__ import annotations

import json
import os
import socket
from dataclasses import dataclass, field, replace
from pathlib import Path

from ..confine import place, under
from ..errors import LogConflict, NativeStateError
from ..models import Record, Session, Source
from ..util import short_hash
from ..wrappers.base import Wrapper
from ..wrappers.claude import MAX_SLUG, project_slug
from ..wrappers.opencode import row_key
from ..wrappers.pi import pi_session_dir_name
from ..worlds.log import Log
from .cwd_rewrite import rewrite_record

SPAN = 4096  # as the tailer fingerprints a file: its first and last 4 KiB


@dataclass
class Relocation:
    session_id: str
    old_cwd: str | None
    new_cwd: str | None
    old_home: str | None
    new_home: str
    adopting: bool = False  # the session came from elsewhere: every path is derived afresh
    records: int = 0  # records rewritten (each now in a new generation of its source)
    sources: list[dict] = field(default_factory=list)  # {"from", "to", "records"} per source

    @property
    def moved(self) -> bool:
        return self.old_cwd != self.new_cwd

    @property
    def rehomed(self) -> bool:
        return self.old_home != self.new_home or self.adopting

    def to_dict(self) -> dict:
        return {"from": self.old_cwd, "to": self.new_cwd, "home_from": self.old_home,
                "home_to": self.new_home, "records": self.records, "sources": self.sources}


# ---- where things go ------------------------------------------------------------------------
def checkout_path(cwd: str) -> str:
    """The new working directory as the harnesses record it: absolute, symlinks resolved."""
    path = os.path.realpath(os.path.abspath(os.path.expanduser(cwd)))
    if not os.path.isdir(path):
        raise NativeStateError(f"cannot move the session to {cwd}: not a folder")
    return path


def target_home(world, wrapper: Wrapper, session: Session, env: dict, moving: bool) -> Path:
    """The session's home on this machine (confine.py) while it stays put; otherwise the
    harness home of this machine's environment (the one the resumed harness will read).
    Never the home a row names: a pulled row names another machine's."""
    decided = place(world, session.id)
    if decided is not None and not moving:
        return Path(decided[0])
    return Path(wrapper.home(env))


def moved_relpath(harness: str, relpath: str, cwd: str) -> str:
    """The source's place under the home for a session in `cwd`: Claude Code keeps it in
    `projects/<slug of cwd>/`, Pi in `sessions/--<cwd>--/`; the others do not depend on cwd."""
    parts = relpath.split("/")
    if harness == "claude-code" and len(parts) >= 3 and parts[0] == "projects":
        slug = project_slug(cwd)
        if len(slug) > MAX_SLUG:
            raise NativeStateError(f"cannot move the session to {cwd}: Claude Code shortens "
                                   "project folders this long with a hash dh does not compute",
                                   hint="pick a shorter checkout path")
        parts[1] = slug
    elif harness == "pi" and len(parts) == 3 and parts[0] == "sessions" and parts[1].startswith("--"):
        parts[1] = pi_session_dir_name(cwd)
    return "/".join(parts)


def source_path(wrapper: Wrapper, home: Path, relpath: str) -> Path:
    """OpenCode's source is its database, which is the home itself."""
    return home if wrapper.source_kind == "opencode" else under(home, relpath)


# ---- relocating ------------------------------------------------------------------------------
def relocate_session(world, wrapper: Wrapper, session: Session, env: dict,
                     new_cwd: str | None = None, rehome: bool = False) -> Relocation | None:
    """Put the session under this machine's harness home and (with new_cwd) in another
    checkout; None when nothing changes. The native files are written afterwards by
    prepare_resume, from the log."""
    adopting = place(world, session.id) is None
    cwd = checkout_path(new_cwd) if new_cwd else session.cwd
    home = target_home(world, wrapper, session, env, rehome or bool(new_cwd) or adopting)
    plan = Relocation(session.id, session.cwd, cwd, session.home, str(home), adopting=adopting)
    if not plan.moved and not plan.rehomed:
        return None
    sources = world.sources(session.id)
    _check_unique(wrapper, sources, plan)
    for source in sources:
        _move_source(world, wrapper, session, source, plan)
    main = world.sources(session.id)[0].path if sources else None if adopting else session.native_path
    world.update_session(session.id, cwd=cwd, home=str(home), native_path=main,
                         host=socket.gethostname())
    world.add_event(session.id, "moved", plan.to_dict(), phase="outcome")
    return plan


def _check_unique(wrapper: Wrapper, sources: list[Source], plan: Relocation) -> None:
    """Two sources must not land on one file (a log holding the session's source from
    before an earlier move beside the moved one, e.g. pulled back from a server)."""
    seen: dict[str, str] = {}
    for source in sources:
        target = _relpath(wrapper, source, plan)
        if target in seen:
            raise NativeStateError(
                f"cannot move session {plan.session_id}: its sources {seen[target]!r} and "
                f"{source.relpath!r} would both become {target!r} (the log holds the session "
                "from before an earlier move too)",
                hint="resume it from the checkout it was last moved to")
        seen[target] = source.relpath


def _relpath(wrapper: Wrapper, source: Source, plan: Relocation) -> str:
    return moved_relpath(wrapper.name, source.relpath, plan.new_cwd) if plan.moved else source.relpath


def _move_source(world, wrapper: Wrapper, session: Session, source: Source, plan: Relocation) -> None:
    relpath = _relpath(wrapper, source, plan)
    moved = replace(source, relpath=relpath, path=str(source_path(wrapper, Path(plan.new_home), relpath)),
                    inode=None, status="live", pending=0)
    rewrite = plan.moved and plan.old_cwd and plan.new_cwd
    records, changed = _rewritten(world, wrapper, session, source, plan) if rewrite else ([], 0)
    if records and source.kind != "opencode":
        _as_new_generation(moved, records)
    elif records:
        moved.offset = records[-1].offset + 1
    plan.records += changed
    plan.sources.append({"from": source.relpath, "to": relpath, "records": changed})
    event = ("source_moved", {"from": source.relpath, "to": relpath, "path": moved.path,
                              "generation": moved.generation, "records": changed})
    try:
        world.commit(moved, records, [event], moved=True)
    except LogConflict:  # the new relpath taken by another source of the session
        raise NativeStateError(f"cannot move {source.relpath!r} to {relpath!r}: the log already "
                               "has a source there") from None


def _rewritten(world, wrapper, session, source, plan) -> tuple[list[Record], int]:
    if source.kind == "opencode":
        records = _rewritten_versions(world, session, source, plan)
        return records, len(records)
    return _rewritten_generation(world, wrapper, session, source, plan)


def _rewritten_generation(world, wrapper, session, source, plan) -> tuple[list[Record], int]:
    """The latest generation with the cwd moved, as generation latest+1 (offsets counted
    afresh), and how many records changed; nothing when none carries the old cwd."""
    latest = world.latest_generation(source.id)
    if latest is None:
        return [], 0
    out, offset, changed = [], 0, 0
    for record in world.records(session.id, source.id, latest):
        raw = rewrite_record(record.raw, wrapper.name, plan.old_cwd, plan.new_cwd)
        changed += raw != record.raw
        out.append(replace(record, generation=latest + 1, offset=offset, raw=raw, codec=None))
        offset += len(raw)
    return (out, changed) if changed else ([], 0)


def _rewritten_versions(world, session: Session, source: Source, plan: Relocation) -> list[Record]:
    """OpenCode: a new version of every row whose latest version carries the old cwd,
    appended after the source's last version (its rows are versions, not lines)."""
    latest: dict[str, Record] = {}
    last = -1
    for record in world.records(session.id, source.id):
        last = max(last, record.offset)
        try:
            latest[row_key(json.loads(record.raw))] = record
        except (ValueError, AttributeError):
            continue
    out, offset = [], max(source.offset, last + 1)
    for record in latest.values():
        raw = rewrite_record(record.raw, "opencode", plan.old_cwd, plan.new_cwd)
        if raw != record.raw:
            out.append(replace(record, offset=offset, raw=raw, codec=None))
            offset += 1
    return out


def _as_new_generation(source: Source, records: list[Record]) -> None:
    """The source's progress as if the tailer had just read the rewritten file: its size
    and fingerprint, so the file rebuilt from the log is recognised as already logged."""
    data = b"".join(r.raw for r in records)
    source.generation, source.offset, source.size = records[0].generation, len(data), len(data)
    if source.kind == "file":
        source.tail_hash = short_hash(data)
        return
    source.head_hash = short_hash(data[:SPAN])
    source.tail_hash = short_hash(data[max(0, len(data) - SPAN):])


# ---- pulling on the fly ------------------------------------------------------------------------
def pull_for_resume(local, world_name: str, ref: str, url: str | None = None):
    """Bring one session from a shared world into the local log before resuming it:
    (session id, records added, where from with the password masked). A session this log
    already moved elsewhere is not pulled again (the world may still hold it as it was
    before the move)."""
    from ..worlds.sync import open_remote, pull

    remote = open_remote(world_name, url)
    try:
        found = remote.find_session(ref)
        shown = getattr(remote, "shown", remote.name)
        if _moved_here(local, found.id):
            return found.id, None, shown
        report = pull(remote, local, [found.id])
        return found.id, report.records, shown
    finally:
        remote.close()


def _moved_here(local, session_id: str) -> bool:
    try:
        local.get_session(session_id)
    except Exception:
        return False
    return any(e.type == "moved" and e.details.get("from") != e.details.get("to")
               for e in local.events(session_id))


def describe(plan: Relocation) -> str:
    """The line dh prints about a relocation."""
    if plan.moved:
        return (f"dh: moved session {plan.session_id} from {plan.old_cwd} to {plan.new_cwd} "
                f"({plan.records} records rewritten)")
    return f"dh: session {plan.session_id} rebuilt under {plan.new_home} (recorded under {plan.old_home})"


def relocate_for_resume(world: Log, wrapper: Wrapper, session: Session, opts, move_to: str | None,
                        rehome: bool) -> Session:
    """The resume step: relocate when needed, say so, and point the launch at the session's
    (possibly new) working directory. Returns the session as the log now has it."""
    if place(world, session.id) is None:
        # a session from elsewhere: adopted explicitly into this machine's layout, in the
        # checkout the user runs in (or passes), never the cwd its row names
        move_to = move_to or opts.cwd
    plan = relocate_session(world, wrapper, session, opts.env, move_to, rehome)
    if plan is None:
        return session
    opts.notice(describe(plan))
    session = world.get_session(session.id)
    opts.cwd = session.cwd or opts.cwd
    return session
