"""`dh resume S --world local` of a session that replicated to a world (one writer
everywhere): this machine's copy goes on as a NEW session S', forked by the harness itself
(Claude Code's `--resume --fork-session`; for Pi, whose `--fork` cannot be told where to write,
the copy its fork writes, resumed), journalled as forked from S and shown so in
`dh log show` and `dh log list`; S's log and native file stay as they were. A harness dh
knows no fork for is refused in one line, and nothing is launched.

The world is only remembered here (the row a live run writes, local_places.remember_world):
what the world does is tests/test_returning.py's, on the real servers."""

from __future__ import annotations

from pathlib import Path

import pytest

from dh_cli import events
from tests.fakes.model_server import FakeModelServer, tool_results
from tests.rig import SCRIPT, Rig


@pytest.fixture
def rig(tmp_path):
    server = FakeModelServer(SCRIPT).start()
    try:
        yield Rig(tmp_path, server)
    finally:
        server.stop()


def ran_in_a_world(rig: Rig, harness: str) -> str:
    ran = rig.run(harness)
    assert ran.returncode == 0, ran.stderr.decode()
    world = rig.world()
    (sid,) = [s["id"] for s in world.list_sessions()]
    world.remember_world(sid, "postgres", "postgresql://dh@db.example/dh")
    return sid


def log_of(rig: Rig, sid: str) -> tuple[list[bytes], list]:
    world = rig.world()
    return [r.raw for s in world.sources(sid) for r in world.records(sid, s.id)], world.events(sid)


@pytest.mark.parametrize("harness", ["claude-code", "pi"])
def test_a_session_from_a_world_forks_as_a_new_session(rig, harness):
    sid = ran_in_a_world(rig, harness)
    before = rig.world().get_session(sid)
    native = Path(before.native_path).read_bytes()
    records, journal = log_of(rig, sid)
    asked = len(rig.server.main_requests())

    forked = rig.dh("resume", sid, "--world", "local", "--prompt", "Mine now.")
    assert forked.returncode == 0, forked.stderr.decode()
    assert b"forking this machine's copy as a new session" in forked.stderr

    world = rig.world()
    (fork,) = [s for s in world.list_sessions() if s["id"] != sid]
    assert fork["harness_session_id"] not in (None, before.harness_session_id)
    assert fork["native_path"] != before.native_path
    assert [e.details for e in world.events(fork["id"]) if e.type == events.FORKED] == [
        {"from": sid, "from_native": before.harness_session_id, "world": "postgres"}]
    assert log_of(rig, sid) == (records, journal)  # S: not a record, not an event more
    assert Path(before.native_path).read_bytes() == native
    assert world.remembered_world(sid) == ("postgres", "postgresql://dh@db.example/dh")
    assert world.remembered_world(fork["id"]) is None  # S' replicates nowhere

    (request,) = rig.server.main_requests()[asked:]  # the fork goes on from S's conversation
    assert "alpha" in tool_results(request["api"], request["body"])[-1][1]  # the read of a.txt
    copied, _ = log_of(rig, fork["id"])
    assert b"Mine now." in b"".join(copied) and b"Create the files." in b"".join(copied)

    shown = rig.dh("log", "show", fork["id"])
    assert f"forked from session {sid}, which stays as it was in the world postgres".encode() in shown.stdout
    rig.env["COLUMNS"] = "200"  # room for the title
    listed = rig.dh("log", "list")
    assert f"(fork of {sid})".encode() in listed.stdout, listed.stdout.decode()


def test_a_harness_without_a_fork_is_refused_and_nothing_runs(rig):
    sid = ran_in_a_world(rig, "codex")
    records, journal = log_of(rig, sid)
    asked = len(rig.server.main_requests())

    refused = rig.dh("resume", sid, "--world", "local", "--prompt", "Mine now.")
    (line,) = refused.stderr.decode().strip().splitlines()
    assert refused.returncode == 2 and line.startswith("Error: dh cannot fork a codex session"), line
    assert [s["id"] for s in rig.world().list_sessions()] == [sid]
    assert log_of(rig, sid) == (records, journal) and len(rig.server.main_requests()) == asked
