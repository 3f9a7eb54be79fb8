"""Takeover by another machine (issue 15) and its workspace (issue 16), over the REAL harness
CLIs headless (Claude Code and Pi; pinned and newest releases) and each real team world server
(PostgreSQL, Redis).

"Machine A" and "machine B" are two DH_HOMEs and two sets of harness homes on this host, both
pointed at one FakeModelServer. A runs `dh run … --world W`; B runs `dh worker --world W`. A's dh and its harness's process group are SIGKILLed while a model reply is
stalled (once what the test relies on is logged and in the world: Claude Code can send the
next request before it writes the rows of the step before it). Then:
- B claims the session (how soon: bench/bench_live_world.py) and the turn completes on B; every completed reply
  was requested exactly once, every tool step ran once;
- A's `dh resume S` (no --world: its configured world is the team world) refuses, naming B;
  once B finished, A's plain `dh resume S` with no world configured asks the world the
  session replicated to, launches nothing and says where the session went; its
  `dh resume S --world local` goes on with A's copy as a NEW session, forked by the real
  harness (Claude Code's `--fork-session`; Pi resumes the copy its `--fork` writes): a new
  native id and file, A's conversation in the next request, S left as it was here and in
  the world;
- the world holds every record either machine wrote, and `dh log rebuild` from the world
  gives the native bytes B has;
- with A's checkout and harness home deleted (Claude Code), B's worker restores the files of
  the last completed step from the world's workspace snapshot before it relaunches, and the
  model's next requests show what those files hold."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dh_cli import events
from dh_cli.errors import SessionNotFound
from dh_cli.team import names as world_names
from tests.fakes.model_server import FakeModelServer, tool_results
from tests.live_leftovers import nothing_left  # noqa: F401  (fixture)
from tests.rig import HEADLESS_ARGS, SCRIPT, Rig
from tests.helpers.team_worlds import Team, pg_url, redis_url, team  # noqa: F401  (fixtures)

from tests.helpers.real_runs import RUN_TIMEOUT, launched_pid, logged
from tests.helpers.workspace_runs import SCRIPT as FILES_SCRIPT
from tests.helpers.workspace_runs import rig_on as machine  # a machine: its own homes, the real configs

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("nothing_left")]

TTL = 5  # seconds: short for the test, long enough for renewals on a loaded machine
R = SCRIPT["replies"]
# reply #1 stalls on A (the kill lands then); reply #2 is slow once, so that B still holds
# the session while A's resume is refused
TAKEOVER_SCRIPT = {"replies": [R[0], dict(R[1], delay_s=120, delay_times=1),
                               dict(R[2], delay_s=8, delay_times=1), *R[3:]]}


def background(rig: Rig, *args: str, cwd: Path | None = None) -> subprocess.Popen:
    """dh in its own process group (a machine of its own); stderr in rig.tmp/<verb>.err."""
    with open(rig.tmp / f"{args[0]}.err", "wb") as err:
        return subprocess.Popen([sys.executable, "-m", "dh_cli", *args], cwd=cwd or rig.proj,
                                env=rig.env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=err, start_new_session=True)


def err_of(rig: Rig, verb: str) -> str:
    return (rig.tmp / f"{verb}.err").read_text(errors="replace")


def wait(predicate, timeout: float, what: str, step: float = 0.1):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := predicate():
            return value
        time.sleep(step)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def world_raw(team: Team, sid: str) -> dict[str, list[bytes]]:
    world = team.open()
    try:
        return {s.relpath: [r.raw for r in world.read_records(sid, s.relpath)]
                for s in world.sources(sid)}
    finally:
        world.close()


def local_raw(rig: Rig, sid: str) -> dict[str, list[bytes]]:
    world = rig.world()
    try:
        return {s.relpath: [r.raw for r in world.records(sid, s.id)] for s in world.sources(sid)}
    finally:
        world.close()


def the_session(rig: Rig) -> str:
    return wait(lambda: [s["id"] for s in rig.world().list_sessions()], 60, "A's session")[0]


def in_the_world(rig: Rig, team: Team, sid: str) -> dict[str, list[bytes]]:
    """Until the world holds every record A's log holds (what A never committed is not the
    world's to keep); those records. A's log may take one more before the kill (Claude Code
    2.1.332 writes an `api-request` record as it asks the model), which A, killed, may never
    send: what the world is held to is what it was seen to hold."""
    def held() -> dict[str, list[bytes]] | None:
        mine = local_raw(rig, sid)
        return mine if mine and world_raw(team, sid) == mine else None
    return wait(held, 60, "A's records in the world")


def kill_machine(rig: Rig, dh: subprocess.Popen) -> float:
    harness = launched_pid(rig)
    for pid in (dh.pid, harness):
        try:
            os.killpg(os.getpgid(pid), signal.SIGKILL)
        except ProcessLookupError:
            pass
    dh.wait(timeout=30)
    return time.monotonic()


def state_in_world(team: Team, sid: str) -> str | None:
    world = team.open()
    try:
        return world.get_session(sid).state
    finally:
        world.close()


def stop_worker(rig: Rig, worker: subprocess.Popen) -> str:
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(timeout=90) == 0, err_of(rig, "worker")
    return err_of(rig, "worker")


@pytest.mark.parametrize("harness", ["claude-code", "pi"])
def test_a_killed_machine_s_turn_is_taken_over_and_completed(tmp_path, installed, team, harness):
    server = FakeModelServer(TAKEOVER_SCRIPT).start()
    try:
        a, b = machine(tmp_path / "A", server, installed), machine(tmp_path / "B", server, installed)
        worker = background(b, "worker", "--world", team.name, "--url", team.url, "--lease-ttl", str(TTL))
        run = background(a, "run", harness, "--world", team.name, "--url", team.url, "--lease-ttl",
                         str(TTL), "--", *HEADLESS_ARGS[harness]("Create the files."))
        server.wait_for(lambda log: any(e.get("reply_index") == 1 for e in log), timeout=RUN_TIMEOUT)
        # the step before the stalled call must be logged (Claude Code may ask first, write later)
        wait(lambda: logged(a, "tool_result") >= 1, 60, "reply #0's tool result in A's log")
        sid = the_session(a)
        written_by_a = in_the_world(a, team, sid)
        killed = kill_machine(a, run)
        asked = len(server.main_requests())

        wait(lambda: team.lease_epoch(sid) == 2, TTL + 30, f"B's claim; worker: {err_of(b, 'worker')}")
        claimed = time.monotonic() - killed  # shown, not bounded: bench/bench_live_world.py times it
        wait(lambda: len(server.main_requests()) > asked, RUN_TIMEOUT, "B's first model request")
        first_request = time.monotonic() - killed
        print(f"{harness} on {team.name}: claimed {claimed:.1f} s, first model request on B {first_request:.1f} s "
              f"after the kill (TTL {TTL} s)")

        # A restarted while B holds the session: refused, naming the holder, nothing written
        a.env.update(DH_WORLD=team.name, **{f"DH_{team.name.upper()}_URL": team.url})
        refused = a.dh("resume", sid)
        assert refused.returncode == 4, refused.stderr.decode()
        assert b"held in the world by dh on" in refused.stderr, refused.stderr.decode()

        wait(lambda: state_in_world(team, sid) == "finished", RUN_TIMEOUT, "the turn to finish on B")
        shown = stop_worker(b, worker)

        # A comes back once B finished: its plain resume, no world in its config, asks the
        # world the session replicated to, launches nothing and says where the session went
        del a.env["DH_WORLD"]
        wait(lambda: lease_free(team, sid), TTL + 30, "B's lease to end")
        asked, launches = len(server.main_requests()), launched_count(a, sid)
        back = a.dh("resume", sid)
        assert back.returncode == 4, back.stderr.decode()
        assert f"session {sid} was taken over by ".encode() in back.stderr, back.stderr.decode()
        assert b"finished there; `dh world pull` to see it" in back.stderr, back.stderr.decode()
        assert (len(server.main_requests()), launched_count(a, sid)) == (asked, launches)
        delivered = server.completed_counts()  # the takeover's; A's fork then asks on its own
        check_the_fork(a, team, sid, server, harness)
    finally:
        server.stop()
    assert f"took over session {sid} from" in shown, shown
    assert delivered == {0: 1, 1: 1, 2: 1, 3: 1}, delivered  # none paid twice
    assert (a.proj / "steps.log").read_text() == "step0\n"  # the tool step ran once
    assert (a.proj / "a.txt").read_text() == "alpha\n"
    in_world, on_b = world_raw(team, sid), local_raw(b, sid)
    assert in_world == on_b  # everything B wrote (and pulled) is in the world
    for relpath, raws in written_by_a.items():  # and everything A wrote
        assert set(raws) <= {r for rs in in_world.values() for r in rs}, relpath
    assert any(b"All done." in r for rs in in_world.values() for r in rs)
    check_rebuild_from_the_world(tmp_path, server, installed, team, b, sid)


def check_the_fork(a: Rig, team: Team, sid: str, server: FakeModelServer, harness: str) -> None:
    """A's `dh resume S --world local`: a new session from A's own copy of S. The real
    harness forks once per release (on PostgreSQL: 8-13 s each, three model calls); what a
    world makes of it is test_returning.py's, on every world. The fork itself is local: it
    runs with the first registered world only."""
    if team.name != world_names()[0]:
        return
    there, mine, asked = world_raw(team, sid), local_raw(a, sid), len(server.main_requests())
    forked = a.dh("resume", sid, "--world", "local", "--prompt", "Mine now.")
    assert forked.returncode == 0, forked.stderr.decode()
    world = a.world()
    (fork,) = [s for s in world.list_sessions() if s["id"] != sid]
    assert fork["harness_session_id"] != world.get_session(sid).harness_session_id
    assert [e.details["from"] for e in world.events(fork["id"]) if e.type == events.FORKED] == [sid]
    assert world_raw(team, sid) == there and local_raw(a, sid) == mine  # S: as it was, both places
    first = server.main_requests()[asked]  # the fork's: A's conversation, none of B's steps
    assert [r[1] for r in tool_results(first["api"], first["body"])] == \
        [r[1] for r in tool_results(server.main_requests()[1]["api"], server.main_requests()[1]["body"])]
    assert "Mine now." in str(first["body"]) and "Create the files." in str(first["body"])
    own = b"".join(r for rs in local_raw(a, fork["id"]).values() for r in rs)
    assert b"Mine now." in own
    remote = team.open()
    try:
        with pytest.raises(SessionNotFound):  # S' replicates nowhere
            remote.get_session(fork["id"])
    finally:
        remote.close()


def lease_free(team: Team, sid: str) -> bool:
    from dh_cli.team.takeover import seconds_left

    world = team.open()
    try:
        return seconds_left(world, sid) is None
    finally:
        world.close()


def launched_count(rig: Rig, sid: str) -> int:
    return sum(e.type == events.LAUNCHED for e in rig.world().events(sid))


def check_rebuild_from_the_world(tmp_path, server, installed, team: Team, b: Rig, sid: str) -> None:
    """A third home pulls the session and rebuilds it: the bytes of B's native file."""
    native = Path(b.world().get_session(sid).native_path)
    c = machine(tmp_path / "C", server, installed)
    pulled = c.dh("world", "pull", team.name, "--url", team.url, timeout=120)
    assert pulled.returncode == 0, pulled.stderr.decode()
    out = tmp_path / "rebuilt"
    rebuilt = c.dh("log", "rebuild", sid, "--to", str(out), timeout=120)
    assert rebuilt.returncode == 0, rebuilt.stderr.decode()
    (copy,) = [p for p in out.rglob(native.name)]
    assert copy.read_bytes() == native.read_bytes()


