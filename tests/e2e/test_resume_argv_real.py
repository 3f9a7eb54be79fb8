"""dh's own resume words survive a value flag the user left without its value, on the real
Claude Code (pinned), offline against the fake model: a session whose command line ends in
`--model` (Claude refuses that one itself: "argument missing") was resumed as `--model
--resume=<id>`, so Claude took dh's resume flag for the model's name and started a new
conversation (2.1.197). dh now leaves such a flag out of every relaunch it builds."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from tests.fakes.model_server import tool_results
from tests.helpers.real_runs import RUN_TIMEOUT, session_of
from tests.rig import SCRIPT

pytestmark = pytest.mark.e2e


def ending_in(rig, sid: str, flag: str) -> None:
    """The session's command line as dh keeps it, with `flag` added at the end."""
    db = sqlite3.connect(Path(rig.env["DH_HOME"]) / "dh.db")
    (argv,) = db.execute("SELECT argv FROM places WHERE session_id = ?", [sid]).fetchone()
    db.execute("UPDATE places SET argv = ? WHERE session_id = ?", [json.dumps([*json.loads(argv), flag]), sid])
    db.commit()
    db.close()


def test_a_trailing_model_flag_does_not_eat_the_resume(real_rig):
    rig = real_rig(SCRIPT)
    first = rig.run("claude-code", timeout=RUN_TIMEOUT)
    assert first.returncode == 0, first.stderr.decode()
    sid = session_of(rig)["id"]
    ending_in(rig, sid, "--model")
    asked = len(rig.server.main_requests())
    resumed = rig.dh("resume", sid, "--prompt", "Now summarize the work.", timeout=RUN_TIMEOUT)
    assert resumed.returncode == 0, resumed.stderr.decode()
    (request,) = rig.server.main_requests()[asked:]
    results = tool_results(request["api"], request["body"])
    assert len(results) == 3 and "alpha" in results[2][1]  # the same conversation, resumed
    assert "--resume" not in json.dumps(request["body"].get("model"))
