"""Backfill native sessions into the log. Idempotent: a session is matched by the harness's
own id, a source by its path, and records by (source, generation, offset), so importing twice
— or again after a kill — adds nothing that is already there."""

from __future__ import annotations

import os
import socket
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from ..pathrule import check_native_id
from ..errors import NativeStateError, SessionNotFound
from ..models import Session
from ..stores import store_of
from ..wrappers.base import NativeSession, Wrapper
from ..worlds.checkpoint import fewer_checkpoints
from ..worlds.log import Log
from .parse_pool import parsing_elsewhere
from .session import SessionMirror


@dataclass
class ImportReport:
    sessions: list[dict] = field(default_factory=list)
    added: int = 0
    pending: int = 0
    skipped: list[dict] = field(default_factory=list)  # {"path", "why"}: not imported

    def to_dict(self) -> dict:
        return {"sessions": self.sessions, "records_added": self.added, "pending_bytes": self.pending,
                "skipped": self.skipped}


def native_for_path(wrapper: Wrapper, path: Path) -> NativeSession:
    """The native session a file belongs to, whether or not it sits in a harness home; its
    id read from the file as the harness wrote it (so a renamed copy is the same session)."""
    path = path.resolve()
    depth, top = wrapper.layout_depth
    if depth and len(path.parents) >= depth and path.parents[depth - 2].name == top:
        home = path.parents[depth - 1]
        match = [s for s in wrapper.discover(home) if s.sources and s.sources[0].path == path]
        if match:
            return match[0]
    return wrapper._sessions_at(path.parent, path)[0]


def check_native(wrapper: Wrapper, native: NativeSession) -> None:
    """Refuse what is not a session of this harness: an id not of its shape (a list, a
    flag, 100k characters), or a main file whose first record is not the harness's."""
    main = native.sources[0].path if native.sources else None
    if main is not None and store_of(wrapper).session_files and not wrapper.is_session_file(Path(main)):
        raise NativeStateError(f"{main} is not a {wrapper.name} session file")
    check_native_id(wrapper, native.harness_session_id)


def readable_file(path: Path) -> None:
    """Raise a one-line NativeStateError unless path is a regular file dh can read."""
    try:
        info = os.stat(path)
        if not stat.S_ISREG(info.st_mode):
            raise NativeStateError(f"{path} is not a regular file")
        os.close(os.open(path, os.O_RDONLY | os.O_NONBLOCK))
    except FileNotFoundError:
        raise NativeStateError(f"{path} does not exist") from None
    except OSError as exc:
        raise NativeStateError(f"cannot read {path}: {exc.strerror}") from None


def select(wrapper: Wrapper, home: Path, ref: str | None, all_: bool) -> list[NativeSession]:
    files = store_of(wrapper).session_files  # else the home is one database of every session
    if (all_ or not ref) and files and not os.path.isdir(home):
        raise NativeStateError(f"the {wrapper.name} home {home} does not exist or is not a folder",
                               hint="pass --home, or check the harness's environment variables")
    if all_ or not ref:
        return wrapper.discover(home)
    path = Path(ref)
    if files and (os.sep in ref or ref.endswith(".jsonl") or os.path.lexists(path)):
        readable_file(path)
        return [native_for_path(wrapper, path)]
    found = wrapper.find(home, ref)
    if not found:
        raise SessionNotFound(f"no {wrapper.name} session {ref!r} under {home}")
    return [found]


def log_session_for(world, wrapper: Wrapper, native: NativeSession, state: str = "imported") -> Session:
    """The log's session for this native one: the same (harness, native id, home), or the
    session that already mirrors its file; else a new one."""
    main = native.sources[0].path if native.sources else None
    return world.session_for_native(wrapper.name, native.harness_session_id,
                                    os.path.realpath(native.home), str(main) if main else None,
                                    cwd=native.cwd, host=socket.gethostname(), state=state)


def import_one(world: Log, wrapper: Wrapper, native: NativeSession) -> tuple[Session, int, int]:
    session = log_session_for(world, wrapper, native)
    mirror = SessionMirror(world, wrapper, session)
    mirror.track(native)
    # a second process parses a large file; SQLite checkpoints less often meanwhile
    with parsing_elsewhere(mirror, wrapper.name), fewer_checkpoints(world):
        result = mirror.sync()
    return session, result.added, result.pending


def import_sessions(world: Log, wrapper: Wrapper, home: Path, ref: str | None = None,
                    all_: bool = False, progress: Callable[[int, int], None] | None = None) -> ImportReport:
    natives = select(wrapper, home, ref, all_)
    report = ImportReport()
    for index, native in enumerate(natives, 1):
        try:
            check_native(wrapper, native)
            session, added, pending = import_one(world, wrapper, native)
        except NativeStateError as exc:
            if len(natives) == 1 and ref and not all_:
                raise
            report.skipped.append({"path": str(native.sources[0].path) if native.sources else None,
                                   "why": str(exc)})  # the others are still imported
            continue
        report.added += added
        report.pending += pending
        report.sessions.append({"id": session.id, "harness_session_id": session.harness_session_id,
                                "records_added": added, "pending_bytes": pending})
        if progress:
            progress(index, len(natives))
    return report
