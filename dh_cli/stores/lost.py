"""Which sessions of the log their harness lost on this machine (its cleanup deleted the file,
`opencode session delete` dropped the rows, a file was cut shorter). Cheap enough for every
listing: one query for all sessions, then a stat of each session's main file (OpenCode: one
read of each database's session ids). Only sessions dh ran or imported here count, at the
path this machine's mirror read; a harness home that is gone altogether (a temporary one)
is not reported as a loss.

The checks are here, by source kind, rather than behind each store: a bare `dh` that went
through the stores imported every wrapper with them (0.23 s of 0.78 s CPU with 10,001
sessions, bench/bench_sessionlist.py, -X importtime)."""

from __future__ import annotations

import os

from .restore_files import file_lost

ROW_KINDS = frozenset({"opencode"})  # a database for all sessions (stores/opencode.py)


def native_mains(world, session_ids: list[str] | None = None) -> dict[str, tuple]:
    """Log.native_mains (of every session, or of those named), or nothing for a team world
    (it has no places)."""
    if not hasattr(world, "native_mains"):
        return {}
    return world.native_mains(session_ids)


def lost_sessions(world, wanted: set[str] | None = None, mains: dict | None = None) -> dict[str, str]:
    """session id -> why its harness no longer has it ("gone", "shorter")."""
    mains = native_mains(world) if mains is None else mains
    seen: dict = {}
    homes: dict[str, bool] = {}
    out = {}
    for sid, (_harness, native_id, home, kind, path, logged, _argv) in mains.items():
        if wanted is not None and sid not in wanted or not path:
            continue
        if not _home_here(kind, home, homes):
            continue
        why = rows_lost(path, native_id, seen) if kind in ROW_KINDS else file_lost(path, logged or 0)
        if why:
            out[sid] = why
    return out


def rows_lost(db: str, native_id: str | None, seen: dict) -> str | None:
    """Rows gone: the database no longer lists the session (read once per database)."""
    if db not in seen:
        from pathlib import Path

        from .opencode_restore import sessions_in_db

        seen[db] = sessions_in_db(Path(db))
    return None if seen[db] is None or native_id in seen[db] else "gone"


def due_for_cleanup(world, harness: str, days: int, soon: float, now: float) -> list[str]:
    """Sessions of the harness placed here whose main file the harness's cleanup (files
    unwritten for `days`) deletes within `soon` seconds of `now`."""
    limit = now - days * 86400 + soon
    due = []
    for sid, (name, _native, _home, _kind, path, _logged, _argv) in native_mains(world).items():
        if name != harness or not path:
            continue
        try:
            if os.stat(path).st_mtime < limit:
                due.append(sid)
        except OSError:
            continue  # gone already: `dh log list` says so
    return due


def _home_here(kind: str, home: str, homes: dict[str, bool]) -> bool:
    """The harness home still exists (OpenCode's home is its database: its folder)."""
    if home not in homes:
        folder = os.path.dirname(home) if kind in ROW_KINDS else home
        homes[home] = os.path.isdir(folder)
    return homes[home]


def restore_command(prefix: str) -> str:
    return f"dh restore {prefix}"
