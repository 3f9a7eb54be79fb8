"""The one confinement rule for every path dh derives from data (issue 14).

A session's harness home and cwd on this machine are decided here: where dh ran or imported
it (recorded in the local-only `places` table), or, for a session that came from a shared
world, this machine's configured harness home and the cwd the user runs in or passes. Rows
of a world (`home`, `cwd`, `host`, `native_path`, a source's `path`) are never trusted. Every
native path is `home / relpath`, the relpath checked (relative, no `..`, no NUL, no symlink
on the way), for JSONL and OpenCode sources alike; the only other path dh reads is one its
own mirror recorded on this machine (`mirrored_paths`)."""

from __future__ import annotations

import os
import socket
from pathlib import Path, PurePosixPath

from .errors import NativeStateError
from .models import Session, Source


class Refused(NativeStateError):
    """A path or id from the log that would leave dh's lane."""


def checked_relpath(relpath) -> PurePosixPath:
    """The relpath as parts under a home: refused when absolute, empty, with `..`, NUL or
    a backslash (a Windows separator a harness never writes)."""
    if not isinstance(relpath, str) or not relpath or "\0" in relpath or "\\" in relpath:
        raise Refused(f"refusing unsafe path {relpath!r} from the log")
    rel = PurePosixPath(relpath)
    parts = [p for p in rel.parts if p != "."]
    if rel.is_absolute() or not parts or ".." in parts:
        raise Refused(f"refusing unsafe path {relpath!r} from the log")
    return PurePosixPath(*parts)


def under(home: Path, relpath: str) -> Path:
    """home/relpath, refusing a relpath that leaves home: checked as text, then every
    existing step below home must be a real folder (or the final file), never a symlink."""
    rel = checked_relpath(relpath)
    home = Path(home)
    step = home
    for part in rel.parts:
        step = step / part
        if step.is_symlink():
            raise Refused(f"refusing path {relpath!r}: {step} is a symlink (it leaves {home})")
        if not step.exists():
            break
    if not inside(step if step.exists() else home, home):
        raise Refused(f"refusing path {relpath!r}: it leaves {home}")
    return home / rel


def inside(path: Path, root: Path) -> bool:
    """True when path, every symlink followed, stays under root."""
    try:
        return Path(path).resolve().is_relative_to(Path(root).resolve())
    except (OSError, RuntimeError, ValueError):  # a symlink loop, a NUL byte
        return False


# ---- where a session lives on this machine --------------------------------------------------
def place(world, session_id: str) -> tuple[str, str | None] | None:
    """(home, cwd) as dh decided them on this machine, or None (came from elsewhere)."""
    finder = getattr(world, "place", None)
    return finder(session_id) if finder else None


def session_home(world, wrapper, session: Session, env: dict | None = None) -> Path:
    """The harness home of the session here: its recorded place, else the configured one."""
    decided = place(world, session.id)
    if decided:
        return Path(decided[0])
    return Path(wrapper.home(dict(os.environ) if env is None else env))


def source_path(world, wrapper, session: Session, source: Source, env: dict | None = None) -> Path:
    """The one file a source may be read from or written to on this machine."""
    home = session_home(world, wrapper, session, env)
    checked_relpath(source.relpath)
    mirrored = getattr(world, "mirrored_path", lambda _id: None)(source.id)
    if mirrored and mirrored == source.path and place(world, session.id):
        return Path(mirrored)  # recorded by this machine's own mirror (e.g. Pi's --session-dir)
    return wrapper.source_file(home, source.relpath)  # checked under home (OpenCode's: the home)


def confined_source(world, wrapper, session: Session, source: Source) -> Source:
    """The source with its path replaced by the confined one (the copy the mirror reads)."""
    from dataclasses import replace

    return replace(source, path=str(source_path(world, wrapper, session, source)))


def settle(world, wrapper, session: Session, env: dict | None = None) -> Session:
    """A session with a place here gets its row back to that place (a later pull may have
    overwritten home, cwd, host and paths with another machine's); the session returned
    holds only values decided on this machine. A session without a place is returned as
    it is: it must be adopted first (resume relocates it, `dh run` adopts it)."""
    decided = place(world, session.id)
    if decided is None:
        return session
    home, cwd = decided
    main = _main_path(world, wrapper, session, env)
    if (session.home, session.cwd, session.native_path) != (home, cwd, main):
        return world.update_session(session.id, home=home, cwd=cwd, native_path=main,
                                    host=socket.gethostname())
    return world.get_session(session.id)


def adopt(world, wrapper, session: Session, home: Path, cwd: str | None) -> Session:
    """Take a session that came from elsewhere into this machine's layout without moving
    its records: home and cwd are the ones given (this run's), every path re-derived."""
    session = world.update_session(session.id, home=str(home), cwd=cwd, host=socket.gethostname())
    return settle(world, wrapper, session)


def _main_path(world, wrapper, session: Session, env: dict | None) -> str | None:
    sources = world.sources(session.id)
    if not sources:
        return None
    return str(source_path(world, wrapper, session, sources[0], env))


def check_native_id(wrapper, native_id) -> str:
    """The harness's own session id, refused unless it has that harness's id shape: it is
    put on the harness's command line, and a world or a transcript chose it."""
    if not isinstance(native_id, str) or not wrapper.native_id_ok(native_id):
        shown = repr(native_id)[:80]
        raise Refused(f"refusing session id {shown} from the log: not a {wrapper.name} session id")
    return native_id
