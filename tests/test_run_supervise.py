"""Supervision beyond the crash matrix: a harness that always dies at start-up ends FATAL, the
user's Ctrl-C is never restarted, a hung harness is stopped and resumed, dh itself killed and
then `dh resume`, tool commands that outlive the harness, and an interactive run in a pty."""

import json
import os
import signal
import subprocess
import sys
import time

import psutil
import pytest

from .fakes.model_server import FakeModelServer
from .rig import HEADLESS_ARGS, SCRIPT, Rig
from .test_run_crash import told_may_have_run

STALL_SCRIPT = {"replies": [SCRIPT["replies"][0], dict(SCRIPT["replies"][1], delay_s=30, delay_times=1),
                            *SCRIPT["replies"][2:]]}


@pytest.fixture
def rig(tmp_path):
    server = FakeModelServer(SCRIPT).start()
    yield Rig(tmp_path, server)
    server.stop()


def events(rig) -> list:
    world = rig.world()
    (session,) = world.list_sessions()
    return world.events(session["id"])


def spawn_dh(rig, harness, *dh_opts, env=None):
    return subprocess.Popen([sys.executable, "-m", "dh_cli", "run", harness, *dh_opts, "--",
                             *HEADLESS_ARGS[harness]("Create the files.")],
                            cwd=rig.proj, env={**rig.env, **(env or {})}, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def wait_for_launch(rig, timeout=15) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            launched = [e for e in events(rig) if e.type == "launched"]
        except (ValueError, Exception):
            launched = []
        if launched:
            return launched[-1].details
        time.sleep(0.05)
    raise AssertionError("the harness was never launched")


def test_dies_at_start_every_time_ends_fatal(rig):
    env = dict(rig.env, DH_FAKE_CRASH="at-start")
    proc = subprocess.run([sys.executable, "-m", "dh_cli", "run", "pi", "--max-restarts", "2", "--",
                           *HEADLESS_ARGS["pi"]("x")], cwd=rig.proj, env=env, capture_output=True,
                          timeout=60, stdin=subprocess.DEVNULL)
    assert proc.returncode == 1
    assert b"giving up on session" in proc.stderr and b"dh resume" in proc.stderr
    assert len([e for e in events(rig) if e.type == "launch"]) == 3
    assert [e.details["to"] for e in events(rig) if e.type == "state"][-1] == "FATAL"


def test_user_ctrl_c_is_not_restarted(rig):
    rig.server.set_script(STALL_SCRIPT)
    dh = spawn_dh(rig, "claude-code")
    rig.server.wait_for(lambda log: any(e.get("reply_index") == 1 for e in log), timeout=15)
    dh.send_signal(signal.SIGINT)
    assert dh.wait(timeout=20) == 130
    assert len([e for e in events(rig) if e.type == "launch"]) == 1
    assert not psutil.pid_exists(wait_for_launch(rig)["pid"]) or \
        psutil.Process(wait_for_launch(rig)["pid"]).status() == psutil.STATUS_ZOMBIE


def test_hung_harness_is_stopped_and_resumed(rig):
    """The model stream stalls mid-turn (reply #1 hangs for 30 s): no progress for the stall
    timeout while the turn is open, so dh stops the harness and resumes it."""
    rig.server.set_script(STALL_SCRIPT)
    proc = subprocess.run([sys.executable, "-m", "dh_cli", "run", "pi", "--stall-timeout", "1", "--",
                           *HEADLESS_ARGS["pi"]("x")], cwd=rig.proj, env=rig.env, capture_output=True,
                          timeout=60, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr.decode()
    assert b"pi hung (no progress for 1 s during a turn); resuming" in proc.stderr
    assert any(e.type == "stall" for e in events(rig))
    assert rig.server.rebilled() == 0
    assert (rig.proj / "a.txt").read_text() == "alpha\n"


def test_dh_killed_then_resume_waits_for_the_first_harness(rig):
    rig.server.set_script(STALL_SCRIPT)
    dh = spawn_dh(rig, "pi")
    launched = wait_for_launch(rig)
    rig.server.wait_for(lambda log: any(e.get("reply_index") == 1 for e in log), timeout=15)
    dh.send_signal(signal.SIGKILL)
    dh.wait()
    assert psutil.pid_exists(launched["pid"])
    (session,) = rig.world().list_sessions()
    refused = rig.dh("resume", session["id"])
    assert refused.returncode == 4 and b"still running" in refused.stderr
    os.killpg(launched["pid"], signal.SIGKILL)
    time.sleep(0.3)
    resumed = rig.dh("resume", session["id"])
    assert resumed.returncode == 0, resumed.stderr.decode()
    assert rig.server.rebilled() == 0
    assert (rig.proj / "a.txt").read_text() == "alpha\n"


@pytest.mark.parametrize("grace,expect", [("5", "went on to finish on its own"),
                                          ("0.2", "dh ended the command")])
def test_tool_that_outlives_the_harness_is_settled_first(rig, grace, expect):
    script = {"replies": [{"text": "Slow.", "shell": "sleep 1.5; echo once >> effect.log"},
                          {"text": "All done."}]}
    rig.server.set_script(script)
    env = dict(rig.env, DH_FAKE_CRASH="during-tool=1", DH_FAKE_CRASH_ONCE=str(rig.tmp / "tool"))
    proc = subprocess.run([sys.executable, "-m", "dh_cli", "run", "claude-code", "--tool-grace", grace, "--",
                           *HEADLESS_ARGS["claude-code"]("x")], cwd=rig.proj, env=env,
                          capture_output=True, timeout=60, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr.decode()
    time.sleep(2)  # had the command been left running, it would have written by now
    effect = (rig.proj / "effect.log").read_text() if (rig.proj / "effect.log").exists() else ""
    assert effect == ("once\n" if grace == "5" else "")
    assert told_may_have_run(rig.server)
    bodies = json.dumps([e["body"] for e in rig.server.main_requests()])
    assert expect in bodies
    exited = [e for e in events(rig) if e.type == "exited"][0]
    assert exited.details["tools"] and exited.details["tools"][0]["command"].endswith("effect.log")


def test_no_process_left_after_sigterm_to_dh(rig):
    command = f"sleep 60.{os.getpid()}"  # unique: other test runs on the machine sleep too
    rig.server.set_script({"replies": [{"text": "Slow.", "shell": command}, {"text": "done"}]})
    dh = spawn_dh(rig, "codex")
    rig.server.wait_for(lambda log: any(e.get("reply_index") == 0 and e["event"] == "response_done"
                                        for e in log), timeout=15)
    time.sleep(0.5)
    dh.send_signal(signal.SIGTERM)
    assert dh.wait(timeout=20) == 143
    time.sleep(0.2)
    left = [p for p in psutil.process_iter(["cmdline"]) if command in " ".join(p.info["cmdline"] or [])]
    assert not left, left


@pytest.mark.parametrize("harness,args", [("claude-code", ["--dangerously-skip-permissions"]),
                                          ("pi", ["--provider", "mock", "--model", "mock-claude"])])
def test_interactive_run_is_resumed_in_the_same_terminal(rig, harness, args):
    import pexpect

    rig.server.set_script(STALL_SCRIPT)
    child = pexpect.spawn(sys.executable, ["-m", "dh_cli", "run", harness, "--", *args],
                          cwd=str(rig.proj), env=rig.env, encoding="utf-8", timeout=30,
                          dimensions=(40, 120))
    try:
        child.expect_exact("› ")
        child.sendline("Create the files.")
        rig.server.wait_for(lambda log: any(e.get("reply_index") == 1 for e in log), timeout=20)
        os.killpg(wait_for_launch(rig)["pid"], signal.SIGKILL)
        child.expect_exact("resuming session")
        child.expect_exact("› ")  # the resumed harness, in the same terminal
        child.sendline("/exit")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    assert child.exitstatus == 0
    assert len([e for e in events(rig) if e.type == "launch"]) == 2
    assert rig.server.rebilled() == 0


def _left(marker: str) -> list:
    return [p for p in psutil.process_iter(["cmdline"]) if marker in " ".join(p.info["cmdline"] or [])]


def test_no_process_left_after_a_normal_end_or_fatal(rig):
    """A tool that leaves a background process behind: gone once dh run ends, whether the
    run finished normally or ended FATAL after a crash loop."""
    rig.server.set_script({"replies": [{"text": "Detach.", "shell": "(sleep 61 >/dev/null 2>&1 &) ; echo started"},
                                       {"text": "All done."}]})
    assert rig.run("pi").returncode == 0
    assert not _left("sleep 61")
    detach = {"text": "Detach.", "shell": "(sleep 61 >/dev/null 2>&1 &) ; sleep 5"}
    rig.server.set_script({"replies": [detach, detach, detach, {"text": "All done."}]})
    env = dict(rig.env, DH_FAKE_CRASH="during-tool=1")  # each attempt dies in its first tool
    proc = subprocess.run([sys.executable, "-m", "dh_cli", "run", "pi", "--max-restarts", "1", "--",
                           *HEADLESS_ARGS["pi"]("again")], cwd=rig.proj, env=env, capture_output=True,
                          timeout=60, stdin=subprocess.DEVNULL)
    assert b"giving up" in proc.stderr
    assert not _left("sleep 61")
