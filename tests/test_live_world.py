"""The team world, live (issue 15), against each real team world server (PostgreSQL, Redis):
"machine A/B" are two DH_HOMEs and two sets of harness homes on one host, both talking to the
same fake model server.

- A's `dh run --world W` replicates while the harness runs;
- A is SIGKILLed (dh and the harness's group) while a model reply is stalled: B's `dh worker`
  claims the session and completes the turn (how fast: bench/bench_live_world.py), nothing paid or run twice, the
  world holds every record, and A's `dh resume S --world W` meanwhile names the holder;
- an A only paused past the TTL stops its harness once it runs again and writes nothing more;
- the server stopped during a run: nothing lost, one notice each way."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from copy import copy as shallow_copy
from pathlib import Path

import pytest

from dh_cli import events

from .fakes.model_server import FakeModelServer
from .helpers.live_world import server  # noqa: F401  (fixture)
from .helpers.live_world import (STALL, TTL, harness_pid, kill_group, main_requests, popen,
                                 replicated, rigs, run_live, script, stalled, start_worker,
                                 stderr_of, wait, world_raw)
from .helpers.team_worlds import pg_url, redis_url, team  # noqa: F401  (fixtures)
from .live_leftovers import nothing_left  # noqa: F401  (fixture)
from .rig import HEADLESS_ARGS, SCRIPT, Rig

# every test: nothing it started (dh, workers, their children, harnesses) outlives it
pytestmark = [pytest.mark.usefixtures("nothing_left")]

def test_replicates_while_the_harness_runs(tmp_path, server, team):
    (a,) = rigs(tmp_path, server, "A")
    run = run_live(a, team)
    wait(lambda: stalled(server), 30, "the stalled model request")
    sid = a.world().list_sessions()[0]["id"]
    # the turn is open (a reply hangs), yet what the harness wrote so far is in the world; the
    # records written just before the request may reach the local log after it is seen
    local = wait(lambda: [r.raw for r in a.world().records(sid)], 10, "the records in the log")
    wait(lambda: len(world_raw(team, sid)) >= len(local), 5, "the records in the world")
    assert world_raw(team, sid)[:len(local)] == local
    kill_group(run.pid, signal.SIGTERM)  # the user ends it: released, never claimed
    run.wait(timeout=60)
    world = team.open()
    assert world.get_session(sid).state == "stopped"
    assert world.leases(sid)[sid].released
    assert [e.seq for e in world.events(sid)] == [e.seq for e in a.world().events(sid)]
    assert world_raw(team, sid) == [r.raw for r in a.world().records(sid)]


def test_takeover_after_a_kill(tmp_path, server, team):
    # reply #2 is held until A's refusals below are checked, however slow the machine is
    server.set_script(script(second=600.0))
    a, b = rigs(tmp_path, server, "A", "B")
    worker = start_worker(b, team)
    run = run_live(a, team)
    wait(lambda: stalled(server), 30, "the stalled model request")
    sid = replicated(a, team)
    harness = harness_pid(a)
    kill_group(run.pid, signal.SIGKILL)
    kill_group(harness, signal.SIGKILL)
    before = len(main_requests(server))
    # how soon B claims it is bench/bench_live_world.py's figure, not a functional property
    wait(lambda: team.lease_epoch(sid) == 2, TTL + 30, f"B's claim; worker: {stderr_of(b, 'worker')}")
    wait(lambda: len(main_requests(server)) > before, TTL + 30,
          f"B's first model request; worker: {stderr_of(b, 'worker')}")
    # while B runs the turn (reply #2 is slow), A's resume names the holder and refuses
    refused = a.dh("resume", sid, "--world", team.name, "--url", team.url)
    assert refused.returncode == 4, refused.stderr.decode()
    assert b"held in the world by dh on" in refused.stderr
    listed = a.dh("log", "list", "--world", team.name, "--url", team.url, "--json")
    assert listed.returncode == 0 and listed.stdout, listed
    (row,) = json.loads(listed.stdout)
    assert (row["id"], row["epoch"], row["hold_state"]) == (sid, 2, "running here")  # one host
    assert row["lease_age_s"] < TTL
    # the same without --world: A's configured world (here its environment) is the team world
    configured = shallow_copy(a)
    configured.env = dict(a.env, DH_WORLD=team.name, **{f"DH_{team.name.upper()}_URL": team.url})
    events_before = [e.seq for e in a.world().events(sid)]
    plain = configured.dh("resume", sid)
    assert plain.returncode == 4, plain.stderr.decode()
    assert b"held in the world by dh on" in plain.stderr, plain.stderr.decode()
    # refused before anything was prepared or logged here: the world was asked first
    assert [e.seq for e in a.world().events(sid)] == events_before
    assert b"resuming session" not in plain.stderr
    server.release_stalls()
    world = team.open()
    wait(lambda: world.get_session(sid).state == "finished", 60, "the turn to finish on B")
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(timeout=60) == 0, stderr_of(b, "worker")
    assert f"took over session {sid} from" in stderr_of(b, "worker")
    assert server.rebilled() == 0
    assert (a.proj / "steps.log").read_text() == "step0\n"  # the tool step ran once
    assert (a.proj / "a.txt").read_text() == "alpha\n"
    mine = b.world()
    assert [r.raw for r in mine.records(sid)] == world_raw(team, sid)
    assert any(b"All done." in raw for raw in world_raw(team, sid))
    takeovers = [e for e in world.events(sid) if e.type == events.TAKEOVER]
    assert len(takeovers) == 1 and takeovers[0].details["epoch"] == 2
    # the world rebuilds, byte for byte, the native file B has
    native = Path(mine.get_session(sid).native_path)
    c = rigs(tmp_path, server, "C")[0]
    assert c.dh("world", "pull", team.name, "--url", team.url).returncode == 0
    rebuilt = c.dh("log", "rebuild", sid, "--to", str(tmp_path / "rebuilt"))
    assert rebuilt.returncode == 0, rebuilt.stderr.decode()
    (copy,) = [p for p in (tmp_path / "rebuilt").rglob("*.jsonl")]
    assert copy.read_bytes() == native.read_bytes()
    status = b.dh("world", "status", team.name, "--url", team.url, "--json")
    assert status.returncode == 0, status.stderr.decode()
    (row,) = [r for r in json.loads(status.stdout) if r["session_id"] == sid]
    assert (row["status"], row["epoch"], row["hold_state"]) == ("in sync", 2, "finished")
    shown = b.dh("log", "show", sid)
    assert b"took over" in shown.stdout, shown.stdout.decode()[-2000:]


def test_a_paused_holder_stops_and_writes_nothing_more(tmp_path, server, team):
    a, b = rigs(tmp_path, server, "A", "B")
    run = run_live(a, team)
    wait(lambda: stalled(server), 30, "the stalled model request")
    sid = replicated(a, team)
    harness = harness_pid(a)
    for pid in (run.pid, harness):
        kill_group(pid, signal.SIGSTOP)
    worker = start_worker(b, team)
    world = team.open()
    wait(lambda: team.lease_epoch(sid) == 2, TTL + 30, "B's claim")
    for pid in (harness, run.pid):
        kill_group(pid, signal.SIGCONT)
    assert run.wait(timeout=60) == 4, stderr_of(a, "run")
    assert "taken over" in stderr_of(a, "run") or "held at epoch 2" in stderr_of(a, "run"), stderr_of(a, "run")
    assert any(e.type == events.LEASE_LOST for e in a.world().events(sid))
    wait(lambda: world.get_session(sid).state == "finished", 60, "the turn to finish on B")
    worker.send_signal(signal.SIGTERM)
    worker.wait(timeout=60)
    assert not any(e.type == events.LEASE_LOST for e in world.events(sid)), "A wrote after the takeover"
    assert [r.raw for r in b.world().records(sid)] == world_raw(team, sid)


OUTAGE_S = 30.0  # the outage: longer than the shipper's whole backoff (0.5 … 5 s) many times over


def test_server_stopped_during_a_run_loses_nothing_and_says_so_once_each_way(tmp_path, team):
    # reply #1 hangs past the outage: the harness goes on writing while the server is away
    model = FakeModelServer(script(stall=OUTAGE_S + 4)).start()
    try:
        (a,) = rigs(tmp_path, model, "A")
        run = run_live(a, team)
        wait(lambda: stalled(model), 30, "the stalled model request")
        sid = replicated(a, team)
        team.outage(lambda: time.sleep(OUTAGE_S))
        assert run.wait(timeout=120) == 0, stderr_of(a, "run")
    finally:
        model.stop()
    err = stderr_of(a, "run")
    assert err.count("replication to the world is behind") == 1, err
    assert err.count("replication to the world caught up") == 1, err
    local = a.world()
    assert world_raw(team, sid) == [r.raw for r in local.records(sid)]
    world = team.open()
    assert [(e.seq, e.type) for e in world.events(sid)] == [(e.seq, e.type) for e in local.events(sid)]
    assert local.get_session(sid).state == "finished"
    shipped, here = world.get_session(sid), local.get_session(sid)
    assert (shipped.state, shipped.updated_at) == (here.state, here.updated_at), err


def test_two_workers_resume_each_of_ten_orphans_exactly_once(tmp_path, team):
    """Ten sessions whose dh died mid-turn, two workers on two "machines": each session is
    claimed and resumed once, by one of them."""
    model = FakeModelServer(script(stall=60, times=None)).start()  # every session's stalls
    try:
        a, b, c = rigs(tmp_path, model, "A", "B", "C")
        runs = []
        for n in range(10):
            (a.proj / f"s{n}").mkdir()
            runs.append(_popen_in(a, a.proj / f"s{n}", "run", "pi", "--world", team.name, "--url",
                                  team.url, "--lease-ttl", str(TTL), "--", *HEADLESS_ARGS["pi"]("Go.")))
        world = team.open()
        wait(lambda: len([r for r in model.main_requests() if r["reply_index"] == 1]) >= 10, 120,
              "ten stalled model requests")
        wait(lambda: _all_shipped(world, 10), 60, "the ten sessions in the world")
        local = a.world()
        harnesses = [[e for e in local.events(s["id"]) if e.type == events.LAUNCHED][-1].details["pid"]
                     for s in local.list_sessions()]
        for pid in [run.pid for run in runs] + harnesses:  # the machine dies
            kill_group(pid, signal.SIGKILL)
        model.stop()
        model = FakeModelServer(SCRIPT).start()  # the stalled connections die with the old one
        for rig in (b, c):
            write_model_configs(rig, model)
        workers = [start_worker(rig, team, "--max-sessions", "10") for rig in (b, c)]
        ids = [s.id for s in world.sessions()]
        wait(lambda: all(world.get_session(s).state == "finished" for s in ids), 240,
              "the ten sessions to finish")
        for worker in workers:
            worker.send_signal(signal.SIGTERM)
        assert [w.wait(timeout=60) for w in workers] == [0, 0]
    finally:
        model.stop()
    for sid in ids:
        takeovers = [e for e in world.events(sid) if e.type == events.TAKEOVER]
        assert len(takeovers) == 1, (sid, takeovers)
    claims = [stderr_of(rig, "worker").count("took over session") for rig in (b, c)]
    assert sum(claims) == 10, claims


def _popen_in(rig: Rig, cwd: Path, *args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "dh_cli", *args], cwd=cwd, env=rig.env,
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)


def _all_shipped(world, n: int) -> bool:
    """Whether n sessions have records in the world."""
    return sum(1 for marks in world.marks().values() if marks.records) >= n


def write_model_configs(rig: Rig, model) -> None:
    from .rig import write_configs

    rig.server = model
    write_configs(rig.tmp, model.url)
    rig.env.update(ANTHROPIC_BASE_URL=model.url)


def test_a_stopped_worker_hands_its_session_to_another(tmp_path, team):
    """SIGTERM to a worker mid-turn: its harness stops without the session being marked as
    ended by a user, the lease lapses at once, and another worker finishes the turn."""
    model = FakeModelServer(script(stall=STALL, second=STALL)).start()
    try:
        a, b, c = rigs(tmp_path, model, "A", "B", "C")
        run = run_live(a, team)
        wait(lambda: stalled(model), 30, "the stalled model request")
        sid = replicated(a, team)
        harness = harness_pid(a)
        worker_b = start_worker(b, team)
        for pid in (run.pid, harness):
            kill_group(pid, signal.SIGKILL)
        wait(lambda: any(r["reply_index"] == 2 for r in model.main_requests()), TTL + 30,
              "B's harness waiting on reply #2")
        worker_b.send_signal(signal.SIGTERM)
        assert worker_b.wait(timeout=60) == 0, stderr_of(b, "worker")
        assert "1 session(s) handed back" in stderr_of(b, "worker")
        world = team.open()
        assert world.get_session(sid).state == "running"  # not ended by a user
        worker_c = start_worker(c, team)
        wait(lambda: world.get_session(sid).state == "finished", 60, "the turn to finish on C")
        worker_c.send_signal(signal.SIGTERM)
        assert worker_c.wait(timeout=60) == 0, stderr_of(c, "worker")
    finally:
        model.stop()
    assert f"took over session {sid}" in stderr_of(c, "worker")
    assert model.rebilled() == 0
    assert (a.proj / "steps.log").read_text() == "step0\n"
    assert [e.details["epoch"] for e in world.events(sid) if e.type == events.TAKEOVER][0] == 2
    assert any(b"All done." in raw for raw in world_raw(team, sid))

