"""Taking a session over from another machine (issue 15): claims, steals and waits on the
leases of a team world (protocol.py), and how each session's holding looks (for `dh world
status`, `dh log list`).

A claim is a compare-and-set on the server: the orphan's lease moves to the claimer only if
its epoch is still the one the claimer saw and it is still lapsed, unreleased and unrefused, so
of two workers that saw the same orphan exactly one gets it; the previous holder is kept
beside it. From that step on the old holder's writes are refused by the server
(postgres_fencing.py, redis_scripts.py)."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import asdict, dataclass

from .. import events
from ..errors import SessionLocked
from ..worlds.local import LocalWorld
from .lease import Lease, take
from .protocol import Holder, LeaseRow, TeamWorld

# a turn was open when the holder went silent; a `waiting` one was cut by a provider's limit,
# and the taker's `dh resume` waits that limit out again if it still holds
OPEN_STATES = ("starting", "running", "waiting")


class Pass(str):
    """A reason not to take a session that is this worker's own limit (its harness, flags,
    roots or folders): noted on the lease for people, never keeping other workers from it."""


@dataclass
class Claim:
    session_id: str
    harness: str
    cwd: str | None
    from_host: str
    from_epoch: int
    epoch: int
    restore: bool = False  # its cwd is missing here: restored from its workspace snapshot first


def orphans(world: TeamWorld, harnesses: list[str] | None = None, limit: int = 5,
            skip: Collection[str] = ()) -> list[Claim]:
    """Sessions whose holder went silent mid-turn (lapsed, not released, not refused), the
    longest silent first, each as the claim it would be. `skip`: sessions the caller leaves
    to others, left out before `limit` counts, so they cannot hide the ones behind them."""
    lapsed = sorted((l for l in world.leases().values() if l.left <= 0 and not l.released
                     and not l.refused and l.session_id not in skip), key=lambda l: -l.age)
    out = []
    for lease in lapsed:
        session = _session(world, lease.session_id)
        if session is None or session.state not in OPEN_STATES:
            continue
        if harnesses is None or session.harness in harnesses:
            out.append(Claim(session.id, session.harness, session.cwd, lease.host, lease.epoch,
                             lease.epoch + 1))
        if len(out) >= limit:
            break
    return out


def _session(world: TeamWorld, session_id: str):
    from ..errors import SessionNotFound

    try:
        return world.get_session(session_id)
    except SessionNotFound:
        return None


def claim(world: TeamWorld, ttl_s: float, harnesses: list[str] | None = None, accept=None,
          skip: Collection[str] = ()) -> Claim | None:
    """One orphaned session, now this process's (None: there is none). `accept(candidate)`
    returns None to take it, the reason to refuse it (kept in the world, never claimed), or a
    Pass (noted in the world, left for another worker); `skip`: sessions left to other workers (their harness is missing here), unrefused. A
    session taken over TAKEOVER_BUDGET times within the window is refused and FATAL instead,
    with the reason (lease_claim, on the server)."""
    me = Holder.me()
    for candidate in orphans(world, harnesses, skip=skip):
        reason = accept(candidate) if accept else None
        if isinstance(reason, Pass):
            world.lease_pass(candidate.session_id, candidate.from_epoch, f"{me.host}: {reason}")
        elif reason:
            world.lease_refuse(candidate.session_id, candidate.from_epoch, reason)
        elif world.lease_claim(candidate.session_id, candidate.from_epoch, me, ttl_s):
            return candidate
    return None


def steal(world: TeamWorld, session_id: str, ttl_s: float, only_held: bool = False) -> int | None:
    """End whoever holds the session's lease, live or not: the epoch moves on to this process.
    only_held: leave a released lease alone (None)."""
    epoch = world.lease_move(session_id, Holder.me(), ttl_s, only_held)
    if epoch is None and not only_held:  # no lease yet: take a first one
        return take(world, session_id, ttl_s)
    return epoch


def seconds_left(world: TeamWorld, session_id: str) -> float | None:
    """How long another holder's lease lives on (None: free, lapsed, released or mine)."""
    found = world.leases(session_id).get(session_id)
    if found is None or found.released or found.held_by(Holder.me()):
        return None
    return found.left if found.left > 0 else None


def wait_free(world: TeamWorld, session_id: str, patience: float) -> bool:
    """Wait (woken by any lease change, else at the lease's end) until nobody else holds the
    session or `patience` seconds passed; whether it is free."""
    import time

    deadline = time.monotonic() + patience
    changes = world.lease_changes()
    try:
        while (left := seconds_left(world, session_id)) is not None:
            budget = deadline - time.monotonic()
            if budget <= 0:
                return False
            changes.wait(min(left + 0.2, budget))
        return True
    finally:
        changes.close()


