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
    assert listed and all(s["turn"] == 1 for s in listed), listed
    steps = [s["step"] for s in listed if s["step"]]
    assert steps, listed  # the shell and write calls may write; the read does not count
    shown = rig.dh("log", "show", sid).stdout.decode()
    assert f"workspace snapshot {listed[-1]['seq']}: turn 1" in shown
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
