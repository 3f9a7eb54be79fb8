"""`dh serve --world postgres|redis`: the team page and the list's holder column read the
team world as it is (leases, epochs, takeovers), through dh_cli/serve/team.py, against each
world's real server (tests/helpers/team_worlds.py)."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys

import httpx

from dh_cli.team.tenure import acquire

from .helpers.serve import ROOT, Served, fixed_log
from .helpers.team_worlds import team, pg_url, redis_url  # noqa: F401 (fixtures)


def test_the_team_page_shows_who_holds_what_and_the_takeovers(team, tmp_path):  # noqa: F811
    dh_home = tmp_path / "dh-home"
    ids = fixed_log(dh_home, tmp_path)
    env = {**os.environ, "DH_HOME": str(dh_home), "PYTHONPATH": str(ROOT)}
    reset = _waiting_on_a_limit(dh_home, ids["crashed"])
    pushed = subprocess.run([sys.executable, "-m", "dh_cli", "world", "push", team.name, "--url", team.url],
                            env=env, capture_output=True, text=True, timeout=120)
    assert pushed.returncode == 0, pushed.stderr
    world = team.open()
    epoch = acquire(world, ids["hostile"], 60)
    world.close()
    served = Served(env, "--world", team.name, "--url", team.url)
    try:
        page = httpx.get(served.base + "/team", headers=served.headers, timeout=60).text
        here = socket.gethostname()
        machine = re.search(rf"<tr><td>{re.escape(here)}</td><td class=\"num\">(\d+)</td>", page)
        assert machine and int(machine.group(1)) >= 1
        held = re.search(rf'{ids["hostile"]}</a></td><td>claude-code</td><td>{re.escape(here)} \(pid \d+\)</td>'
                         rf'<td class="num">{epoch}</td>', page)
        assert held, page
        assert "taken from host-a (epoch 1) by host-b" in page
        waits = re.search(rf'{ids["crashed"]}</a>.*?<div class="sub limit" data-reset="(\d+)">(.*?)</div>', page, re.S)
        assert waits and int(waits.group(1)) == int(reset * 1000), page
        assert "waiting on the 5-hour limit of claude-code · Anthropic" in waits.group(2)
        assert '<span class="countdown">' in waits.group(2)
        assert f'<p class="meta" id="world">Team world: {team.name}</p>' in page
        listed = httpx.get(served.base + "/", headers=served.headers, timeout=60).text
        row = re.search(rf'<tr data-id="{ids["hostile"]}".*?</tr>', listed, re.S).group(0)
        assert f"{here} (pid" in row and f"epoch {epoch}" in row
    finally:
        served.stop()


def _waiting_on_a_limit(dh_home, session_id: str) -> float:
    """The session waits out a 5-hour limit an hour long, as the supervisor logs it (its
    limit event, its state); returns the reset (epoch seconds)."""
    import time

    from dh_cli.worlds.local import LocalWorld

    world, reset = LocalWorld(dh_home / "dh.db"), time.time() + 3600
    world.add_event(session_id, "limit", {"which": "five_hour", "label": "5-hour", "reset_at": reset,
                                          "where": "record", "text": "limit reached"}, 2, "info")
    world.conn.execute("UPDATE sessions SET state = 'waiting' WHERE id = ?", [session_id])
    world.conn.commit()
    world.close()
    return reset