def before_resume(world_name: str, ref: str, url, steal_it: bool, wait, adopt_epoch,
                  notice) -> int | None:
    """`dh resume S --world W`: with --wait, wait for another holder's lease to end;
    with --steal, end it (the epoch moves on; the old holder's writes are refused from now).
    The epoch this process is to adopt (claimed by a worker, or stolen), else None."""
    if adopt_epoch is not None or not (steal_it or wait):
        return adopt_epoch
    from . import open_world

    world = open_world(world_name, url)
    try:
        found = world.find_session(ref)
        if wait and not steal_it and not wait_free(world, found.id, wait):
            raise SessionLocked(f"session {found.id} is still held by another machine after "
                                f"waiting {wait:g} s", hint="wait longer, or pass --steal")
        if steal_it and seconds_left(world, found.id) is not None:
            epoch = steal(world, found.id, 15)
            notice(f"dh: took the lease of session {found.id} from its holder (now epoch {epoch})")
            return epoch
        return None
    finally:
        world.close()


# how sessions are held, for status and list -------------------------------------------------
@dataclass
class Holding:
    session_id: str
    holder: str | None
    lease_age: float | None  # seconds since the last heartbeat
    epoch: int | None
    state: str  # running here | running on HOST | orphaned[, left by HOST: …] | finished | refused: … | -

    def to_dict(self) -> dict:
        return asdict(self)


def holdings(world: TeamWorld) -> dict[str, Holding]:
    me, leases = Holder.me(), world.leases()
    return {s.id: _holding(s.id, s.state, leases.get(s.id), me) for s in world.sessions()}


def _holding(sid: str, state: str, lease: LeaseRow | None, me: Holder) -> Holding:
    if lease is None:
        return Holding(sid, None, None, None, "-" if state in OPEN_STATES else (state or "-"))
    holder, age = f"{lease.host} (pid {lease.pid})", round(lease.age, 1)
    if lease.refused:
        shown = f"refused: {lease.refused}"
    elif state not in OPEN_STATES or lease.released:
        shown = "finished" if state == "finished" else (state or "-")
    elif lease.left <= 0:
        shown = f"orphaned, left by {lease.passed}" if lease.passed else "orphaned"
    else:
        shown = "running here" if (lease.host, lease.boot_id) == (me.host, me.boot_id) \
            else f"running on {lease.host}"
    return Holding(sid, holder, age, lease.epoch, shown)


def record_takeover(local: LocalWorld, session_id: str, lease: Lease, by: str) -> None:
    """The takeover in the session's own timeline (shipped with it): from host A at epoch n
    to this host at epoch n+1. Nothing when the lease was simply free."""
    found = lease.world.leases(session_id).get(session_id)
    if found is not None and found.prev_epoch is not None:
        events.add(local, session_id, events.takeover(found.prev_host, found.prev_epoch,
                                                      found.host, found.epoch, by))


def ship_now(local: LocalWorld, lease: Lease, session_id: str) -> None:
    """Push the session under the lease before it is released: a resume that found nothing
    to do (the turn was complete) never started the live shipper, and the world must learn
    the session's state. Refused by the fence when the epoch moved on meanwhile."""
    from ..errors import WorldError
    from .sync import push

    if lease.epoch is None:
        return
    try:
        lease.world.fence(session_id, lease.epoch)
        push(local, lease.world, [session_id])
    except WorldError:
        pass  # fenced, or the server is gone: the local log keeps it all


def end_hold(local: LocalWorld, lease: Lease, session_id: str, failure: BaseException | None,
             claimed: bool) -> None:
    """The end of `dh resume --world`'s hold. A resume that ran (its supervisor decided how the
    session ended), or one the user stopped, releases the lease. One that failed before its
    supervisor started ended nothing: the session stays open. Claimed by a worker, the failure
    is this session's on this machine (no harness, bad native state…) and would repeat on the
    next claim, so the lease is refused with the reason (kept from every worker, shown by
    `dh world status`, cleared by the next holder); a lost server, or a manual resume, lets the
    lease lapse now, so the session is claimable again."""
    from ..errors import HarnessNotFound, NotGranted, WorldError

    ship_now(local, lease, session_id)
    try:
        if failure is None or isinstance(failure, (KeyboardInterrupt, SessionLocked)):
            lease.release()
        elif isinstance(failure, (HarnessNotFound, NotGranted)):
            # this machine's limit (no harness, fewer permissions): another may run it
            lease.let_go(passed=_reason(failure))
        elif claimed and not isinstance(failure, WorldError):
            lease.let_go(refused=f"dh resume on {Holder.me().host} failed before the harness "
                                 f"started: {_reason(failure)}")
        else:
            lease.let_go()
    finally:
        lease.world.close()


def _reason(failure: BaseException) -> str:
    text = str(failure).strip() or type(failure).__name__
    return text.splitlines()[0][:300]
