"""`dh world push` when the world's copy of a session is damaged where push compares it with
this machine's (the record both copies hold last), on the real PostgreSQL and Redis
servers, through the real CLI: the session is named on stderr with why, the others are
pushed, dh exits 7, and the hint says what to do about a world's damaged copy, not to push
from a machine that holds it whole (this one does)."""

from __future__ import annotations

from dh_cli.team.sync import pull
from dh_cli.worlds.local import LocalWorld

from .helpers.cli import dh
from .helpers.damaged_world import LINES, a_session, set_row
from .helpers.team_worlds import Team, pg_url, redis_url, team  # noqa: F401  (fixtures)

DAMAGED, WHOLE = "1sessPdamaged", "1sessPwhole"


def test_push_against_a_damaged_world_copy_says_what_to_do(tmp_path, team: Team, monkeypatch):
    monkeypatch.setenv("DH_HOME", str(tmp_path / "this-machine"))
    remote = team.open()
    try:
        made = {sid: a_session(remote, sid, f"2026-04-0{n + 1}T00:00:00.000Z")
                for n, sid in enumerate((DAMAGED, WHOLE))}
        pull(remote, LocalWorld(), list(made))
        set_row(remote, made[DAMAGED], (LINES - 1) * 10, 99, b'{"i":3}\n')
    finally:
        remote.close()
    local = LocalWorld()
    local.add_event(WHOLE, "run", {}, 1, "info")  # something of the whole one to push
    local.close()
    done = dh("world", "push", team.name, "--url", team.url)
    assert done.returncode == 7, (done.returncode, done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    said = [line for line in lines if DAMAGED in line]
    assert len(said) == 1 and "not pushed" in said[0] and "codec 99" in said[0], lines
    assert not [line for line in lines if WHOLE in line], lines
    error = next(i for i, line in enumerate(lines) if line.startswith("Error: "))
    hint = " ".join(lines[error:])
    assert "from a machine that holds" not in hint, hint
    assert "world's" in hint and "no dh command removes a session from a world" in hint, hint
    assert "1 event(s) added" in done.stdout, done.stdout
    assert dh("log", "show", DAMAGED).returncode == 0  # this log's copy is whole: the hint's test
