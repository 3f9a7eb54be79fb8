"""Supervision beyond the crash matrix, end to end with real processes: a harness that cannot
start ends FATAL with its own stderr in the error, SIGTERM to dh leaves no process behind,
a tool command that outlives the harness is settled first, an interactive run in a pty.

The state machine itself (backoff, FATAL, stalls, the user's signals, the grace before
SIGKILL, no relaunch after a user stop, a harness lingering after its turn, a takeover or a
stale lease) is tested tick by tick in test_supervisor_states.py with fake processes and a
fake clock, every transition in milliseconds; keep this real-process layer to the few cases
only real processes can prove (six, about 16 s under load). dh killed then `dh resume`
(refused while the first harness lives) is in test_dh_kill.py, a hung real harness in
tests/e2e/test_real_harnesses.py, a lingering real OpenCode in tests/e2e/test_whole_home_lost.py,
a takeover over a real PostgreSQL in test_live_world.py."""

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
from .helpers.model import told_may_have_run

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


def test_a_harness_that_cannot_start_ends_fatal_with_its_stderr(rig):
    """Dies at once each time (the fake's `at-start`, as a real CLI on a bad flag): failed
    starts have their own limit (3 retries), so FATAL comes after 4 launches and 0+1+2 s of
    backoff, and the one error line carries what the harness wrote on stderr."""
    config = rig.tmp / ".config" / "dh" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text("[restart]\nstart_secs = 10\n")  # under any load, the fake dies sooner
    env = dict(rig.env, DH_FAKE_CRASH="at-start")
    proc = subprocess.run([sys.executable, "-m", "dh_cli", "run", "pi", "--max-restarts", "9", "--",
                           *HEADLESS_ARGS["pi"]("x")], cwd=rig.proj, env=env, capture_output=True,
                          timeout=60, stdin=subprocess.DEVNULL)
    assert proc.returncode == 1
    (line,) = [x for x in proc.stderr.decode().splitlines() if x.startswith("Error:")]
    assert "giving up on session" in line and "4 times in a row" in line and "dh resume" in line
    assert "crash requested at start (DH_FAKE_CRASH=at-start)" in line
    assert len([e for e in events(rig) if e.type == "launch"]) == 4
    assert [e.details["to"] for e in events(rig) if e.type == "state"][-1] == "FATAL"
    # the backoff between failed starts (0 + 1 + 2 s) is held on a fake clock:
    # test_supervisor_states test_a_harness_that_cannot_start_is_fatal_in_seconds_with_its_stderr


# grace 0.2 ("dh ended the command"): ToolTracker in test_tool_settle.py, the text in test_policy.py
@pytest.mark.parametrize("grace,expect", [("5", "went on to finish on its own")])
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


def test_no_process_left_after_a_normal_end(rig):
    """A tool that leaves a background process behind: gone once dh run ends (a FATAL end
    takes the same `finally`; test_supervisor_states checks that it ends the descendants)."""
    rig.server.set_script({"replies": [{"text": "Detach.", "shell": "(sleep 61 >/dev/null 2>&1 &) ; echo started"},
                                       {"text": "All done."}]})
    assert rig.run("pi").returncode == 0
    assert not _left("sleep 61")
