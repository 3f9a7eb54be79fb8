"""Snapshots under `dh run` (the faithful fake harnesses of tests/fakes), and `dh resume`
restoring a lost working directory before it relaunches; kept or restored on request when
the folder exists and differs."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

from .fakes.model_server import FakeModelServer
from .rig import SCRIPT, Rig


@pytest.fixture
def rig(tmp_path):
    server = FakeModelServer(SCRIPT).start()
    yield Rig(tmp_path, server)
    server.stop()


def test_run_snapshots_after_writing_steps_and_resume_restores_a_lost_cwd(rig):
    done = rig.run("claude-code")
    assert done.returncode == 0, done.stderr.decode()
    (session,) = rig.world().list_sessions()
    sid = session["id"]
    listed = json.loads(rig.dh("workspace", "list", sid, "--json").stdout)
    # the folder as the session found it, then turn 1's steps
    assert listed[0]["reason"] == "start" and listed[0]["turn"] is None, listed
    assert len(listed) > 1 and all(s["turn"] == 1 for s in listed[1:]), listed
    steps = [s["step"] for s in listed if s["step"]]
    assert steps, listed  # the shell and write calls may write; the read does not count
    shown = rig.dh("log", "show", sid).stdout.decode().splitlines()
    marks = [i for i, line in enumerate(shown) if line.startswith("  ⧉ workspace snapshot ")]
    assert [shown[i].split(":")[0] for i in marks] == [f"  ⧉ workspace snapshot {s['seq']}" for s in listed]
    for snap, at in zip(listed, marks):  # each step's mark right after its tool call's line
        if snap["step"]:
            before = [line for line in shown[:at] if not line.startswith("  ⧉")][-1]
            assert before.startswith("  tool ") and shown[at].endswith(
                f"after tool call {snap['step']}: {snap['files']} file(s), {snap['bytes']:,} bytes"), shown
    diff = rig.dh("workspace", "diff", sid, "--turn", "1").stdout.decode()
    assert "added     a.txt" in diff and "added     steps.log" in diff

    shutil.rmtree(rig.proj)
    resumed = subprocess.run([sys.executable, "-m", "dh_cli", "resume", sid, "--prompt", "Go on.",
                              "--no-supervise"], cwd=rig.tmp, env=rig.env, capture_output=True,
                             timeout=60, stdin=subprocess.DEVNULL)
    err = resumed.stderr.decode()
    assert resumed.returncode == 0, err
    assert f"dh: restored the workspace of session {sid} into {rig.proj}" in err
    assert (rig.proj / "a.txt").read_text() == "alpha\n"
    assert (rig.proj / "steps.log").read_text() == "step0\n"


def test_resume_into_a_differing_cwd_keeps_it_headless_unless_told(rig):
    assert rig.run("claude-code").returncode == 0
    (session,) = rig.world().list_sessions()
    (rig.proj / "a.txt").write_text("changed by hand\n")
    kept = rig.dh("resume", session["id"], "--prompt", "Go on.", "--no-supervise")
    err = kept.stderr.decode()
    assert "differs from the session's last workspace snapshot" in err and "modified     a.txt" in err
    assert "no terminal to ask on: keeping the folder" in err
    assert (rig.proj / "a.txt").read_text() == "changed by hand\n"
    (rig.proj / "a.txt").write_text("changed again\n")
    restored = rig.dh("resume", session["id"], "--prompt", "Go on.", "--no-supervise",
                      "--workspace", "restore")
    assert restored.returncode == 0, restored.stderr.decode()
    assert "restored 1 file(s) of" in restored.stderr.decode()
    bad = rig.dh("resume", session["id"], "--workspace", "maybe")
    assert bad.returncode == 2 and b"Error: bad --workspace value 'maybe'" in bad.stderr


def resume_on_a_terminal(rig, sid: str, answer: bytes) -> tuple[str, int]:
    """`dh resume` on a real pty: wait for the question, type the answer, read to the end."""
    import os
    import pty
    import select
    import time

    pid, fd = pty.fork()
    if pid == 0:  # the child: dh with the pty as its terminal
        os.chdir(rig.tmp)
        os.execve(sys.executable, [sys.executable, "-m", "dh_cli", "resume", sid, "--prompt",
                                   "Go on.", "--no-supervise"], rig.env)
    seen, deadline, answered = b"", time.monotonic() + 90, False
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.5)
        if ready:
            try:
                chunk = os.read(fd, 65536)
            except OSError:  # the child closed the terminal
                break
            if not chunk:
                break
            seen += chunk
        if not answered and b"before resuming? [Y/n]" in seen:
            os.write(fd, answer + b"\r")
            answered = True
    _, status = os.waitpid(pid, 0)
    os.close(fd)
    assert answered, seen.decode(errors="replace")
    return seen.decode(errors="replace").replace("\r\n", "\n"), os.waitstatus_to_exitcode(status)


@pytest.mark.parametrize("answer", [b"y", b"n"])
def test_resume_on_a_terminal_shows_the_difference_and_asks(rig, answer):
    assert rig.run("claude-code").returncode == 0
    (session,) = rig.world().list_sessions()
    (rig.proj / "a.txt").write_text("changed by hand\n")
    (rig.proj / "mine.txt").write_text("not in the snapshot\n")
    shown, code = resume_on_a_terminal(rig, session["id"], answer)
    assert code == 0, shown
    question = shown.index("Restore the snapshot's files before resuming? [Y/n]")
    listed = shown[:question]
    assert "differs from the session's last workspace snapshot" in listed
    assert "  modified     a.txt" in listed and "mine.txt" not in listed  # what a restore would write
    if answer == b"y":
        assert "restored 1 file(s) of" in shown[question:]
        assert (rig.proj / "a.txt").read_text() == "alpha\n"
    else:
        assert "restored" not in shown[question:]
        assert (rig.proj / "a.txt").read_text() == "changed by hand\n"
    assert (rig.proj / "mine.txt").read_text() == "not in the snapshot\n"  # never removed
