"""What shell completion offers (`dh completion`): harness names and aliases from the wrapper
registry, the dh ids in the log, and the states a session can be in. Reading only: a machine
with no log yet is not given one by pressing Tab."""

from __future__ import annotations

from .. import paths
from ..wrappers import REGISTRY

# sessions.state as it is written: supervisor/states.py session_state (starting, running,
# fatal, and how an attempt ended: finished, stopped, crashed, hung), mirror/importer.py
# (imported), and what liveness.py shows for a session whose dh is gone (interrupted).
SESSION_STATES = ("starting", "running", "finished", "stopped", "crashed", "hung", "fatal",
                  "imported", "interrupted")


def harnesses(incomplete: str) -> list[str]:
    names = sorted({n for w in REGISTRY.values() for n in (w.name, *w.aliases)})
    return [n for n in names if n.startswith(incomplete)]


def states(incomplete: str) -> list[str]:
    return [s for s in SESSION_STATES if s.startswith(incomplete)]


def sessions(incomplete: str) -> list[str]:
    """dh ids of the log's sessions that start with `incomplete`, newest first."""
    db = paths.db_path()
    if not db.exists():
        return []
    from ..worlds.local import LocalWorld

    world = LocalWorld(db)
    try:
        ids = [sid for sid, _ in world.session_names() if sid.startswith(incomplete)]
    finally:
        world.close()
    return sorted(ids, reverse=True)
