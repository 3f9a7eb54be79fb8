"""`dh worker`'s edges against a real PostgreSQL (issue 15, and issue 16's worker path):
a missing cwd restored from the world's workspace snapshot (refused without one), a resume
that fails before its supervisor starts (the session stays open, its lease refused with the
reason), and the private server of a killed test run (stopped by its watchdog)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from . import pg
from .live_leftovers import nothing_left  # noqa: F401  (fixture)
from .pg import pg_url  # noqa: F401  (fixture)
from .rig import Rig
from .test_live_world import (TTL, _err, _harness_pid, _kill_group, _popen, _replicated, _rigs,
                              _run_live, _stalled, _wait, _world)
from .test_live_world import server  # noqa: F401  (fixture)

pytestmark = [pytest.mark.postgres, pytest.mark.usefixtures("nothing_left")]


KILLED_RUN = """
import sys, time
from tests import pg
server = pg.server()
print(server.data, flush=True)
time.sleep(600)
"""


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
    _wait(lambda: not os.path.exists(f"/proc/{postmaster}") and not data.exists(), 60,
          "the killed run's server to stop")


def _kill_machine(rig: Rig, run: subprocess.Popen) -> None:
    harness = _harness_pid(rig)
    for pid in (run.pid, harness):
        _kill_group(pid, signal.SIGKILL)


def _lease(world, sid: str) -> tuple:
    return world._rows("SELECT epoch, refused, released_at IS NOT NULL FROM dh.leases"
                       " WHERE session_id = %s", [sid])[0]


def test_a_worker_without_the_harness_leaves_the_session_to_another(tmp_path, server, pg_url):
    """The worker's child fails before any harness runs (no `pi` on B): this machine's
    problem, not the session's. The session is not released as if its user had ended it nor
    refused for the team: its lease lapses, B never claims it again, and C's worker, which has
    the harness, takes it and finishes the turn."""
    a, b, c = _rigs(tmp_path, server, "A", "B", "C")
    pi = b.bin_dir / "pi"
    saved = pi.read_bytes()
    pi.unlink()
    run = _run_live(a, pg_url)
    _wait(lambda: _stalled(server), 30, "the stalled model request")
    sid = _replicated(a, pg_url)
    _kill_machine(a, run)
    worker = _popen(b, "worker", "--url", pg_url, "--lease-ttl", str(TTL))
    world = _world(pg_url)
    _wait(lambda: "exited with 127" in _err(b, "worker"), TTL + 60, f"B's failed resume: {_err(b, 'worker')}")
    time.sleep(2 * TTL)  # lapsed, yet never claimed again by B, nor refused for the team
    epoch, refused, released = _lease(world, sid)
    assert (epoch, refused, released) == (2, None, False)
    assert world.get_session(sid).state == "running"
    assert _err(b, "worker").count("took over session") == 1, _err(b, "worker")
    other = _popen(c, "worker", "--url", pg_url, "--lease-ttl", str(TTL))
    _wait(lambda: world.get_session(sid).state == "finished", 120, f"C's turn: {_err(c, 'worker')}")
    for stopped, rig in ((worker, b), (other, c)):
        stopped.send_signal(signal.SIGTERM)
        assert stopped.wait(timeout=60) == 0, _err(rig, "worker")
    pi.write_bytes(saved)
    assert _err(c, "worker").count("took over session") == 1
    assert server.rebilled() == 0


def _snapshot_in_world(url: str, sid: str, path: str) -> bool:
    world = _world(url)
    try:
        from dh_cli.workspace.restore import flat_tree, pick

        snap = pick(world, sid)
        return bool(snap) and path in flat_tree(world, snap.root)
    finally:
        world.close()


def test_a_worker_restores_a_missing_cwd_from_the_workspace_snapshot(tmp_path, server, pg_url):
    """Issue 16 through the worker: A's checkout and harness home are gone with A; the world
    holds the session's last workspace snapshot, so B's worker restores the cwd from it (not
    a refusal any more) before it relaunches, and the turn completes there. Without a
    snapshot the missing cwd stays a refusal (the next test)."""
    a, b = _rigs(tmp_path, server, "A", "B")
    run = _run_live(a, pg_url)
    _wait(lambda: _stalled(server), 30, "the stalled model request")
    sid = _replicated(a, pg_url)
    _wait(lambda: _snapshot_in_world(pg_url, sid, "steps.log"), 30, "the snapshot in the world")
    _kill_machine(a, run)
    shutil.rmtree(a.proj)  # the machine is lost: its checkout and its harness home
    shutil.rmtree(a.tmp / "pi-agent")
    worker = _popen(b, "worker", "--url", pg_url, "--lease-ttl", str(TTL))
    world = _world(pg_url)
    _wait(lambda: world.get_session(sid).state == "finished", TTL + 90,
          f"the turn to finish on B; worker: {_err(b, 'worker')}")
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(timeout=60) == 0, _err(b, "worker")
    assert f"restoring its workspace into {a.proj}" in _err(b, "worker")
    assert (a.proj / "steps.log").read_text() == "step0\n"  # restored, the step not run again
    assert (a.proj / "a.txt").read_text() == "alpha\n"  # written on B
    assert server.rebilled() == 0
    restored = [e.details for e in world.events(sid) if e.type == "workspace"]
    assert restored and "steps.log" in restored[0]["restored"]["written"], restored


def test_a_worker_refuses_a_missing_cwd_without_a_snapshot(tmp_path, server, pg_url):
    a, b = _rigs(tmp_path, server, "A", "B")
    run = _run_live(a, pg_url)
    _wait(lambda: _stalled(server), 30, "the stalled model request")
    sid = _replicated(a, pg_url)
    _kill_machine(a, run)
    world = _world(pg_url)
    world._rows("DELETE FROM dh.ws_snapshots WHERE session_id = %s RETURNING 1", [sid])
    shutil.rmtree(a.proj)
    worker = _popen(b, "worker", "--url", pg_url, "--lease-ttl", str(TTL))
    _wait(lambda: _lease(world, sid)[1], TTL + 30, "the refusal")
    assert "holds no workspace snapshot" in _lease(world, sid)[1]
    assert _lease(world, sid)[0] == 1  # never claimed
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(timeout=60) == 0
    assert not a.proj.exists()
