"""One damaged thing in a team world stops only its own session: a record row with a codec no
dh knows, one whose packed bytes do not decode, one whose columns have the wrong types (Redis
keeps them as JSON; PostgreSQL's schema refuses them), a workspace tree whose bytes are not
a tree, one whose bytes are not what its hash says. `dh world pull` takes every other session
whole, says in one line each which session it could not take and why, leaves no part of a
damaged session in the log, and exits 7 ("pulled with failures"). Proven on the real
PostgreSQL and Redis servers, through the real CLI."""

from __future__ import annotations

import json

import pytest

from dh_cli.team.sync import pull
from dh_cli.workspace.store import store_for
from dh_cli.worlds.local import LocalWorld

from .helpers.cli import dh
from .helpers.damaged_world import LINES, a_session, damaged_world, set_row
from .helpers.secrets_text import ESCAPES, KEY
from .helpers.team_worlds import Team, pg_url, redis_url, team  # noqa: F401  (fixtures)


def test_a_damaged_row_or_tree_stops_only_its_session(tmp_path, team: Team, monkeypatch):
    remote = team.open()
    try:
        made = damaged_world(remote)
    finally:
        remote.close()
    monkeypatch.setenv("DH_HOME", str(tmp_path / "other-machine"))
    done = dh("world", "pull", team.name, "--url", team.url)
    assert done.returncode == 7, (done.returncode, done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    damaged = [sid for sid, how in made.items() if how != "good"]
    for sid in damaged:  # one line each, naming the session
        said = [line for line in lines if sid in line]
        assert len(said) == 1 and "not pulled" in said[0], (sid, lines)
    assert lines[-1].startswith("Error: ") and f"{len(damaged)} of {len(made)}" in lines[-1], lines
    assert len(lines) == len(damaged) + 1, lines
    local = LocalWorld()
    for sid, how in made.items():
        if how == "good":  # whole: every record, its snapshot and the file it reaches
            assert local.record_count(sid) == LINES
            snaps = store_for(local).snapshots(sid)
            assert [s.seq for s in snaps] == [1]
        else:  # nothing of it: never half a session that looks whole
            with pytest.raises(Exception):
                local.get_session(sid)
    # the reasons say what was wrong
    text = "\n".join(lines)
    assert "codec 99" in text and "0:10" in text
    assert "tree" in text and "event" in text
    # and the world's listing still shows every session, the damaged ones too
    listed = dh("world", "status", team.name, "--url", team.url, "--json")
    assert listed.returncode == 0, listed.stderr
    assert {row["session_id"] for row in json.loads(listed.stdout)} == set(made)


def test_pull_of_one_damaged_session_raises(tmp_path, team: Team, monkeypatch):
    """`dh resume --world` and the worker pull one session: damage refuses it, one error,
    and leaves nothing of it here."""
    remote = team.open()
    try:
        sid = next(s for s, how in damaged_world(remote).items() if how == "packed")
        monkeypatch.setenv("DH_HOME", str(tmp_path / "other-machine"))
        from dh_cli.errors import DhError

        with pytest.raises(DhError, match=sid):
            pull(remote, LocalWorld(), [sid])
    finally:
        remote.close()
    with pytest.raises(Exception):
        LocalWorld().get_session(sid)


def test_a_session_already_here_keeps_what_it_had(tmp_path, team: Team, monkeypatch):
    """Sessions pulled before, whose world copy was damaged since: where the two copies are
    compared (the last record this log holds), or in a copy that diverged (stored here as a
    generation of its own, every row checked as any pulled row is). Each is named, keeps
    the records it had, and the session after them is pulled."""
    remote = team.open()
    try:
        compared = a_session(remote, "1sessAcompared", "2026-01-01T00:00:00.000Z")
        forked = a_session(remote, "1sessBdiverged", "2026-01-02T00:00:00.000Z")
        monkeypatch.setenv("DH_HOME", str(tmp_path / "other-machine"))
        assert pull(remote, LocalWorld()).records == 2 * LINES
        set_row(remote, compared, (LINES - 1) * 10, 99, b'{"i":3}\n')
        set_row(remote, forked, (LINES - 1) * 10, 0, b'{"i":"went on elsewhere"}\n')
        set_row(remote, forked, 10, 99, b'{"i":1}\n')
        a_session(remote, "1sessClater", "2026-01-03T00:00:00.000Z")
    finally:
        remote.close()
    done = dh("world", "pull", team.name, "--url", team.url)
    assert done.returncode == 7, (done.returncode, done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert [line for line in lines if "1sessAcompared" in line and "0:30" in line and "codec 99" in line]
    assert [line for line in lines if "1sessBdiverged" in line and "0:10" in line and "codec 99" in line]
    assert len(lines) == 3 and "Traceback" not in done.stderr, lines
    local = LocalWorld()
    assert [local.record_count(sid) for sid in ("1sessAcompared", "1sessBdiverged", "1sessClater")] \
        == [LINES, LINES, LINES]
    shown = dh("log", "show", "1sessBdiverged")
    assert shown.returncode == 0, shown.stderr


def test_the_reason_is_one_masked_clipped_line(tmp_path, team: Team, monkeypatch):
    """A damaged record in a source whose name in the world carries a key, a clipboard
    escape and 5000 characters: the line naming the session says why without any of them."""
    remote = team.open()
    try:
        hostile = a_session(remote, "1sessHhostile", "2026-01-01T00:00:00.000Z",
                            f"sessions/{ESCAPES[1]}{KEY}" + "k" * 5000 + ".jsonl")
        set_row(remote, hostile, 10, 99, b'{"i":1}\n')
        a_session(remote, "1sessIgood", "2026-01-02T00:00:00.000Z")
    finally:
        remote.close()
    monkeypatch.setenv("DH_HOME", str(tmp_path / "other-machine"))
    done = dh("world", "pull", team.name, "--url", team.url)
    assert done.returncode == 7, (done.returncode, done.stdout, done.stderr)
    (said,) = [line for line in done.stderr.splitlines() if "1sessHhostile" in line]
    assert "not pulled" in said and "codec 99" in said and len(said) <= 400, said
    assert KEY not in done.stderr and "\x1b" not in done.stderr and "\x07" not in done.stderr
    assert LocalWorld().record_count("1sessIgood") == LINES