@pytest.mark.harnesses("claude-code")
def test_the_worker_restores_a_lost_machine_s_files(tmp_path, installed, team):
    """Issue 16 through `dh worker`: files written and edited over several tool calls on A;
    A dies while a later call stalls and its checkout and harness home are deleted; B's
    worker restores the checkout from the world's snapshot of the last completed step, byte
    for byte, and the turn completes; the model's next requests see the restored files."""
    server = FakeModelServer(FILES_SCRIPT).start()
    try:
        a, b = machine(tmp_path / "A", server, installed), machine(tmp_path / "B", server, installed)
        run = background(a, "run", "claude-code", "--world", team.name, "--url", team.url,
                         "--lease-ttl", str(TTL), "--", *HEADLESS_ARGS["claude-code"]("Make the notes."))
        server.wait_for(lambda log: any(e.get("reply_index") == 3 for e in log), timeout=RUN_TIMEOUT)
        # the third tool result logged (Claude Code writes in batches), and the snapshot after
        # it (the second write) in the world: the last completed step
        wait(lambda: logged(a, "tool_result") >= 3, 60, "three tool results in A's log")
        sid = the_session(a)
        wait(lambda: team.last_snapshot_step(sid) == "toolu_002", 60, "the last step's snapshot in the world")
        in_the_world(a, team, sid)
        expected = {p: (a.proj / p).read_bytes() for p in ("notes/a.txt", "data/b.txt")}
        assert expected["notes/a.txt"] == b"alpha, edited\n"
        kill_machine(a, run)
        shutil.rmtree(a.proj)  # the machine is lost: its checkout and its harness home
        shutil.rmtree(a.tmp / ".claude")
        asked = len(server.main_requests())

        worker = background(b, "worker", "--world", team.name, "--url", team.url, "--lease-ttl",
                            str(TTL), cwd=b.proj)
        wait(lambda: state_in_world(team, sid) == "finished", RUN_TIMEOUT,
             f"the turn to finish on B; worker: {err_of(b, 'worker')}")
        shown = stop_worker(b, worker)
    finally:
        server.stop()
    assert f"restoring its workspace into {a.proj}" in shown, shown
    assert {p: (a.proj / p).read_bytes() for p in expected} == expected  # byte for byte
    assert not (a.proj / ".env").exists() and not (a.proj / "big.dat").exists()  # never stored
    requests = server.main_requests()[asked:]
    assert len(requests) == 3, len(requests)  # the read of notes/a.txt, data/b.txt, the answer
    results = [tool_results(r["api"], r["body"]) for r in requests]
    assert results[1][-1][1].strip() == "alpha, edited"  # `cat notes/a.txt` on B: the edit
    assert results[2][-1][1].strip() == "one"  # `cat data/b.txt` found the restored file
    assert server.rebilled() == 0, server.completed_counts()
    world = team.open()
    try:
        restored = [e.details for e in world.events(sid) if e.type == events.WORKSPACE]
        assert restored and set(restored[0]["restored"]["written"]) == set(expected), restored
        assert any(b"All done." in r.raw for s in world.sources(sid)
                   for r in world.read_records(sid, s.relpath))
    finally:
        world.close()


