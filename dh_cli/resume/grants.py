"""A session from elsewhere runs here only with at least what it had (wrappers/grants.py):
what its last launch recorded it was granted, against what this machine's `local_flags`
grant its harness. Read by `dh resume` (which refuses) and by `dh worker` (which leaves the
session for another worker, the reason on its lease)."""

from __future__ import annotations

import json

from .. import events
from ..errors import NotGranted
from ..paths import config_path
from ..wrappers.grants import ALL, Grant, flags_for, granted


def needed(world, wrapper, session) -> Grant:
    """What the session's last launch was granted, as its journal says; a session whose
    launches recorded none (an older dh, an import) by its stored args."""
    for event in reversed(world.events(session.id)):
        if event.type == events.LAUNCH and isinstance(event.details, dict):
            found = Grant.recorded(event.details.get("grant"))
            if found is not None:
                return found
            break
    try:
        args = json.loads(session.argv or "[]")
    except ValueError:
        args = None
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        return wrapper.base_grant or Grant()
    return granted(wrapper, args, needed=True)


def withheld(world, wrapper, session_id: str, mine: list[str]) -> str | None:
    """Why the session must not run here with this machine's flags (None: they grant at
    least what it had), naming the config line that would grant it."""
    have = granted(wrapper, mine)
    if have.level == ALL:  # nothing to read: no session had more
        return None
    session = world.get_session(session_id)
    want = needed(world, wrapper, session)
    if have.covers(want):
        return None
    flags = json.dumps([*mine, *flags_for(wrapper, want)])
    return (f"session {session.id} ran with {wrapper.name} granting {want.describe()}; this "
            f"machine grants {have.level}: add `{wrapper.name} = {flags}` under [local_flags] "
            f"in {config_path()} to let it run here")


def check(world, wrapper, session_id: str, mine: list[str]) -> None:
    if reason := withheld(world, wrapper, session_id, mine):
        raise NotGranted(reason)
