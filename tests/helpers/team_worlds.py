"""The team worlds under test, each on its real server. `SERVERS` is the one table of test
servers: a world's name (as dh_cli/team/__init__.py registers it) -> how its tests start,
stop and read its server. The `team` fixture runs a test once per registered world; a Team
opens the world, reads its leases and takes its server away for a while."""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable, ContextManager, Iterator

import pytest

from dh_cli import team as team_package
from tests import pg
from tests import workspace_stored as stored
from tests.helpers import redis_server
from tests.pg import pg_url  # noqa: F401  (fixture)
from tests.helpers.redis_server import redis_url  # noqa: F401  (fixture)


@dataclass(frozen=True)
class TestServer:
    """How the tests run one team world's real server."""

    __test__ = False  # a table row, not a test class

    database: Callable[[], ContextManager[str]]  # an empty database on it, for one test
    fresh_url: Callable[[], str]  # an empty database, left to the run's end (bench/)
    outage: Callable[[Callable[[], None]], None]  # stop it, run the callable, start it again
    drop_snapshots: Callable[..., None]  # (world, session id, after=0), as an operator would
    stored_bytes: Callable[[object], list[bytes]]  # everything it holds, decoded (workspace_stored.py)


SERVERS = {
    "postgres": TestServer(pg.database, pg.fresh_db, pg.outage, pg.drop_snapshots, stored.postgres_bytes),
    "redis": TestServer(redis_server.database, redis_server.fresh_url, redis_server.outage,
                        redis_server.drop_snapshots, stored.redis_world_bytes),
}

# one pytest param per registered world, marked with its name (tests/require.py, pyproject)
TEAM_WORLDS = [pytest.param(name, marks=getattr(pytest.mark, name)) for name in team_package.names()]


def server_of(name: str) -> TestServer:
    if name not in SERVERS:
        raise LookupError(f"the team world {name!r} has no test server: add it to SERVERS "
                          "(tests/helpers/team_worlds.py)")
    return SERVERS[name]


class Team:
    """A team world under test: its name, its URL, and its server, to stop and start."""

    def __init__(self, name: str, url: str):
        self.name, self.url = name, url
        self.server = server_of(name)

    def open(self):
        return team_package.open_world(self.name, self.url)

    def lease_epoch(self, sid: str) -> int | None:
        """The session's lease epoch (None before any lease): one for the first run's, one
        more at each claim, so a takeover shows as epoch 2."""
        world = self.open()
        try:
            found = world.leases(sid).get(sid)
            return found.epoch if found else None
        finally:
            world.close()

    def drop_snapshots(self, sid: str, after: int = 0) -> None:
        """Delete the session's workspace snapshots after the `after`-th from the world (all:
        a world that never had one), as an operator would with the server's own client."""
        world = self.open()
        try:
            self.server.drop_snapshots(world, sid, after)
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

    def outage(self, during) -> None:
        """Stop the server, run `during()`, start the server again."""
        self.server.outage(during)


@contextmanager
def team_at(name: str) -> Iterator[Team]:
    """The world `name` on an empty database of its test server."""
    with server_of(name).database() as url:
        yield Team(name, url)


@pytest.fixture(params=TEAM_WORLDS)
def team(request) -> Iterator[Team]:
    with team_at(request.param) as made:
        yield made
