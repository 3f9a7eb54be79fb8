"""`dh serve --world postgres|redis` over a team world with damaged rows, on the real servers:
the team page reads every session's journal, its sources' marks and the last record of each,
and a row of one session that is no row dh wrote (an event whose details are no JSON, the
record it reads last, Redis: the session's row, a source row, an event's key) makes that
session `damaged`, with one line saying why (masked, controls made visible, clipped: any
member of the team may have written it). Every other session is shown as it stands and the
page answers 200. `dh log list --world` lists them all too."""

from __future__ import annotations

import html
import json
import re
import socket
from dataclasses import replace

from dh_cli.team.sync import pull
from dh_cli.worlds.local import LocalWorld

from .helpers.cli import dh
from .helpers.damaged_world import LINES, a_session, damaged_world, set_row
from .helpers.secrets_text import ESCAPES, KEY
from .helpers.serve import in_process
from .helpers.team_worlds import Team, pg_url, redis_url, team  # noqa: F401  (fixtures)

TIP, HOSTILE, EVENT_KEY = "1sessTtip", "1sessHhostile", "1sessEeventkey"
HOSTILE_PATH = f"sessions/{ESCAPES[1]}{KEY}" + "k" * 5000 + ".jsonl"


def a_damaged_team(team: Team) -> tuple[list[str], list[str], str]:
    """(every session of the world, the ones the team page must call damaged, the one whose
    event's details are no JSON). The record a
    session's source holds last is damaged in two: one under a source whose name carries a
    key, a clipboard escape and 5000 characters."""
    remote = team.open()
    try:
        made = damaged_world(remote)
        damaged = [sid for sid, how in made.items() if how in ("event", "session row", "source row")]
        for n, (sid, path) in enumerate(((TIP, None), (HOSTILE, HOSTILE_PATH))):
            source = a_session(remote, sid, f"2026-02-0{n + 1}T00:00:00.000Z", path)
            set_row(remote, source, (LINES - 1) * 10, 99, b'{"i":3}\n')
            damaged.append(sid)
        if remote.name == "redis":
            a_session(remote, EVENT_KEY, "2026-03-01T00:00:00.000Z")
            remote.client.hset(f"dh:events:{EVENT_KEY}", "one", b"[]")
            damaged.append(EVENT_KEY)
        every = [*made, TIP, HOSTILE] + ([EVENT_KEY] if remote.name == "redis" else [])
        return every, damaged, next(sid for sid, how in made.items() if how == "event")
    finally:
        remote.close()


def session_rows(page: str) -> dict[str, str]:
    """The team page's "Sessions held" rows by session id."""
    table = page.split('<table class="held">')[1].split("</table>")[0]
    return {m.group(1): m.group(0) for m in re.finditer(r'<tr><td><a href="/s/([^"]+)">.*?</tr>', table, re.S)}


def test_the_team_page_shows_each_damaged_session_and_every_other(tmp_path, team: Team):
    every, damaged, event = a_damaged_team(team)
    client = in_process(tmp_path / "dh-home", team.name, team.url)
    page = client.get("/team")
    assert page.status_code == 200, page.text[:2000]
    rows = session_rows(page.text)
    assert sorted(rows) == sorted(every)
    said = {sid: re.search(r'<div class="sub damaged">(.*?)</div>', row, re.S) for sid, row in rows.items()}
    assert sorted(sid for sid, found in said.items() if found) == sorted(damaged), rows
    for sid in damaged:  # one clipped line each, in the state column, that says why
        reason = html.unescape(said[sid].group(1))
        assert reason and "\n" not in reason and len(reason) <= 300, (sid, reason)
        assert "<td>damaged<div" in rows[sid], rows[sid]
        assert "Error" not in reason and "Traceback" not in reason, reason
    assert "event" in said[event].group(1)
    assert all("<td>exited</td>" in row for sid, row in rows.items() if sid not in damaged)
    assert "codec 99" in said[TIP].group(1) and "0:30" in said[TIP].group(1)
    assert "codec 99" in said[HOSTILE].group(1)
    assert KEY not in page.text and "\x1b" not in page.text and "\x07" not in page.text
    takeovers = page.text.split('<ol class="takeovers">')[1]
    assert "<li>none</li>" in takeovers  # the others' journals were read: none holds a takeover


def test_records_not_yet_in_the_world_leave_out_a_session_damaged_there(tmp_path, redis_url):  # noqa: F811
    """Redis: this machine pulled two sessions whole; the world's row of one is damaged since,
    so the world's count of its records is unknown: it is not counted as records the world
    lacks (it would count all LINES of it)."""
    team = Team("redis", redis_url)
    remote = team.open()
    try:
        for n, sid in enumerate(("1sessWwhole", "1sessWdamaged")):  # held by this machine
            a_session(remote, sid, f"2026-05-0{n + 1}T00:00:00.000Z")
            remote.put_session(replace(remote.get_session(sid), host=socket.gethostname(),
                                       updated_at=f"2026-05-0{n + 1}T00:00:01.000Z"))
        pull(remote, LocalWorld(tmp_path / "dh-home" / "dh.db"), ["1sessWwhole", "1sessWdamaged"])
        remote.client.hset("dh:sessions", "1sessWdamaged", b'["1sessWdamaged", 7]')
    finally:
        remote.close()
    page = in_process(tmp_path / "dh-home", team.name, team.url).get("/team")
    assert page.status_code == 200, page.text[:2000]
    here = re.search(rf"<tr><td>{re.escape(socket.gethostname())}</td>(.*?)</tr>", page.text)
    assert here, page.text
    assert here.group(1).endswith('<td class="num">0</td>'), here.group(1)


def test_the_world_listing_lists_every_session_of_a_damaged_world(tmp_path, team: Team, monkeypatch):
    monkeypatch.setenv("DH_HOME", str(tmp_path / "other-machine"))
    every, _, _ = a_damaged_team(team)
    listed = dh("log", "list", "--world", team.name, "--url", team.url, "--json")
    assert listed.returncode == 0 and "Traceback" not in listed.stderr, (listed.returncode, listed.stderr)
    assert sorted(row["id"] for row in json.loads(listed.stdout)) == sorted(every)
    shown = dh("log", "list", "--world", team.name, "--url", team.url)
    assert shown.returncode == 0 and "Traceback" not in shown.stderr, (shown.returncode, shown.stderr)
