"""`dh log rm`: remove a session from the local log, only when asked for sure, and never
while a dh runs it (its lock is held for the removal)."""

from __future__ import annotations

from .errors import DhError, UsageError
from .models import Session


def remove_session(world, session: Session, yes: bool, on_terminal: bool, confirm) -> int:
    """The records removed. Without `yes` it asks on a terminal (`confirm(question)`), and
    refuses elsewhere: a script must say --yes."""
    if not yes:
        if not on_terminal:
            raise UsageError(f"refusing to remove session {session.id} without --yes",
                             hint="not on a terminal: pass --yes to remove it")
        records = world.record_count(session.id)
        if not confirm(f"Remove session {session.id} ({session.harness}, {records} record(s)) from the log?"):
            raise DhError("nothing removed")
    with world.lock_session(session.id):
        return world.remove_session(session.id)
