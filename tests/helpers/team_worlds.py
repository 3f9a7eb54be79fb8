"""The team worlds under test, each on its real server: PostgreSQL (tests/pg.py) and Redis
(tests/redis_server.py). The `team` fixture runs a test once per world; a Team opens the
world, reads its leases and takes its server away for a while."""

from __future__ import annotations

import pytest

from tests import pg
from tests.helpers import redis_server
from tests.pg import pg_url  # noqa: F401  (fixture)
from tests.helpers.redis_server import redis_url  # noqa: F401  (fixture)

TEAM_WORLDS = [pytest.param("postgres", marks=pytest.mark.postgres),
               pytest.param("redis", marks=pytest.mark.redis)]
URL_FIXTURES = {"postgres": "pg_url", "redis": "redis_url"}


class Team:
    """A team world under test: its name, its URL, and its server, to stop and start."""

    def __init__(self, name: str, url: str):
        self.name, self.url = name, url

    def open(self):
        from dh_cli.team import open_world

        return open_world(self.name, self.url)

    def lease_epoch(self, sid: str) -> int | None:
        """The session's lease epoch (None before any lease): one for the first run's, one
        more at each claim, so a takeover shows as epoch 2."""
        world = self.open()
        try:
            found = world.leases(sid).get(sid)
            return found.epoch if found else None
        finally:
            world.close()

    def drop_snapshots(self, sid: str) -> None:
        """Delete the session's workspace snapshots from the world (a world that never had
        one), as an operator would with the server's own client."""
        world = self.open()
        try:
            if self.name == "postgres":
                world._rows("DELETE FROM dh.ws_snapshots WHERE session_id = %s RETURNING 1", [sid])
            else:
                world.client.delete(f"dh:ws_snapshots:{sid}")
        finally:
            world.close()

    def last_snapshot_step(self, sid: str) -> str | None:
        """The step of the session's last workspace snapshot in the world."""
        from dh_cli.workspace.restore import pick

        world = self.open()
        try:
            snap = pick(world, sid)
            return snap.step if snap else None
        finally:
            world.close()

    def drop_snapshots_after(self, sid: str, seq: int) -> None:
        """Delete the session's workspace snapshots after `seq` from the world."""
        world = self.open()
        try:
            if self.name == "postgres":
                world._rows("DELETE FROM dh.ws_snapshots WHERE session_id = %s AND seq > %s"
                            " RETURNING 1", [sid, seq])
            else:
                key = f"dh:ws_snapshots:{sid}"
                later = [k for k in world.client.hkeys(key) if int(k) > seq]
                if later:
                    world.client.hdel(key, *later)
        finally:
            world.close()

    def outage(self, during) -> None:
        """Stop the server, run `during()`, start the server again."""
        if self.name == "postgres":
            srv = pg.server()
            if not srv.controllable:
                pytest.skip("the server at DH_TEST_POSTGRES_URL is not ours to stop")
            srv.stop("fast")
            try:
                during()
            finally:
                srv.start()
                pg.wait_ready(srv)
        else:
            srv = redis_server.server()
            srv.stop()
            try:
                during()
            finally:
                srv.start()


@pytest.fixture(params=TEAM_WORLDS)
def team(request) -> Team:
    return Team(request.param, request.getfixturevalue(URL_FIXTURES[request.param]))
