"""Issue 13 (item): `kill -9` of dh left its session `running` in `dh log list` forever. A
session whose supervising dh is gone is shown as `interrupted` with the command that resumes
it, in `dh`, `dh log list`, `dh log show` and their --json; `dh resume` still works there."""

from __future__ import annotations

import json
import socket
import subprocess
import sys

from dh_cli import liveness
from dh_cli.worlds.local import LocalWorld

from .helpers.kill import HarnessWatch, kill, rig, spawn_run  # noqa: F401 (rig: a fixture)


def _list(rig) -> list[dict]:
    done = rig.dh("log", "list", "--json")
    assert done.returncode == 0, done.stderr.decode()
    return json.loads(done.stdout)


def test_sigkilled_dh_shows_interrupted_then_resumes(rig):
    watch = HarnessWatch(str(rig.bin_dir))
    proc = spawn_run(rig, "pi")
    rig.server.wait_for(lambda log: any(e.get("reply_index") == 1 for e in log), timeout=30)
    (live,) = _list(rig)
    assert live["state"] == "running" and "hint" not in live  # its dh holds the lock
    kill(proc)
    watch.wait_gone()
    (row,) = _list(rig)
    sid = row["id"]
    assert (row["state"], row["logged_state"], row["hint"]) == ("interrupted", "running", f"dh resume {sid}")
    shown = json.loads(rig.dh("log", "show", sid, "--json").stdout)
    assert shown["session"]["state"] == "interrupted"
    text = rig.dh("log", "show", sid).stdout.decode()
    assert "state interrupted" in text and f"resume it with: dh resume {sid}" in text
    table = rig.dh("log", "list").stdout.decode()
    assert f"{sid} was interrupted" in table and f"dh resume {sid}" in table
    status = rig.dh()
    assert status.returncode == 0
    assert "interrupted (their dh is gone) (1)" in status.stdout.decode()
    assert f"→ dh resume {sid}" in status.stdout.decode()
    resumed = rig.dh("resume", sid, timeout=120)
    assert resumed.returncode == 0, resumed.stderr.decode()
    watch.stop()
    (after,) = _list(rig)
    assert after["state"] == "finished" and "hint" not in after
    assert "last ended (1)" in rig.dh().stdout.decode()


def test_status_shows_a_running_session_while_its_dh_lives(rig):
    proc = spawn_run(rig, "pi")
    try:
        rig.server.wait_for(lambda log: any(e.get("reply_index") == 1 for e in log), timeout=30)
        status = rig.dh().stdout.decode()
        assert "running now (1)" in status and "interrupted" not in status
    finally:
        proc.wait(120)


def _row(world, **values) -> dict:
    session = world.create_session("pi", cwd="/x", **values)
    return next(s for s in world.list_sessions() if s["id"] == session.id)


def test_another_hosts_session_is_not_judged_here():
    world = LocalWorld()
    row = _row(world, host="elsewhere.example", state="running")
    found = liveness.judge(row, world.path.parent / "locks")
    assert (found.state, found.supervised) == ("running", None)
    assert "supervised on elsewhere.example" in found.why


def test_a_held_lock_is_running_a_free_one_interrupted():
    world = LocalWorld()
    row = _row(world, host=socket.gethostname(), state="running")
    locks = world.path.parent / "locks"
    assert liveness.judge(row, locks).state == "interrupted"  # never locked here
    with world.lock_session(row["id"]):
        assert liveness.judge(row, locks).supervised is True
        held = subprocess.run([sys.executable, "-c", "import sys; from dh_cli import liveness; "
                               f"sys.exit(0 if liveness.lock_held(__import__('pathlib').Path({str(locks)!r}), {row['id']!r}) else 1)"])
        assert held.returncode == 0  # seen from another process too
    assert liveness.judge(row, locks).state == "interrupted"


def test_a_fresh_starting_session_is_not_called_interrupted():
    world = LocalWorld()
    row = _row(world, host=socket.gethostname(), state="starting")
    assert liveness.judge(row, world.path.parent / "locks").state == "starting"
    row["updated_at"] = "2020-01-01T00:00:00+00:00"
    assert liveness.judge(row, world.path.parent / "locks").state == "interrupted"


def test_ended_sessions_keep_their_state(run_dh):
    world = LocalWorld()
    _row(world, host=socket.gethostname(), state="crashed")
    result = run_dh("log", "list", "--json")
    (row,) = json.loads(result.stdout)
    assert row["state"] == "crashed" and "logged_state" not in row
