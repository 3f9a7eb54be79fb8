"""A session's takeovers are counted in the world (issue 30): one whose resume keeps dying was
claimed again every TTL, forever (14 launches in 40 s). Past TAKEOVER_BUDGET claims within
the window it is FATAL for everyone, the reason on its lease; a worker that passes a session
on (its own problem) leaves it claimable by the others, unrefused. Each team world on its
real server: the count is the server's (a PostgreSQL table, a Redis sorted set)."""

from __future__ import annotations

from dh_cli.models import Session
from dh_cli.util import new_session_id, now_iso
from dh_cli.team.protocol import TAKEOVER_BUDGET, Holder
from dh_cli.team.takeover import claim
from dh_cli.team.tenure import acquire

from .helpers.team_worlds import Team, pg_url, redis_url, team  # noqa: F401  (fixtures)


def orphaned_session(world, state: str = "running") -> str:
    sid = new_session_id()
    world.put_session(Session(id=sid, harness="pi", cwd="/tmp", host="host-a", state=state,
                              created_at=now_iso(), updated_at=now_iso()))
    acquire(world, sid, 60, Holder("host-a", "boot-a", 1))
    lapse(world, sid)
    return sid


def lapse(world, sid: str) -> None:
    """The holder went silent (its resume child died): its lease lapses now."""
    world.lease_lapse(sid, world.leases(sid)[sid].epoch)


def test_a_session_taken_over_too_often_is_fatal_for_everyone(team: Team):
    world = team.open()
    try:
        sid = orphaned_session(world)
        for _ in range(TAKEOVER_BUDGET):
            got = claim(world, 15)
            assert got is not None and got.session_id == sid
            lapse(world, sid)
        assert claim(world, 15) is None
        lease = world.leases(sid)[sid]
        assert lease.refused.startswith(f"FATAL: taken over {TAKEOVER_BUDGET} times"), lease.refused
        assert lease.epoch == 1 + TAKEOVER_BUDGET  # the refused claim moved nothing
        assert world.get_session(sid).state == "fatal"
        assert claim(world, 15) is None  # nor does any later one
    finally:
        world.close()


def test_a_session_passed_on_stays_claimable_by_others(team: Team):
    world = team.open()
    try:
        sid = orphaned_session(world)
        assert claim(world, 15, skip={sid}) is None
        assert world.leases(sid)[sid].refused is None
        assert claim(world, 15).session_id == sid  # another worker
    finally:
        world.close()


def test_sessions_passed_on_do_not_hide_the_ones_behind_them(team: Team):
    """A worker that passed on the five longest-silent orphans (no harness here) still finds
    the sixth: the passed ones are left out before the candidates are counted."""
    world = team.open()
    try:
        passed = [orphaned_session(world) for _ in range(5)]
        behind = orphaned_session(world)
        got = claim(world, 15, skip=set(passed))
        assert got is not None and got.session_id == behind
    finally:
        world.close()


def test_a_session_waiting_on_a_limit_is_taken_over_when_its_holder_dies(team: Team):
    """Its dh was killed during the wait: another worker goes on with it (and waits itself)."""
    world = team.open()
    try:
        sid = orphaned_session(world, state="waiting")
        got = claim(world, 15)
        assert got is not None and got.session_id == sid
    finally:
        world.close()
