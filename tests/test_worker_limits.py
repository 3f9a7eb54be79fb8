"""What one `dh worker` cannot do is its own limit, not the team's (issue 38, round 4).

A session this worker may not run (its flags grant less than the session had, its roots,
its user's folders, no harness) is left to other workers: the reason is noted on the lease
(`dh world status` shows it) but the lease is never refused. A damaged lease row in a Redis
world is shown refused and stops neither the workers nor `dh world status`. Without --root a
world's row never puts a session in the user's home or its hidden folders. The worker's
child logs (the harness's raw output) are this user's only."""

from __future__ import annotations

import json
import os
import stat

import pytest

from dh_cli import events
from dh_cli.models import Session
from dh_cli.team.protocol import Holder
from dh_cli.team.takeover import Claim, Pass, claim, holdings, orphans
from dh_cli.team.worker import child_log, refusal
from dh_cli.team.worker_place import RunAs, current_user
from dh_cli.util import new_session_id, now_iso
from dh_cli.worlds.local import LocalWorld
from dh_cli.wrappers import get as get_wrapper
from dh_cli.wrappers.grants import Grant

from .helpers.stand_ins import dh
from .helpers.team_worlds import Team, pg_url, redis_url, team  # noqa: F401  (fixtures)


def orphan_in(world, harness: str = "claude-code", cwd: str = "/tmp") -> str:
    """A session left mid-turn by a machine that died: open, its lease lapsed."""
    sid = new_session_id()
    world.put_session(Session(id=sid, harness=harness, cwd=cwd, home="/h", host="host-a",
                              state="running", created_at=now_iso(), updated_at=now_iso()))
    epoch = world.lease_take(sid, Holder("host-a", "boot-a", 1), 15)
    world.lease_lapse(sid, epoch)
    return sid


def test_a_pass_is_noted_for_people_and_leaves_the_session_to_the_next_worker(team):
    world = team.open()
    try:
        sid = orphan_in(world)
        assert claim(world, 15, accept=lambda c: Pass("no flags here")) is None
        found = world.leases(sid)[sid]
        assert found.refused is None and found.passed.endswith(": no flags here")
        assert holdings(world)[sid].state.startswith("orphaned, left by ")
        assert [o.session_id for o in orphans(world)] == [sid]
        got = claim(world, 15, accept=lambda c: None)
        assert got is not None and got.session_id == sid
        assert world.leases(sid)[sid].passed is None  # the new holder clears it
    finally:
        world.close()


def test_a_refusal_every_machine_would_make_is_still_the_team_s(team):
    world = team.open()
    try:
        sid = orphan_in(world)
        assert claim(world, 15, accept=lambda c: "its working directory / is the root folder") is None
        assert world.leases(sid)[sid].refused and orphans(world) == []
    finally:
        world.close()


@pytest.mark.redis
@pytest.mark.parametrize("fields", [{"boot": "b", "pid": "1", "epoch": "1", "hb": "1", "ttl": "15"},
                                    {"host": "h", "boot": "b", "pid": "1", "epoch": "x", "hb": "1", "ttl": "15"},
                                    {"host": "h", "boot": "b", "pid": "1", "epoch": "1", "hb": "soon", "ttl": "15"}])
def test_a_damaged_redis_lease_is_shown_refused_and_stops_nobody(redis_url, fields, tmp_path):  # noqa: F811
    world = Team("redis", redis_url).open()
    try:
        good = orphan_in(world)
        bad = new_session_id()
        world.put_session(Session(id=bad, harness="pi", cwd="/tmp", home="/h", host="x",
                                  state="running", created_at=now_iso(), updated_at=now_iso()))
        world.client.hset(f"dh:lease:{bad}", mapping=fields)
        world.client.sadd("dh:leases", bad)
        assert world.leases()[bad].refused.startswith("damaged lease")
        assert [o.session_id for o in orphans(world)] == [good]
        assert holdings(world)[bad].state.startswith("refused: damaged lease")
    finally:
        world.close()
    shown = dh("world", "status", "redis", "--json", env={**os.environ, "DH_REDIS_URL": redis_url},
               cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert any(r["session_id"] == bad and r["hold_state"].startswith("refused: damaged")
               for r in json.loads(shown.stdout))


# where a world's row may put a session ---------------------------------------------------
def _me(home: str, roots=()) -> RunAs:
    me = current_user()
    return RunAs(me.name, me.uid, me.gid, home, tuple(roots))


@pytest.mark.parametrize("below", ["", ".ssh", ".config/dh", ".aws/x"])
def test_without_a_root_no_session_runs_in_the_home_or_its_hidden_folders(tmp_path, below):
    home = tmp_path / "home"
    (home / below).mkdir(parents=True, exist_ok=True)
    cwd = str(home / below).rstrip("/") if below else str(home)
    reason = refusal(None, Claim(new_session_id(), "pi", cwd, "host-a", 1, 2), _me(str(home)))
    assert isinstance(reason, Pass) and ("home folder" in reason or "hidden folder" in reason)


def test_a_project_in_the_home_runs(tmp_path):
    home = tmp_path / "home"
    (home / "src" / "proj").mkdir(parents=True)
    assert refusal(None, Claim(new_session_id(), "pi", str(home / "src" / "proj"), "a", 1, 2),
                   _me(str(home))) is None


def test_a_link_into_a_hidden_folder_is_refused_too(tmp_path):
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / "innocent").symlink_to(home / ".ssh")
    reason = refusal(None, Claim(new_session_id(), "pi", str(home / "innocent"), "a", 1, 2),
                     _me(str(home)))
    assert isinstance(reason, Pass) and "~/.ssh" in reason


