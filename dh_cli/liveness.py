"""Is the dh that supervises a session still alive? The one place that decides it.

A session's `state` is written by its supervising dh; a dh killed with SIGKILL (or a machine
that lost power) never writes the last one, so the log says `running` forever. The evidence
that cannot lie on this machine is the session's lock under `$DH_HOME/locks/`: every dh that
runs or resumes a session holds an flock on it for as long as it supervises, and the kernel
drops the lock when that process dies, however it dies (locks.py). So:

- a live state (`starting`, `running`) whose lock nobody holds is `interrupted`, and the
  fix is `dh resume <id>`;
- a session recorded by another host cannot be judged here (its lock is on that machine):
  it keeps its logged state and says so, rather than guess;
- `starting` is written just before the lock is taken, so a `starting` session younger than
  STARTING_GRACE is not called interrupted on the strength of a lock it has not taken yet.

Reading the lock takes it for an instant (LOCK_SH | LOCK_NB on a read-only descriptor, never
creating the file) and releases it at once, so it never stands in a supervisor's way."""

from __future__ import annotations

import datetime as _dt
import fcntl
import os
import socket
from dataclasses import dataclass
from pathlib import Path

from .paths import SAFE_ID

LIVE_STATES = {"starting", "running", "waiting"}  # waiting: on a provider's limit (supervisor/states.py)
STARTING_GRACE = 30.0  # seconds between `starting` and the lock (a busy log can delay it)


@dataclass
class Liveness:
    state: str  # the state to show: the logged one, or "interrupted"
    supervised: bool | None  # a live dh holds the session (None: cannot be judged here)
    why: str = ""
    hint: str | None = None  # the one command that fixes it


def lock_held(locks_dir: Path, session_id: str) -> bool:
    """True while some process holds the session's flock (a live supervising dh)."""
    if not SAFE_ID.fullmatch(session_id or ""):
        return False
    try:
        fd = os.open(locks_dir / f"{session_id}.lock", os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return False  # no lock file: no dh ever held it here, or the folder is gone
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # closing drops the shared lock we may have taken
    return False


def _age(updated_at: str | None) -> float:
    try:
        then = _dt.datetime.fromisoformat(updated_at)
    except (TypeError, ValueError):
        return float("inf")
    if then.tzinfo is None:
        then = then.replace(tzinfo=_dt.timezone.utc)
    return (_dt.datetime.now(_dt.timezone.utc) - then).total_seconds()


def judge(session: dict, locks_dir: Path, host: str | None = None) -> Liveness:
    """The state to show for one session row (a dict with id, state, host, updated_at)."""
    state = session.get("state") or ""
    if state not in LIVE_STATES:
        return Liveness(state, False)
    here = host or socket.gethostname()
    if session.get("host") and session["host"] != here:
        return Liveness(state, None, f"supervised on {session['host']}; cannot be checked from {here}")
    if lock_held(locks_dir, session["id"]):
        return Liveness(state, True)
    if state == "starting" and _age(session.get("updated_at")) < STARTING_GRACE:
        return Liveness(state, None, "starting (its dh has not taken the session's lock yet)")
    return Liveness("interrupted", False, f"the dh that supervised it is gone (logged as {state})",
                    f"dh resume {session['id']}")


def mark(sessions: list[dict], world_path: Path) -> list[dict]:
    """Each session dict with the state to show: `state` becomes `interrupted` where the
    supervisor is gone (the logged one is kept as `logged_state`), with `hint` and `why`."""
    locks_dir = Path(world_path).parent / "locks"
    here = socket.gethostname()
    for session in sessions:
        found = judge(session, locks_dir, here)
        if found.state != session.get("state"):
            session["logged_state"] = session.get("state")
        session["state"] = found.state
        if found.why:
            session["why"] = found.why
        if found.hint:
            session["hint"] = found.hint
    return sessions
