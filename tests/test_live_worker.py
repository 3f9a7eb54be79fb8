"""`dh worker`'s edges against a real PostgreSQL (issue 15, and issue 16's worker path):
a missing cwd restored from the world's workspace snapshot (left to others without one), a resume
that fails before its supervisor starts because this machine lacks the harness (the session
stays open and unrefused, for another worker), and the private server of a killed test run (stopped by its watchdog)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dh_cli import events

from . import pg
from .live_leftovers import nothing_left  # noqa: F401  (fixture)
from .pg import pg_url  # noqa: F401  (fixture)
from .rig import Rig
from .helpers.live_world import server  # noqa: F401  (fixture)
from .helpers.live_world import (TTL, harness_pid, kill_group, replicated, rigs, run_live, stalled,
                                 start_worker, stderr_of, wait)
from .helpers.team_worlds import Team, redis_url, team  # noqa: F401  (fixtures)

pytestmark = [pytest.mark.usefixtures("nothing_left")]


KILLED_RUN = """
import sys, time
from tests import pg
server = pg.server()
print(server.data, flush=True)
time.sleep(600)
"""


@pytest.mark.postgres
def test_the_private_server_stops_when_the_test_run_is_killed(tmp_path):
    """A test run killed outright (SIGKILL, or `timeout`'s SIGTERM: atexit never runs) does
    not leave its private PostgreSQL behind: the watchdog tests/pg.py starts beside it stops
    the server and removes its folder."""
    pg.server()  # skips the test where no server can be started
    env = {k: v for k, v in os.environ.items() if k != "DH_TEST_POSTGRES_URL"}
    run = subprocess.Popen([sys.executable, "-c", KILLED_RUN], stdout=subprocess.PIPE, env=env,
                           cwd=Path(__file__).parent.parent, start_new_session=True)
    data = Path(run.stdout.readline().decode().strip())
    pid_file = data / "data" / "postmaster.pid"
    postmaster = int(pid_file.read_text().split()[0])
    assert os.path.exists(f"/proc/{postmaster}")
    os.killpg(run.pid, signal.SIGKILL)
    run.wait()
    wait(lambda: not os.path.exists(f"/proc/{postmaster}") and not data.exists(), 60,
          "the killed run's server to stop")


def _kill_machine(rig: Rig, run: subprocess.Popen) -> None:
    harness = harness_pid(rig)
    for pid in (run.pid, harness):
        kill_group(pid, signal.SIGKILL)


def _lease(world, sid: str) -> tuple:
    found = world.leases(sid)[sid]
    return found.epoch, found.refused, found.released


def test_a_worker_without_the_harness_leaves_the_session_to_another(tmp_path, server, team):
    """The worker's child fails before any harness runs (no `pi` on B): this machine's
    problem, not the session's. The session is not released as if its user had ended it nor
    refused for the team: its lease lapses, B never claims it again, and C's worker, which has
    the harness, takes it and finishes the turn."""
    a, b, c = rigs(tmp_path, server, "A", "B", "C")
    pi = b.bin_dir / "pi"
    saved = pi.read_bytes()
    pi.unlink()
    run = run_live(a, team)
    wait(lambda: stalled(server), 30, "the stalled model request")
    sid = replicated(a, team)
    _kill_machine(a, run)
    worker = start_worker(b, team)
    world = team.open()
    wait(lambda: "exited with 127" in stderr_of(b, "worker"), TTL + 60,
         f"B's failed resume: {stderr_of(b, 'worker')}")
    time.sleep(2 * TTL)  # lapsed, yet never claimed again by B, nor refused for the team
    epoch, refused, released = _lease(world, sid)
    assert (epoch, refused, released) == (2, None, False)
    assert world.get_session(sid).state == "running"
    assert stderr_of(b, "worker").count("took over session") == 1, stderr_of(b, "worker")
    other = start_worker(c, team)
    wait(lambda: world.get_session(sid).state == "finished", 120, f"C's turn: {stderr_of(c, 'worker')}")
    for stopped, rig in ((worker, b), (other, c)):
        stopped.send_signal(signal.SIGTERM)
        assert stopped.wait(timeout=60) == 0, stderr_of(rig, "worker")
    pi.write_bytes(saved)
    assert stderr_of(c, "worker").count("took over session") == 1
    assert server.rebilled() == 0


def _snapshot_in_world(team: Team, sid: str, path: str) -> bool:
    world = team.open()
    try:
        from dh_cli.workspace.restore import flat_tree, pick

        snap = pick(world, sid)
        return bool(snap) and path in flat_tree(world, snap.root)
    finally:
        world.close()


def test_a_worker_restores_a_missing_cwd_from_the_workspace_snapshot(tmp_path, server, team):
    """Issue 16 through the worker: A's checkout and harness home are gone with A; the world
    holds the session's last workspace snapshot, so B's worker restores the cwd from it (not
    a refusal any more) before it relaunches, and the turn completes there. Without a
    snapshot the missing cwd stays a refusal (the next test)."""
    a, b = rigs(tmp_path, server, "A", "B")
    run = run_live(a, team)
    wait(lambda: stalled(server), 30, "the stalled model request")
    sid = replicated(a, team)
    wait(lambda: _snapshot_in_world(team, sid, "steps.log"), 30, "the snapshot in the world")
    _kill_machine(a, run)
    shutil.rmtree(a.proj)  # the machine is lost: its checkout and its harness home
    shutil.rmtree(a.tmp / "pi-agent")
    worker = start_worker(b, team)
    world = team.open()
    wait(lambda: world.get_session(sid).state == "finished", TTL + 90,
          f"the turn to finish on B; worker: {stderr_of(b, 'worker')}")
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(timeout=60) == 0, stderr_of(b, "worker")
    assert f"restoring its workspace into {a.proj}" in stderr_of(b, "worker")
    assert (a.proj / "steps.log").read_text() == "step0\n"  # restored, the step not run again
    assert (a.proj / "a.txt").read_text() == "alpha\n"  # written on B
    assert server.rebilled() == 0
    restored = [e.details for e in world.events(sid) if e.type == events.WORKSPACE]
    assert restored and "steps.log" in restored[0]["restored"]["written"], restored


def test_a_worker_leaves_a_missing_cwd_without_a_snapshot_to_others(tmp_path, server, team):
    """Another machine may hold the folder: the worker notes why on the lease and leaves the
    session claimable (issue 38: it was refused for the whole team)."""
    a, b = rigs(tmp_path, server, "A", "B")
    run = run_live(a, team)
    wait(lambda: stalled(server), 30, "the stalled model request")
    sid = replicated(a, team)
    _kill_machine(a, run)
    world = team.open()
    team.drop_snapshots(sid)
    shutil.rmtree(a.proj)
    worker = start_worker(b, team)
    wait(lambda: world.leases(sid)[sid].passed, TTL + 30, "the worker's note")
    assert "holds no workspace snapshot" in world.leases(sid)[sid].passed
    assert _lease(world, sid)[:2] == (1, None)  # never claimed, not refused
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(timeout=60) == 0
    assert not a.proj.exists()