def grant_on(rig: Rig, flags: str) -> None:
    """B's dh config: its Claude Code local_flags (TOML array text)."""
    (Path(rig.env["XDG_CONFIG_HOME"]) / "dh" / "config.toml").write_text(
        f"[local_flags]\nclaude-code = {flags}\n")


def lease_of(team: Team, sid: str):
    world = team.open()
    try:
        return world.leases(sid)[sid]
    finally:
        world.close()


@pytest.mark.harnesses("claude-code")
def test_a_worker_that_grants_less_leaves_the_session_until_granted(tmp_path, installed, team):
    """Issue 38: A runs Claude Code with --dangerously-skip-permissions and dies; B's config
    grants Claude Code nothing. B's worker leaves the session unclaimed, the reason naming
    the config line on its lease (`dh world status`), and B's `dh resume` refuses with it;
    once B grants it, B's next worker takes the session over and the step the model asked
    for (a Write) is done. Without the check, B ran it with every tool denied and the world
    said finished. Granted by B's config with the pinned releases, by the worker's own
    `--grant all` with the newest (its child `dh resume` gets it too)."""
    server = FakeModelServer(TAKEOVER_SCRIPT).start()
    line, workers = 'claude-code = ["--dangerously-skip-permissions"]', []
    try:
        a, b = machine(tmp_path / "A", server, installed), machine(tmp_path / "B", server, installed)
        grant_on(b, "[]")
        run = background(a, "run", "claude-code", "--world", team.name, "--url", team.url,
                         "--lease-ttl", str(TTL), "--", *HEADLESS_ARGS["claude-code"]("Create the files."))
        server.wait_for(lambda log: any(e.get("reply_index") == 1 for e in log), timeout=RUN_TIMEOUT)
        wait(lambda: logged(a, "tool_result") >= 1, 60, "reply #0's tool result in A's log")
        sid = the_session(a)
        in_the_world(a, team, sid)
        kill_machine(a, run)

        workers.append(background(b, "worker", "--world", team.name, "--url", team.url,
                                  "--lease-ttl", str(TTL)))
        wait(lambda: lease_of(team, sid).passed or state_in_world(team, sid) != "running",
             TTL + 60, "B's worker to leave the session (or run it)")
        assert state_in_world(team, sid) == "running", err_of(b, "worker")
        left = stop_worker(b, workers.pop())
        found = lease_of(team, sid)
        assert (found.epoch, found.refused) == (1, None), found  # unclaimed, open to others
        assert line in found.passed and "took over" not in left, (found.passed, left)
        shown = json.loads(b.dh("world", "status", team.name, "--url", team.url, "--json").stdout)
        assert any(r["session_id"] == sid and line in r["hold_state"] for r in shown), shown
        refused = b.dh("resume", sid, "--world", team.name, "--url", team.url)
        assert refused.returncode == 6, refused.stderr.decode()
        assert refused.stderr.decode().strip().splitlines()[-1].startswith("Error: ")
        assert line in refused.stderr.decode()

        by_option = installed.version_set == "newest"
        if not by_option:
            grant_on(b, '["--dangerously-skip-permissions"]')
        workers.append(background(b, "worker", "--world", team.name, "--url", team.url,
                                  "--lease-ttl", str(TTL), *(["--grant", "all"] if by_option else [])))
        wait(lambda: state_in_world(team, sid) == "finished", RUN_TIMEOUT, "the turn to finish on B")
        taken = stop_worker(b, workers.pop())
    finally:
        for worker in workers:
            worker.send_signal(signal.SIGTERM)
            worker.wait(timeout=90)
        server.stop()
    assert f"took over session {sid} from" in taken, taken
    assert (a.proj / "a.txt").read_text() == "alpha\n"  # the Write was allowed
    assert (a.proj / "steps.log").read_text() == "step0\n"
