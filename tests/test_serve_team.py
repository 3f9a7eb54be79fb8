"""`dh serve --world postgres`: the team page and the list's holder column read the world as
it is (leases, epochs, takeovers), through dh_cli/serve/team.py, against a real PostgreSQL."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys

import httpx
import pytest

from dh_cli.team.postgres import PostgresWorld
from dh_cli.team.tenure import acquire

from .helpers.serve import ROOT, Served, fixed_log
from .pg import pg_url  # noqa: F401 (fixture)

pytestmark = pytest.mark.postgres


def test_the_team_page_shows_who_holds_what_and_the_takeovers(pg_url, tmp_path):  # noqa: F811
    dh_home = tmp_path / "dh-home"
    ids = fixed_log(dh_home, tmp_path)
    env = {**os.environ, "DH_HOME": str(dh_home), "PYTHONPATH": str(ROOT)}
    pushed = subprocess.run([sys.executable, "-m", "dh_cli", "world", "push", "postgres", "--url", pg_url],
                            env=env, capture_output=True, text=True, timeout=120)
    assert pushed.returncode == 0, pushed.stderr
    world = PostgresWorld(pg_url)
    epoch = acquire(world, ids["hostile"], 60)
    world.close()
    served = Served(env, "--world", "postgres", "--url", pg_url)
    try:
        team = httpx.get(served.base + "/team", headers=served.headers, timeout=60).text
        here = socket.gethostname()
        machine = re.search(rf"<tr><td>{re.escape(here)}</td><td class=\"num\">(\d+)</td>", team)
        assert machine and int(machine.group(1)) >= 1
        held = re.search(rf'{ids["hostile"]}</a></td><td>claude-code</td><td>{re.escape(here)} \(pid \d+\)</td>'
                         rf'<td class="num">{epoch}</td>', team)
        assert held, team
        assert "taken from host-a (epoch 1) by host-b" in team
        listed = httpx.get(served.base + "/", headers=served.headers, timeout=60).text
        row = re.search(rf'<tr data-id="{ids["hostile"]}".*?</tr>', listed, re.S).group(0)
        assert f"{here} (pid" in row and f"epoch {epoch}" in row
    finally:
        served.stop()
