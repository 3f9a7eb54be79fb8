"""Where a session lives on this machine, read from the local log and kept there: its harness
home and cwd as dh ran or imported it (the local-only `places` table), or, for a session that
came from a shared world, this machine's configured harness home and the cwd the user runs in
or passes. Each function reads the log and applies the rule of pathrule.py, which decides
without it."""

from __future__ import annotations

import socket
from pathlib import Path

from .models import Session, Source
from .pathrule import home_here, settled_values, source_file


def place(world, session_id: str) -> tuple[str, str | None] | None:
    """(home, cwd) as dh decided them on this machine, or None (came from elsewhere)."""
    finder = getattr(world, "place", None)
    return finder(session_id) if finder else None


def session_home(world, wrapper, session: Session, env: dict | None = None) -> Path:
    """The harness home of the session here: its recorded place, else the configured one."""
    return home_here(wrapper, place(world, session.id), env)


def source_path(world, wrapper, session: Session, source: Source, env: dict | None = None) -> Path:
    """The one file a source may be read from or written to on this machine."""
    return _source_path(world, wrapper, source, place(world, session.id), env)


def _source_path(world, wrapper, source: Source, decided, env: dict | None) -> Path:
    home = home_here(wrapper, decided, env)
    mirrored = getattr(world, "mirrored_path", lambda _id: None)(source.id)
    return source_file(wrapper, home, source.relpath, source.path, mirrored, decided is not None)


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
    values = settled_values(session, *decided, _main_path(world, wrapper, session, decided, env))
    if values is not None:
        return world.update_session(session.id, **values)
    return world.get_session(session.id)


def adopt(world, wrapper, session: Session, home: Path, cwd: str | None) -> Session:
    """Take a session that came from elsewhere into this machine's layout without moving
    its records: home and cwd are the ones given (this run's), every path re-derived."""
    session = world.update_session(session.id, home=str(home), cwd=cwd, host=socket.gethostname())
    return settle(world, wrapper, session)


def _main_path(world, wrapper, session: Session, decided, env: dict | None) -> str | None:
    sources = world.sources(session.id)
    if not sources:
        return None
    return str(_source_path(world, wrapper, sources[0], decided, env))
