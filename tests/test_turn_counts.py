"""One count of a session's turns (logviews/sessionlist.py turn_counts) for `dh log list`
(text and --json), `dh serve`'s list and `dh log show`: the turns of the main conversation,
as the log's `turns` view numbers them (a subagent's turns are not the session's; a turn cut
and resumed is one: tests/test_resumed_turns.py on the captured logs of each release)."""

from __future__ import annotations

import json

import pytest

from dh_cli.logviews.sessionlist import continuations, turn_counts
from dh_cli.worlds.local import LocalWorld

from .conftest import fixture_home
from .helpers.secrets_text import dh

CASES = [("claude-code", "multiturn"), ("claude-code", "subagent-tasks"), ("codex", "multiturn"),
         ("opencode", "multiturn"), ("pi", "multiturn")]


@pytest.mark.parametrize("harness, scenario", CASES, ids=["-".join(c) for c in CASES])
def test_every_view_counts_the_main_conversation_s_turns(harness, scenario, tmp_path):
    home = fixture_home(harness, scenario, tmp_path)
    assert dh("import", harness, "--all", "--home", str(home)).returncode == 0
    world = LocalWorld()
    (session,) = world.sessions()
    viewed = world.conn.execute("SELECT COUNT(*) FROM turns WHERE source_id ="
                                " (SELECT MIN(id) FROM sources)").fetchone()[0]
    assert turn_counts(world, [session.id]) == {session.id: viewed} and viewed >= 1
    (listed,) = json.loads(dh("log", "list", "--json").stdout)
    shown = json.loads(dh("log", "show", session.id, "--json").stdout)
    main = shown["sources"][0]["relpath"]
    opened = {i["turn"] for i in shown["items"] if i["source"] == main and i["type"] == "prompt"
              and not i.get("resumed") and not i.get("synthetic")}
    assert listed["turns"] == viewed == len(opened), (listed["turns"], viewed, opened)


def test_a_resume_of_a_cut_turn_continues_the_turn_open_at_the_cut():
    starts = ["2026-12-01T10:00:00Z", "2026-12-01T10:05:00Z", "2026-12-01T10:09:00Z"]
    assert continuations(starts, []) == set()
    assert continuations(starts, ["2026-12-01T10:06:00Z"]) == {2}
    assert continuations(starts, ["2026-12-01T10:06:00Z", "2026-12-01T10:07:00Z"]) == {2}  # resumed twice
    assert continuations(starts, ["2026-12-01T09:00:00Z"]) == set()  # no turn was open yet
    assert continuations(starts, ["2026-12-01T11:00:00Z"]) == set()  # the resume wrote no prompt
