"""A machine that comes back after its session went on elsewhere (issue 30), against each
team world on its real server: A runs a session live in the world with `--world W --url`
(no world in its config); B resumes it and goes on. A's plain `dh resume S` then asks the world the session
replicated to, launches nothing and says where the session went; once A pulled what B did it
may resume; `--world local` resumes A's copy on purpose, as a fork, and says so."""

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


def test_a_returning_machine_does_not_run_again_what_went_on_elsewhere(tmp_path, team: Team):
    variable = f"DH_{team.name.upper()}_URL"
    server = FakeModelServer(SCRIPT).start()
    try:
        a, b = rigs(tmp_path, server, "A", "B")
        for rig in (a, b):
            rig.env.pop("DH_WORLD", None)
            rig.env.pop(variable, None)
        ran = a.dh("run", "pi", "--world", team.name, "--url", team.url, "--",
                   *HEADLESS_ARGS["pi"]("Create the files."), timeout=120)
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

        pulled = a.dh("world", "pull", team.name, "--url", team.url, timeout=120)
        assert pulled.returncode == 0, pulled.stderr.decode()
        again = a.dh("resume", sid, timeout=120)  # A now holds what B did: nothing to run
        assert again.returncode == 0, again.stderr.decode()
        assert b"already finished its turn" in again.stderr
        assert len(server.main_requests()) == asked

        forked = a.dh("resume", sid, "--world", "local", "--prompt", "Mine now.", timeout=120)
        assert forked.returncode == 0, forked.stderr.decode()
        assert b"as a fork the world does not follow" in forked.stderr
    finally:
        server.stop()
