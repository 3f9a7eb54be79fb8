"""A session's takeovers are counted in the world (issue 30): one whose resume keeps dying was
claimed again every TTL, forever (14 launches in 40 s). Past TAKEOVER_BUDGET claims within
the window it is FATAL for everyone, the reason on its lease; a worker that passes a session
on (its own problem) leaves it claimable by the others, unrefused."""

from __future__ import annotations

import pytest

from dh_cli.models import Session
from dh_cli.util import new_session_id, now_iso
from dh_cli.worlds.takeover import PASS, TAKEOVER_BUDGET, claim
from dh_cli.worlds.tenure import acquire

from .pg import pg_url  # noqa: F401  (fixture)

pytestmark = [pytest.mark.postgres]


def orphaned_session(world) -> str:
    sid = new_session_id()
    world.put_session(Session(id=sid, harness="pi", cwd="/tmp", host="host-a", state="running",
                              created_at=now_iso(), updated_at=now_iso()))
    acquire(world, sid, 1)
    lapse(world, sid)
    return sid


def lapse(world, sid: str) -> None:
    """The holder went silent long ago (its resume child died)."""
    world._rows("UPDATE dh.leases SET heartbeat_at = now() - interval '1 hour' WHERE session_id = %s"
                " RETURNING 1", [sid])


def test_a_session_taken_over_too_often_is_fatal_for_everyone(pg_url):
    from dh_cli.worlds.postgres import PostgresWorld

    world = PostgresWorld(pg_url)
    try:
        sid = orphaned_session(world)
        for _ in range(TAKEOVER_BUDGET):
            got = claim(world, 15)
            assert got is not None and got.session_id == sid
            lapse(world, sid)
        assert claim(world, 15) is None
        refused = world._rows("SELECT refused FROM dh.leases WHERE session_id = %s", [sid])[0][0]
        assert refused.startswith(f"FATAL: taken over {TAKEOVER_BUDGET} times"), refused
        assert world.get_session(sid).state == "fatal"
    finally:
        world.close()


def test_a_session_passed_on_stays_claimable_by_others(pg_url):
    from dh_cli.worlds.postgres import PostgresWorld

    world = PostgresWorld(pg_url)
    try:
        sid = orphaned_session(world)
        assert claim(world, 15, accept=lambda _c: PASS) is None
        assert world._rows("SELECT refused FROM dh.leases WHERE session_id = %s", [sid])[0][0] is None
        assert claim(world, 15).session_id == sid  # another worker
    finally:
        world.close()
