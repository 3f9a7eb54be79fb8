"""A machine that comes back after its session went on elsewhere.

A session this machine replicated to a world is remembered here (local_places
`session_worlds`). A plain `dh resume S` asks that world before it runs anything: while
another holder's lease is live the lease refuses (naming the holder); once the world holds
more of the session than this log (another machine took it over and went on), the resume is
refused and says where the session went, instead of running the turn a second time from this
machine's older copy. `dh resume S --world local` goes on with this machine's copy on purpose,
as a new session forked from S (resume/fork.py); S stays remembered, so a later plain resume
of it still asks the world."""

from __future__ import annotations

from .. import events
from ..errors import SessionLocked, SessionNotFound, WorldError
from ..util import without_password
from ..worlds.local import LocalWorld
from .protocol import TeamWorld


def session_here(local: LocalWorld, ref: str):
    try:
        return local.find_session(ref)
    except SessionNotFound:
        return None


def returning_world(local: LocalWorld, ref: str, world_name: str | None,
                    url: str | None) -> tuple[str | None, str | None]:
    """(world, url) a plain `dh resume` asks first: the configured world, else the one the
    session replicated to from here (its URL as remembered, unless the URL configured for
    that world names the same server: that one carries the password)."""
    from . import configured_url

    session = session_here(local, ref)
    remembered = local.remembered_world(session.id) if session else None
    if world_name or remembered is None:
        return world_name, url
    name, kept = remembered
    configured = None if url else configured_url(name)
    if url or (configured and without_password(configured) == kept):
        return name, url
    return name, kept


def check_not_gone_on(local: LocalWorld, world_name: str, url: str | None, ref: str) -> None:
    """Refuse when the world holds records of the session this log lacks: it went on
    elsewhere. A live holder is left to the lease, which names it."""
    from . import open_world
    from .takeover import seconds_left

    session = session_here(local, ref)
    if session is None:
        return
    try:
        remote = open_world(world_name, url)
    except WorldError as exc:
        raise WorldError(f"session {session.id} replicated to the world {world_name}, which dh "
                         f"cannot reach to learn whether it went on elsewhere: {exc}",
                         hint=f"`dh resume {session.id} --world local` resumes this machine's "
                              "copy as a new session") from None
    try:
        try:
            there = remote.get_session(session.id)
        except SessionNotFound:
            return
        if seconds_left(remote, session.id) is not None:
            return
        if _ahead(remote.marks(session.id).get(session.id), local.marks(session.id).get(session.id)):
            raise SessionLocked(_where_it_went(remote, there),
                                hint=f"`dh resume {session.id} --world local` forks this machine's copy as a new session")
    finally:
        remote.close()


def _ahead(there, here) -> bool:
    """The world holds a record of some source this log does not."""
    if there is None:
        return False
    have = here.sources if here else {}
    return any(mark.count > (have[rel].count if rel in have else 0) for rel, mark in there.sources.items())


def _where_it_went(remote: TeamWorld, there) -> str:
    takeovers = [e for e in remote.events(there.id) if e.type == events.TAKEOVER]
    host = (takeovers[-1].details.get("host") if takeovers else None) or there.host or "another machine"
    at = (takeovers[-1].at if takeovers else there.updated_at) or ""
    when = f" at {at[11:16]} UTC" if len(at) >= 16 else ""
    how = "taken over by" if takeovers else "resumed on"
    done = "finished there" if there.state == "finished" else f"went on there ({there.state})"
    return f"session {there.id} was {how} {host}{when} and {done}; `dh world pull` to see it"
