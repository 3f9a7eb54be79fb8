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

import os
import socket
from dataclasses import dataclass, field, replace
from pathlib import Path

from .. import events
from ..confine import place
from ..errors import LogConflict, NativeStateError
from ..models import Session, Source
from ..stores import store_of
from ..worlds.log import Log
from ..wrappers.base import Wrapper
from .cwd_rewrite import rewrite_record


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
    events.add(world, session.id, events.moved(plan.to_dict()))
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
    return wrapper.moved_relpath(source.relpath, plan.new_cwd) if plan.moved else source.relpath


def _move_source(world, wrapper: Wrapper, session: Session, source: Source, plan: Relocation) -> None:
    relpath = _relpath(wrapper, source, plan)
    moved = replace(source, relpath=relpath, path=str(wrapper.source_file(Path(plan.new_home), relpath)),
                    inode=None, status="live", pending=0)
    store = store_of(wrapper)
    rewrite = plan.moved and plan.old_cwd and plan.new_cwd
    records, changed = store.rewritten(world, session, source, _cwd_moved(wrapper, plan)) if rewrite else ([], 0)
    if records:
        store.advance(moved, records)
    plan.records += changed
    plan.sources.append({"from": source.relpath, "to": relpath, "records": changed})
    event = events.source_moved(source.relpath, relpath, moved.path, moved.generation, changed)
    try:
        world.commit(moved, records, [event.pair()], moved=True)
    except LogConflict:  # the new relpath taken by another source of the session
        raise NativeStateError(f"cannot move {source.relpath!r} to {relpath!r}: the log already "
                               "has a source there") from None


def _cwd_moved(wrapper: Wrapper, plan: Relocation):
    """A record's bytes with the cwd it carries moved from the old checkout to the new."""
    return lambda raw: rewrite_record(raw, wrapper.carries_cwd, plan.old_cwd, plan.new_cwd)


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
