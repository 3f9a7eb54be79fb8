"""A session from elsewhere runs here only with at least what it had (wrappers/grants.py):
what its last launch recorded it was granted, against what this machine's `local_flags`
grant its harness. Read by `dh resume` (which refuses) and by `dh worker` (which leaves the
session for another worker, the reason on its lease)."""

from __future__ import annotations

import json

from .. import events
from ..errors import NotGranted, UsageError
from ..paths import config_path
from ..wrappers.common import flag_name, parse_argv
from ..wrappers.grants import ALL, LEVELS, Grant, flags_for, granted, launch_grant


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


def withheld(world, wrapper, session_id: str, mine: list[str], env: dict | None = None) -> str | None:
    """Why the session must not run here with this machine's flags (and the harness's own
    settings of this user, found from `env`; None: none read) (None: they grant at least
    what it had), naming the config line that would grant it."""
    have = launch_grant(wrapper, mine, env)
    if have.level == ALL:  # nothing to read: no session had more
        return None
    session = world.get_session(session_id)
    want = needed(world, wrapper, session)
    if have.covers(want):
        return None
    flags = [*mine, *flags_for(wrapper, want)]
    level = want.level if not want.tools else ALL  # --grant names a level, not tools
    said = f"session {session.id} ran with {wrapper.name} granting {want.describe()}; this machine grants"
    # OpenCode's --auto approves what its config asks, never what it denies: no flag helps
    if not launch_grant(wrapper, flags, env).covers(want):
        return (f"{said} {have.level}, and no flag of {wrapper.name} grants more here: its own "
                f"config on this machine denies it; change that to let it run here")
    return (f"{said} {have.level}: add `{wrapper.name} = {json.dumps(flags)}` under [local_flags] "
            f"in {config_path()} (or give --grant {level}) to let it run here")


def check(world, wrapper, session_id: str, mine: list[str], env: dict | None = None) -> None:
    if reason := withheld(world, wrapper, session_id, mine, env):
        raise NotGranted(reason)


def local_flags(configured: dict, wrapper) -> list[str]:
    """This user's flags for the wrapper's harness (by its name or an alias)."""
    for name in (wrapper.name, *wrapper.aliases):
        if name in configured:
            return list(configured[name])
    return []


def granting(configured: dict, level: str | None, env: dict | None = None) -> dict:
    """`local_flags` with, for each harness they let do less than `level`, that harness's own
    flags for it added (`dh resume --grant`, `dh worker --grant`): the user's word on this
    machine's command line, never anything a session or a world says."""
    if level is None:
        return dict(configured)
    if level not in LEVELS:
        raise UsageError(f"--grant {level[:40]!r} is not a level", hint=f"one of {', '.join(LEVELS)}")
    from ..wrappers import get, names

    out, wanted = dict(configured), Grant(level)
    for wrapper in {get(name) for name in names()}:
        mine = local_flags(configured, wrapper)
        if not launch_grant(wrapper, mine, env).covers(wanted):
            out[wrapper.name] = _raised(wrapper, mine, wanted)
    return out


def _raised(wrapper, mine: list[str], wanted: Grant) -> list[str]:
    """mine with its flags that grant a level swapped for the harness's flags for `wanted`
    (two of them may not go together: Codex's sandbox and its bypass), those that allow
    tools by name kept."""
    groups, words = parse_argv(mine, wrapper.value_flags, wrapper.variadic_flags)
    kept = [g for g in groups if flag_name(g) not in wrapper.grant_table or granted(wrapper, g).tools]
    return [*(token for group in kept for token in group), *words, *flags_for(wrapper, wanted)]