def test_a_root_refusal_is_this_worker_s_own(tmp_path):
    (tmp_path / "root").mkdir()
    (tmp_path / "elsewhere").mkdir()
    who = _me(str(tmp_path / "home"), [str(tmp_path / "root")])
    reason = refusal(None, Claim(new_session_id(), "pi", str(tmp_path / "elsewhere"), "a", 1, 2), who)
    assert isinstance(reason, Pass) and "roots" in reason
    system = refusal(None, Claim(new_session_id(), "pi", "/etc", "a", 1, 2), who)
    assert system and not isinstance(system, Pass)


def test_the_worker_leaves_a_session_its_flags_grant_too_little_for(tmp_path):
    """The check the worker makes before claiming (resume/grants.py on the world's rows)."""
    world = LocalWorld()
    sid = new_session_id()
    (tmp_path / "proj").mkdir()
    world.put_session(Session(id=sid, harness="claude-code", cwd=str(tmp_path / "proj"), home="/h",
                              host="host-a", state="running", created_at=now_iso(),
                              updated_at=now_iso(), argv=json.dumps(["-p", "hi"])))
    events.add(world, sid, events.launch(["claude", "-p"], Grant("all").to_dict()))
    candidate = Claim(sid, "claude-code", str(tmp_path / "proj"), "host-a", 1, 2)
    reason = refusal(world, candidate, _me(str(tmp_path / "home")))
    assert isinstance(reason, Pass)
    assert 'claude-code = ["--dangerously-skip-permissions"]' in reason
    granting = {"claude": ["--permission-mode", "bypassPermissions"]}
    assert refusal(world, candidate, _me(str(tmp_path / "home")), granting) is None
    world.close()


def test_worker_child_logs_are_this_user_s_only(tmp_path):
    folder = tmp_path / "worker"
    folder.mkdir(mode=0o755)
    (folder / "old.log").write_bytes(b"x")
    os.chmod(folder / "old.log", 0o644)
    for sid in ("new", "old"):
        with child_log(folder, sid) as log:
            log.write(b"harness output\n")
        assert stat.S_IMODE((folder / f"{sid}.log").stat().st_mode) == 0o600
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert (folder / "old.log").read_bytes() == b"xharness output\n"


def test_a_harness_binary_missing_here_is_this_machine_s_lack(tmp_path):
    """DH_<HARNESS>_BIN naming nothing on this machine: HarnessNotFound (a worker passes the
    session on, takeover.end_hold) before any process is started, not a failed spawn that
    was written refused for the whole team."""
    from dh_cli.errors import HarnessNotFound
    from dh_cli.supervisor.launch import find_binary

    with pytest.raises(HarnessNotFound):
        find_binary(get_wrapper("pi"), {"DH_PI_BIN": str(tmp_path / "no-pi"), "PATH": "/usr/bin"})


@pytest.mark.parametrize("failure", ["harness", "grants"])
def test_a_claimed_resume_that_fails_for_this_machine_s_lack_is_passed_not_refused(team, failure):
    from dh_cli.errors import HarnessNotFound, NotGranted
    from dh_cli.team.lease import Lease
    from dh_cli.team.takeover import end_hold

    world = team.open()
    sid = orphan_in(world)
    lease = Lease(team.open(), sid, 15).acquire()
    error = HarnessNotFound("no pi here") if failure == "harness" else NotGranted("grant it")
    local = LocalWorld()
    local.put_session(world.get_session(sid))  # the pull that came before the failure
    end_hold(local, lease, sid, error, claimed=True)
    local.close()
    try:
        found = world.leases(sid)[sid]
        assert found.refused is None and found.left <= 0 and found.passed
        assert [o.session_id for o in orphans(world)] == [sid]
    finally:
        world.close()


def test_the_serve_pages_read_a_left_orphan_as_orphaned():
    """`dh serve` shows the holding's state with the note, counts it orphaned on the team
    page and finds it under the `orphaned` filter."""
    from dh_cli.serve.reads import shown_state
    from dh_cli.serve.team import _machines

    state = "orphaned, left by host-b: its working directory /w is under none of this worker's roots"
    assert shown_state({"hold_state": state, "state": "running"}, "here") == state
    row = {"id": "s", "host": "host-a", "state": state, "lease_age": 30.0}
    assert _machines([row], [], {}, 0)[0]["orphaned"] == 1
