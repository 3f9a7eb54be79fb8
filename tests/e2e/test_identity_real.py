"""Session identity without stdout, over the real programs (issue 13): Codex's and OpenCode's
terminal UIs print no session id, and headless OpenCode prints one only with its first model
reply. dh finds the native session the launched harness created under its home (by cwd and
launch time), mirrors it from its first record, and resumes it by that id."""

from __future__ import annotations

import os
import signal
import sys
import time

import pytest

from tests.helpers.real_runs import (RUN_TIMEOUT, STALL_SCRIPT, check_log_holds_every_record_once,
                                     events, finish, launched_pid, leftover_processes, logged,
                                     session_of, spawn_dh)
from tests.rig import SCRIPT

pytestmark = pytest.mark.e2e

# harness -> (text on screen once its editor is ready, the record kind that shows reply 0's
# tool step is on disk)
TUI = {"codex": ("Ask Codex to do anything", "tool_result"),
       "opencode": ("Ask anything", "tool_call")}
# Stalled before its headers: `opencode run` prints a `step_start` line (with the session
# id) as soon as the first frame of a stream arrives.
FIRST_STALLED = {"replies": [dict(SCRIPT["replies"][0], delay_s=60, delay_times=1,
                                  stall_at="headers"),
                             *SCRIPT["replies"][1:]]}


def names(argv: list[str], native_id: str) -> bool:
    """The resume argv names the session: as its own word or as --flag=ID (issue 14's form)."""
    return any(a == native_id or a.endswith("=" + native_id) for a in argv)

def trust_project(rig) -> None:
    """Codex's TUI asks whether to trust the folder unless config.toml says so."""
    config = rig.tmp / ".codex" / "config.toml"
    config.write_text(config.read_text() +
                      f'\n[projects."{os.path.realpath(rig.proj)}"]\ntrust_level = "trusted"\n')


def kill_tree(pid_root: int) -> None:
    import psutil

    try:
        procs = psutil.Process(pid_root).children(recursive=True)
    except psutil.Error:
        return
    for proc in procs:
        try:
            proc.kill()
        except psutil.Error:
            pass


def end_leftovers(rig) -> None:
    """Codex's TUI leaves its app-server daemon (own session, cwd in the project): a test
    ends what it started."""
    for proc in leftover_processes(rig.tmp):
        try:
            proc.kill()
        except Exception:  # noqa: BLE001 - already gone
            pass


def type_prompt(child, pexpect, text: str = "Create the files.") -> None:
    """Type the prompt once the editor shows it took the keys (a TUI drawn under load may
    drop the first ones), then Enter."""
    for _ in range(3):
        time.sleep(2.0)
        child.send(text)
        try:
            child.expect_exact(text, timeout=15)
            break
        except pexpect.TIMEOUT:
            child.send("\x15")  # clear the line, try again
    time.sleep(0.5)
    child.send("\r")


def log_catches_up(rig, harness: str, timeout: float = 5.0) -> None:
    """The harness keeps writing while the test reads: the log holds every record once it
    has caught up (within milliseconds; a few seconds allowed under load)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            check_log_holds_every_record_once(rig, harness)
            return
        except AssertionError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


@pytest.mark.parametrize("harness", list(TUI))
def test_tui_session_is_found_mirrored_and_resumed_by_id(real_rig, harness):
    pexpect = pytest.importorskip("pexpect")
    rig = real_rig(STALL_SCRIPT)
    if harness == "codex":
        trust_project(rig)
    ready, step_kind = TUI[harness]
    child = pexpect.spawn(sys.executable, ["-m", "dh_cli", "run", harness], cwd=str(rig.proj),
                          env=rig.env, encoding="utf-8", timeout=60, dimensions=(40, 120))

    def drain_until(done, timeout=90.0):
        deadline = time.monotonic() + timeout
        while not done():
            assert time.monotonic() < deadline, "timed out"
            child.expect([pexpect.TIMEOUT], timeout=0.1)

    try:
        child.expect_exact(ready, timeout=90)
        type_prompt(child, pexpect)
        drain_until(lambda: any(e.get("reply_index") == 1 for e in rig.server.log))
        drain_until(lambda: logged(rig, step_kind) >= 1, timeout=30)
        session = session_of(rig)
        assert session["harness_session_id"], "no native id although the harness wrote its session"
        assert session["native_path"] and session["records"] > 0
        log_catches_up(rig, harness)
        os.killpg(launched_pid(rig), signal.SIGKILL)
        drain_until(lambda: [e.type for e in events(rig)].count("launched") == 2, timeout=60)
        (plan,) = [e.details for e in events(rig) if e.type == "resume_plan"]
        assert plan["mode"] == "resume", plan
        assert names(plan["argv"], session["harness_session_id"]), plan
        assert rig.server.completed_counts()[0] == 1  # reply 0 was not asked for again
    finally:
        kill_tree(child.pid)
        child.close(force=True)
        end_leftovers(rig)


@pytest.mark.harnesses("opencode")
def test_headless_opencode_killed_before_it_printed_an_id(real_rig):
    """`opencode run` prints its session id only with the first model reply: killed while
    that reply is stalled, dh still knows the session (from its row) and resumes it, so the
    prompt is not sent again as a new session."""
    rig = real_rig(FIRST_STALLED)
    dh = spawn_dh(rig, "opencode")
    rig.server.wait_for(lambda log: any(e.get("reply_index") == 0 for e in log), timeout=RUN_TIMEOUT)
    deadline = time.monotonic() + 30
    while not session_of(rig)["harness_session_id"]:
        assert time.monotonic() < deadline, "the session row was never found"
        time.sleep(0.05)
    assert (rig.tmp / "dh-stdout.txt").read_bytes() == b""  # nothing on stdout named it
    os.killpg(launched_pid(rig), signal.SIGKILL)
    code, err = finish(dh)
    assert code == 0, err
    (plan,) = [e.details for e in events(rig) if e.type == "resume_plan"]
    assert plan["mode"] == "resume" and names(plan["argv"], session_of(rig)["harness_session_id"])
    assert rig.server.completed_counts() == {0: 1, 1: 1, 2: 1, 3: 1}
    check_log_holds_every_record_once(rig, "opencode")
