"""A turn cut by a kill and resumed by dh stays one turn, on every real release: the crash
and the resume are marked inside it, and what dh saved is the price of the calls it kept.

With DH_CAPTURE_RESUMED=1 each run's log is also kept as tests/fixtures/resumed/<harness>-
<version>.db, which tests/test_resumed_turns.py reads without the real programs."""

from __future__ import annotations

import os
import signal
import sqlite3
from pathlib import Path

import pytest

from tests.helpers.real_runs import (RUN_TIMEOUT, STALL_SCRIPT, finish, launched_pid, logged,
                                     spawn_dh)
from tests.rig import HARNESSES
from tests.resumed import check_resumed_log

pytestmark = pytest.mark.e2e
CAPTURED = Path(__file__).parent.parent / "fixtures" / "resumed"


@pytest.mark.parametrize("harness", HARNESSES)
def test_a_killed_and_resumed_turn_is_one_turn(real_rig, installed, harness):
    rig = real_rig(STALL_SCRIPT)
    dh = spawn_dh(rig, harness)
    rig.server.wait_for(lambda log: any(e.get("reply_index") == 1 for e in log), timeout=RUN_TIMEOUT)
    if harness in ("claude-code", "pi", "codex"):  # reply #0's result on disk: a call to keep
        rig.server.wait_for(lambda _log: logged(rig, "tool_result") >= 1, timeout=60)
    os.killpg(launched_pid(rig), signal.SIGKILL)
    code, err = finish(dh)
    assert code == 0, err
    db = Path(rig.env["DH_HOME"]) / "dh.db"
    if os.environ.get("DH_CAPTURE_RESUMED"):
        CAPTURED.mkdir(parents=True, exist_ok=True)
        target = CAPTURED / f"{harness}-{installed.versions()[harness]}.db"
        target.unlink(missing_ok=True)
        with sqlite3.connect(db) as conn:
            conn.execute("VACUUM INTO ?", [str(target)])
    check_resumed_log(db, rig.env)
