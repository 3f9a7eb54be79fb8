"""A machine killed after a completed step and before that step's snapshot, with the REAL
Claude Code CLI headless (pinned and newest):
- its checkout lost, `dh resume` restores the only snapshot there is (the session's start,
  0 files), says which recorded step's files it could not bring, and the model's next request
  carries dh's word naming that step;
- with no record of the step at all (the soak's known gap), `dh resume` relaunches the
  original command with dh's word on the folder's change after the prompt.

The race is made, not waited for: dh is stopped (SIGSTOP) once it has launched the harness
and taken the start snapshot, so its snapshot thread cannot look; the harness runs the shell
step alone and asks the model again (that answer stalls); then dh and the harness are killed."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys

import pytest

from tests.fakes.model_server import FakeModelServer
from tests.helpers.real_runs import MAY_HAVE_RUN, RUN_TIMEOUT, finish, launched_pid, session_of
from tests.helpers.team_worlds import pg_url, redis_url, team  # noqa: F401  (fixtures)
from tests.helpers.wait import wait_until
from tests.helpers.workspace_runs import rig_on
from tests.rig import HEADLESS_ARGS

pytestmark = [pytest.mark.e2e]

SCRIPT = {"replies": [
    # the first answer waits a little, so the harness asks while dh is already stopped
    {"text": "Step 0.", "shell": "echo step0 >> steps.log", "delay_s": 2, "delay_times": 1},
    {"text": "All done.", "delay_s": 120, "delay_times": 1},  # stalls on A: the kill lands then
]}
NOTE = "may be missing; check before relying on it"


def snapshots(rig, sid: str) -> list[tuple]:
    return rig.world().conn.execute("SELECT seq, reason, step FROM ws_snapshots WHERE session_id = ?"
                                    " ORDER BY seq", [sid]).fetchall()


def transcript_holds_result(rig) -> bool:
    return any(b'"tool_result"' in path.read_bytes()
               for path in (rig.tmp / ".claude" / "projects").glob("*/*.jsonl"))


def killed_after_a_step_dh_never_saw(a) -> str:
    """dh run on machine A, dh stopped once it launched the harness, the harness's shell
    step run, dh and the harness killed while the next answer stalls; the session's id."""
    dh = subprocess.Popen([sys.executable, "-m", "dh_cli", "run", "claude-code", "--max-restarts",
                           "0", "--", *HEADLESS_ARGS["claude-code"]("Run the step.")],
                          cwd=a.proj, env=a.env, stdin=subprocess.DEVNULL,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    harness = launched_pid(a)  # dh launches only once the start snapshot is taken
    os.kill(dh.pid, signal.SIGSTOP)
    sid = session_of(a)["id"]
    assert snapshots(a, sid) == [(1, "start", None)]
    a.server.wait_for(lambda log: any(e.get("reply_index") == 1 for e in log), timeout=RUN_TIMEOUT)
    wait_until(lambda: transcript_holds_result(a), "the step's result in the transcript")
    assert (a.proj / "steps.log").read_text() == "step0\n"  # the step ran
    os.killpg(harness, signal.SIGKILL)
    os.kill(dh.pid, signal.SIGKILL)
    finish(dh)
    assert snapshots(a, sid) == [(1, "start", None)]  # the step's snapshot was never taken
    return sid


def resume(a, sid: str) -> tuple[str, dict]:
    """`dh resume S` on A: its stderr and the first model request it caused."""
    asked = len(a.server.main_requests())
    resumed = subprocess.run([sys.executable, "-m", "dh_cli", "resume", sid], cwd=a.tmp, env=a.env,
                             capture_output=True, timeout=RUN_TIMEOUT, stdin=subprocess.DEVNULL)
    err = resumed.stderr.decode()
    assert resumed.returncode == 0, err
    assert a.world().get_session(sid).state == "finished", err
    return err, a.server.main_requests()[asked]


def last_message(request: dict) -> str:
    return json.dumps(request["body"]["messages"][-1])


def test_a_restore_from_before_the_last_step_tells_the_model_which_step(tmp_path, installed):
    server = FakeModelServer(SCRIPT).start()
    try:
        a = rig_on(tmp_path / "A", server, installed)
        sid = killed_after_a_step_dh_never_saw(a)
        shutil.rmtree(a.proj)  # the checkout is lost; the harness home is not
        err, request = resume(a, sid)
        assert "(0 file(s) of snapshot 1, start)" in err, err
        assert "taken before 1 recorded step(s), whose files may be missing: `Bash` call toolu_000" in err, err
        told = last_message(request)
        assert NOTE in told and "toolu_000" in told, told[-2000:]
        assert not (a.proj / "steps.log").exists()  # what the model is told may be missing is
    finally:
        server.stop()


def test_a_step_run_before_any_record_is_told_with_the_prompt_sent_again(tmp_path, installed):
    """The soak's known gap: Claude Code can run a command before it writes the prompt's row.
    Made here by A's dh logging nothing (stopped, in-process mirror) and the transcript
    removed after the kill: dh finds no conversation, only the folder changed since the
    session's start snapshot, and relaunches the original command with its word."""
    server = FakeModelServer(SCRIPT).start()
    try:
        a = rig_on(tmp_path / "A", server, installed)
        a.env["DH_SHARED_MIRROR"] = "0"  # the mirror is in dh's process: stopped with it
        sid = killed_after_a_step_dh_never_saw(a)
        assert list(a.world().records(sid)) == []
        for path in (a.tmp / ".claude" / "projects").glob("*/*.jsonl"):
            path.unlink()
        err, request = resume(a, sid)
        assert "dh: [dh] The working folder changed after the last step this session recorded" \
            " (steps.log created)" in err, err
        (told,) = [m for m in map(json.dumps, request["body"]["messages"]) if "Run the step." in m]
        assert "steps.log created" in told and MAY_HAVE_RUN in told, told[-2000:]
    finally:
        server.stop()


@pytest.mark.harnesses("claude-code")
@pytest.mark.version_sets("pinned")
def test_a_worker_s_takeover_from_before_the_last_step_tells_the_model(tmp_path, installed, team):
    """The same through `dh worker` on machine B, each team world. A runs its step and ships
    it, snapshot included; A is killed and lost (checkout and harness home); the step's
    snapshot is then deleted from the world, which leaves the world as a kill between the
    step's record and its snapshot leaves it."""
    server = FakeModelServer(SCRIPT).start()
    try:
        a, b = rig_on(tmp_path / "A", server, installed), rig_on(tmp_path / "B", server, installed)
        dh = subprocess.Popen([sys.executable, "-m", "dh_cli", "run", "claude-code", "--world", team.name,
                               "--url", team.url, "--lease-ttl", "5", "--",
                               *HEADLESS_ARGS["claude-code"]("Run the step.")],
                              cwd=a.proj, env=a.env, stdin=subprocess.DEVNULL,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
        harness = launched_pid(a)
        sid = session_of(a)["id"]
        server.wait_for(lambda log: any(e.get("reply_index") == 1 for e in log), timeout=RUN_TIMEOUT)
        wait_until(lambda: team.last_snapshot_step(sid) == "toolu_000", "the step's snapshot in the world")
        os.killpg(harness, signal.SIGKILL)
        os.killpg(dh.pid, signal.SIGKILL)
        finish(dh)
        team.drop_snapshots(sid, after=1)  # the start snapshot stays
        shutil.rmtree(a.proj)
        shutil.rmtree(a.tmp / ".claude")
        asked = len(server.main_requests())
        with open(b.tmp / "worker.err", "wb") as err:
            worker = subprocess.Popen([sys.executable, "-m", "dh_cli", "worker", "--world", team.name,
                                       "--url", team.url, "--lease-ttl", "5"], cwd=b.proj, env=b.env,
                                      stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err,
                                      start_new_session=True)
        try:
            wait_until(lambda: finished_in(team, sid), "the turn to finish on B", RUN_TIMEOUT)
        finally:
            worker.send_signal(signal.SIGTERM)
            worker.wait(timeout=90)
        told = last_message(server.main_requests()[asked])
        assert NOTE in told and "toolu_000" in told, told[-2000:]
        world = team.open()
        try:
            plans = [e.details for e in world.events(sid) if e.type == "resume_plan"]
        finally:
            world.close()
        assert plans[-1].get("not_restored") == ["toolu_000"], plans
    finally:
        server.stop()


def finished_in(team, sid: str) -> bool:
    world = team.open()
    try:
        return world.get_session(sid).state == "finished"
    finally:
        world.close()


@pytest.mark.harnesses("pi")
def test_pi_s_relaunch_without_its_typed_prompt_tells_the_model_in_its_system_prompt(tmp_path, installed):
    """Pi's TUI can run its first answer's step before it writes anything; relaunched with no
    message to carry dh's word (the prompt was typed), dh gives it to the real Pi as
    `--append-system-prompt` (wrappers/pi.py with_note): the model reads it in every request."""
    from dh_cli import wrappers
    from tests.rig import SCRIPT as PLAIN

    server = FakeModelServer(PLAIN).start()
    try:
        a = rig_on(tmp_path / "A", server, installed)
        note = f"[dh] steps.log created: a step {MAY_HAVE_RUN}."
        args = wrappers.get("pi").with_note(HEADLESS_ARGS["pi"]("Go.")[:-1], note) + ["Go."]
        assert args[:2] == ["--append-system-prompt", note]
        ran = a.dh("run", "pi", "--", *args, timeout=RUN_TIMEOUT)
        assert ran.returncode == 0, ran.stderr.decode()
        systems = [json.dumps(r["body"].get("system")) for r in server.main_requests()]
        assert systems and all(json.dumps(note)[1:-1] in s for s in systems), systems[0][-600:]
    finally:
        server.stop()
