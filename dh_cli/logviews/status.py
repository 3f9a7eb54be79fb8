"""What `dh` with no arguments shows: the sessions running now, those interrupted (their dh
is gone, see liveness.py) with the command that resumes each, and the last few that ended.
Plain data; commands/status.py prints it. A machine with no log yet is not given one by looking."""

from __future__ import annotations

import socket
from dataclasses import dataclass, field
from pathlib import Path

from .. import liveness

RECENT = 5  # how many ended sessions the status shows


@dataclass
class Status:
    log: str
    exists: bool
    running: list[dict] = field(default_factory=list)
    elsewhere: list[dict] = field(default_factory=list)  # live on another host: not judged here
    interrupted: list[dict] = field(default_factory=list)
    lost: list[dict] = field(default_factory=list)  # their harness lost them (stores/lost.py)
    recent: list[dict] = field(default_factory=list)
    total: int = 0


def gather(db_path: Path, recent: int = RECENT) -> Status:
    status = Status(str(db_path), Path(db_path).exists())
    if not status.exists:
        return status
    from ..worlds.local import LocalWorld

    world = LocalWorld(db_path)
    try:
        # the sessions' rows alone: counting every session's records and tokens made a bare
        # `dh` take 3.8 s with 10,008 sessions (bench/bench_sessionlist.py)
        sessions = liveness.mark([s.to_dict() for s in world.sessions()], world.path)
        status.lost = lost_rows(world, sessions)
    finally:
        world.close()
    status.total = len(sessions)
    here = socket.gethostname()
    for session in sessions:
        _place(status, session, here)
    status.recent = sorted(status.recent, key=_last_activity, reverse=True)[:recent]
    return status


def lost_rows(world, sessions: list[dict]) -> list[dict]:
    """The sessions whose harness lost them, each with what it lost and `dh restore ID`."""
    from ..stores.lost import lost_sessions, restore_command

    lost = lost_sessions(world)
    return [{**s, "lost": lost[s["id"]], "restore": restore_command(s["id"])}
            for s in sessions if s["id"] in lost]


def _place(status: Status, session: dict, here: str) -> None:
    if session["state"] == "interrupted":
        status.interrupted.append(session)
    elif session["state"] in liveness.LIVE_STATES and session.get("host") not in (None, here):
        status.elsewhere.append(session)
    elif session["state"] in liveness.LIVE_STATES:
        status.running.append(session)
    else:
        status.recent.append(session)


def _last_activity(session: dict) -> str:
    return session.get("updated_at") or ""
