"""A turn cut by a kill and resumed by dh is one turn, on the logs dh wrote around each real
release killed mid-turn and resumed (captured by tests/e2e/test_resumed_turns.py with
DH_CAPTURE_RESUMED=1): Claude Code 2.1.197 and 2.1.332 (which writes "No response requested."
before dh's continuation prompt), Codex 0.171.0, OpenCode 1.18.33, Pi 0.73.1 and 1.6.0. Each
log was written by the dh of its capture and is read here through every later migration."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from dh_cli.workspace.watch import RecordFollower
from dh_cli.worlds.local import LocalWorld
from dh_cli.wrappers import get as get_wrapper
from tests.resumed import check_resumed_log
from tests.rig import dh

CAPTURED = sorted((Path(__file__).parent / "fixtures" / "resumed").glob("*.db"))


def test_every_release_has_a_captured_log():
    names = {p.stem.rsplit("-", 1)[0] for p in CAPTURED}
    assert names == {"claude-code", "codex", "opencode", "pi"}
    assert {"claude-code-2.1.197", "claude-code-2.1.332", "pi-0.73.1", "pi-1.6.0"} <= {p.stem for p in CAPTURED}


@pytest.mark.parametrize("captured", CAPTURED, ids=[p.stem for p in CAPTURED])
def test_the_resumed_turn_is_one_turn_with_its_crash_inside(captured, tmp_path):
    shutil.copy(captured, tmp_path / "dh.db")
    check_resumed_log(tmp_path / "dh.db")


@pytest.mark.parametrize("captured", CAPTURED, ids=[p.stem for p in CAPTURED])
def test_the_workspace_snapshots_count_the_resumed_turn_once(captured, tmp_path):
    """The snapshot thread numbers turns as the log does: the continuation is not a turn."""
    shutil.copy(captured, tmp_path / "dh.db")
    world = LocalWorld(tmp_path / "dh.db")
    (session,) = world.list_sessions()
    follower = RecordFollower(world, get_wrapper(session["harness"]), session["id"], {})
    follower.steps()
    assert follower.turn == 1


@pytest.mark.parametrize("captured", CAPTURED, ids=[p.stem for p in CAPTURED])
def test_log_show_names_the_turn_each_snapshot_stands_in(captured, tmp_path):
    """These logs were captured by a dh whose snapshot thread counted the resumed turn
    again (snapshots stored as turn 2, OpenCode's as 2 and 5): `dh log show` names the turn
    of the log each mark stands in, never one the log does not have."""
    shutil.copy(captured, tmp_path / "dh.db")
    env = {"DH_HOME": str(tmp_path)}
    (session,) = json.loads(dh("log", "list", "--json", env=env).stdout)
    text = dh("log", "show", session["id"], "--no-pager", env=env).stdout
    snaps = json.loads(dh("log", "show", session["id"], "--json", env=env).stdout)["workspace"]
    marks = re.findall(r"⧉ workspace snapshot \d+: (turn \d+|before the first turn)", text)
    assert len(marks) == len(snaps) > 0 and set(marks) == {"turn 1"}, text


@pytest.mark.parametrize("captured", CAPTURED, ids=[p.stem for p in CAPTURED])
def test_the_list_page_counts_the_resumed_turn_once(captured, tmp_path):
    """`dh serve`'s list counts turns as `dh log list` and the `turns` view do."""
    from dh_cli.serve.reads import Filters, list_page

    shutil.copy(captured, tmp_path / "dh.db")
    world = LocalWorld(tmp_path / "dh.db")
    (row,) = list_page(world, Filters())["rows"]
    viewed = world.conn.execute("SELECT COUNT(*) FROM turns WHERE source_id = (SELECT MIN(id) FROM sources)")
    assert row["turns"] == viewed.fetchone()[0] == 1
