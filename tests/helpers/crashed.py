"""A real Claude Code session imported into the log with a crash, a repair and a resume
journaled: what the export and log-reading tests show."""

from __future__ import annotations

from pathlib import Path

import pytest

from dh_cli.worlds.local import LocalWorld
from tests.conftest import fixture_home


# What a supervised session that crashed once and was resumed leaves in the journal.
CRASH_EVENTS = [
    ("launch", {"argv": ["claude", "-p", "Create the files."]}, 1, "intent"),
    ("launched", {"pid": 4242, "create_time": 1.0}, 1, "outcome"),
    ("exited", {"code": -9, "signal": 9, "stalled": False, "user_signal": None}, 1, "outcome"),
    ("state", {"from": "RUNNING", "to": "BACKOFF", "outcome": "crashed", "reason": "crashed"}, 1, "info"),
    ("resume", {"attempt": 2}, 2, "intent"),
    ("repair", {"call_id": "toolu_01", "tool": "Bash", "replay": "never", "outcome": None}, 2, "intent"),
    ("repaired", {"call_id": "toolu_01", "tool": "Bash", "replay": "never",
                  "text": "The command was cut off by a crash."}, 2, "outcome"),
    ("resume_plan", {"mode": "resume", "argv": ["--resume", "x"]}, 2, "outcome"),
    ("launch", {"argv": ["claude", "--resume", "x"]}, 2, "intent"),
    ("exited", {"code": 0, "signal": None}, 2, "outcome"),
    ("state", {"from": "RUNNING", "to": "EXITED", "outcome": "finished"}, 2, "info"),
]


def import_killed_resumed(tmp_path, run_dh) -> tuple[LocalWorld, str, Path]:
    """The real Claude Code session that was killed and resumed, imported into a fresh log:
    (the log, the session's id, the harness home)."""
    home = fixture_home("claude-code", "killed-resumed", tmp_path)
    assert run_dh("import", "claude", "--all", "--home", str(home)).exit_code == 0
    world = LocalWorld()
    (session,) = world.list_sessions()
    return world, session["id"], home


@pytest.fixture
def crashed(tmp_path, run_dh):
    """An imported real Claude Code session with a crash, a repair and a resume journaled."""
    world, session_id, home = import_killed_resumed(tmp_path, run_dh)
    for type_, details, attempt, phase in CRASH_EVENTS:
        world.add_event(session_id, type_, details, attempt, phase)
    return session_id, home

