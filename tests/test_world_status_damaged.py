"""`dh world status` over a team world with damaged rows, on the real PostgreSQL and Redis
servers, through the real CLI. A session whose rows status reads to compare the two copies
(its session row, its sources, the record both copies hold last) and finds damaged is
listed as `damaged`, with one line saying why: masked, control characters made visible,
clipped, since any member of the team may have written it. Every other session is listed
as it stands, and status exits 0: the listing is whole."""

from __future__ import annotations

import json

from dh_cli.team.sync import pull
from dh_cli.worlds.local import LocalWorld

from .helpers.cli import dh
from .helpers.damaged_world import LINES, a_session, damaged_world, set_row
from .helpers.secrets_text import ESCAPES, KEY
from .helpers.team_worlds import Team, pg_url, redis_url, team  # noqa: F401  (fixtures)

SYNCED, COMPARED, ROW, HOSTILE, EVENT_KEY = ("1sessHsynced", "1sessHcompared", "1sessHrow", "1sessHhostile",
                                             "1sessHeventkey")
HOSTILE_PATH = f"sessions/{ESCAPES[1]}{KEY}" + "k" * 5000 + ".jsonl"


def both_sides(remote) -> list[str]:
    """Sessions this machine pulled whole, damaged in the world since: the record status
    compares (both worlds); the session row (Redis). One left whole."""
    made = {sid: a_session(remote, sid, f"2026-02-0{n + 1}T00:00:00.000Z")
            for n, sid in enumerate((SYNCED, COMPARED, ROW))}
    pull(remote, LocalWorld(), list(made))
    set_row(remote, made[COMPARED], (LINES - 1) * 10, 99, b'{"i":3}\n')
    if remote.name != "redis":
        return [COMPARED]
    remote.client.hset("dh:sessions", ROW, b'["%s", 7]' % ROW.encode())
    return [COMPARED, ROW]


def hostile_rows(remote) -> list[str]:
    """Redis: a source row whose name carries a key, a clipboard escape and 5000 characters;
    an event under a key that is no number."""
    source = a_session(remote, HOSTILE, "2026-03-01T00:00:00.000Z")
    remote.client.hset(f"dh:source_ids:{HOSTILE}", HOSTILE_PATH, source.id + 1)
    remote.client.hset(f"dh:sources:{HOSTILE}", HOSTILE_PATH, b"{}")
    a_session(remote, EVENT_KEY, "2026-03-02T00:00:00.000Z")
    remote.client.hset(f"dh:events:{EVENT_KEY}", "one", b"[]")
    return [HOSTILE, EVENT_KEY]


def a_damaged_team(team: Team) -> tuple[list[str], dict[str, str], list[str]]:
    """(every session of the world, those made by damaged_world -> how, the ones status must
    call damaged)."""
    remote = team.open()
    try:
        made = damaged_world(remote)
        damaged = [sid for sid, how in made.items() if how in ("session row", "source row")]
        damaged += both_sides(remote)
        extra = [SYNCED, COMPARED, ROW]
        if remote.name == "redis":
            damaged += hostile_rows(remote)
            extra += [HOSTILE, EVENT_KEY]
        return [*made, *extra], made, damaged
    finally:
        remote.close()


def test_status_lists_each_damaged_session_as_damaged(tmp_path, team: Team, monkeypatch):
    monkeypatch.setenv("DH_HOME", str(tmp_path / "other-machine"))
    every, made, damaged = a_damaged_team(team)
    listed = dh("world", "status", team.name, "--url", team.url, "--json")
    assert listed.returncode == 0 and "Traceback" not in listed.stderr, (listed.returncode, listed.stderr)
    rows = {row["session_id"]: row for row in json.loads(listed.stdout)}
    assert sorted(rows) == sorted(every)
    assert sorted(sid for sid, row in rows.items() if row["status"] == "damaged") == sorted(damaged)
    for sid in damaged:  # one clipped line each, that says what is wrong
        reason = rows[sid]["reason"]
        assert reason and "\n" not in reason and len(reason) <= 300, (sid, reason)
        assert "Error" not in reason and "Traceback" not in reason and "<" not in reason, reason
    assert "codec 99" in rows[COMPARED]["reason"] and "0:30" in rows[COMPARED]["reason"]
    assert rows[COMPARED]["local_records"] == LINES
    assert rows[SYNCED]["status"] == "in sync" and rows[SYNCED]["reason"] is None
    assert {rows[sid]["status"] for sid, how in made.items() if how == "good"} == {"server only"}
    assert KEY not in listed.stdout and "\\u001b" not in listed.stdout


def test_status_text_says_why_in_one_line_each(tmp_path, team: Team, monkeypatch):
    monkeypatch.setenv("DH_HOME", str(tmp_path / "other-machine"))
    _, _, damaged = a_damaged_team(team)
    shown = dh("world", "status", team.name, "--url", team.url)
    assert shown.returncode == 0 and "Traceback" not in shown.stderr, (shown.returncode, shown.stderr)
    lines = shown.stderr.strip().splitlines()
    for sid in damaged:
        said = [line for line in lines if sid in line]
        assert len(said) == 1 and "damaged" in said[0] and len(said[0]) <= 400, (sid, lines)
    assert len(lines) == len(damaged), lines
    assert [line for line in lines if COMPARED in line and "codec 99" in line]
    table = shown.stdout
    assert sum(line.count("damaged") for line in table.splitlines()) >= len(damaged)
    for text in (table, shown.stderr):
        assert "\x1b" not in text and KEY not in text
