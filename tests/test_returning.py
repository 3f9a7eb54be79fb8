"""A machine that comes back after its session went on elsewhere (issue 30), against each
team world on its real server: A runs a session live in the world with `--world W --url`
(no world in its config); B resumes it and goes on. A's plain `dh resume S` then asks the world the session
replicated to, launches nothing and says where the session went; `--world local` then goes on
with A's copy as a NEW session, forked by the harness (tests/test_fork.py has the details),
the world's session untouched; once A pulled what B did it may resume."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from dh_cli import events
from dh_cli.util import without_password
from tests.fakes.model_server import FakeModelServer
from tests.rig import HEADLESS_ARGS, SCRIPT

from .helpers.live_world import rigs
from .helpers.team_worlds import Team, pg_url, redis_url, team  # noqa: F401  (fixtures)
from .live_leftovers import nothing_left  # noqa: F401  (fixture)

pytestmark = [pytest.mark.usefixtures("nothing_left")]


def launches(rig, sid: str) -> int:
    return sum(e.type == events.LAUNCHED for e in rig.world().events(sid))


def in_the_world(team: Team, sid: str) -> tuple:
    """The session's row, records and events as the world holds them."""
    world = team.open()
    try:
        return (world.get_session(sid), world.events(sid),
                {s.relpath: [r.raw for r in world.read_records(sid, s.relpath)] for s in world.sources(sid)})
    finally:
        world.close()


def test_a_returning_machine_does_not_run_again_what_went_on_elsewhere(tmp_path, team: Team):
    variable = f"DH_{team.name.upper()}_URL"
    server = FakeModelServer(SCRIPT).start()
    try:
        a, b = rigs(tmp_path, server, "A", "B")
        for rig in (a, b):
            rig.env.pop("DH_WORLD", None)
            rig.env.pop(variable, None)
        ran = a.dh("run", "claude-code", "--world", team.name, "--url", team.url, "--",
                   *HEADLESS_ARGS["claude-code"]("Create the files."), timeout=120)
        assert ran.returncode == 0, ran.stderr.decode()
        (sid,) = [s["id"] for s in a.world().list_sessions()]
        db = sqlite3.connect(Path(a.env["DH_HOME"]) / "dh.db")
        assert db.execute("SELECT world, url FROM session_worlds").fetchall() == [
            (team.name, without_password(team.url))]
        db.close()

        went_on = b.dh("resume", sid, "--world", team.name, "--url", team.url, "--prompt",
                       "One more thing.", timeout=120)
        assert went_on.returncode == 0, went_on.stderr.decode()
        asked, launched = len(server.main_requests()), launches(a, sid)

        blind = a.dh("resume", sid, timeout=120)  # the password is nowhere on A: asked, refused
        assert blind.returncode == 5 and b"cannot reach" in blind.stderr, blind.stderr.decode()
        a.env[variable] = team.url  # where A keeps it (no world configured)
        back = a.dh("resume", sid, timeout=120)
        err = back.stderr.decode()
        assert back.returncode == 4, err
        assert f"Error: session {sid} was resumed on " in err and "finished there" in err, err
        assert "`dh world pull` to see it" in err
        assert len(server.main_requests()) == asked and launches(a, sid) == launched

        there = in_the_world(team, sid)
        forked = a.dh("resume", sid, "--world", "local", "--prompt", "Mine now.", timeout=120)
        assert forked.returncode == 0, forked.stderr.decode()
        (fork,) = [s["id"] for s in a.world().list_sessions() if s["id"] != sid]
        assert launches(a, sid) == launched and launches(a, fork) == 1
        assert in_the_world(team, sid) == there  # S in the world: untouched
        assert b"Mine now." not in b"".join(r for rs in there[2].values() for r in rs)
        asked = len(server.main_requests())

        pulled = a.dh("world", "pull", team.name, "--url", team.url, timeout=120)
        assert pulled.returncode == 0, pulled.stderr.decode()
        again = a.dh("resume", sid, timeout=120)  # A now holds what B did: nothing to run
        assert again.returncode == 0, again.stderr.decode()
        assert b"already finished its turn" in again.stderr
        assert len(server.main_requests()) == asked
    finally:
        server.stop()
