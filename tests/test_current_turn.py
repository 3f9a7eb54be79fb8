"""The current turn by the parent chain (issue 13): the real Claude Code 2.1.197 TUI was seen
writing a turn's Bash `tool_use` row BEFORE the turn's prompt row (e2e
test_tui_kill_during_shell_tool_goes_on[pinned-claude-code]). A turn cut by file order from
the prompt on missed the call, saw nothing dangling, and the model was asked for reply #0 a
second time. What was seen there: the model's text row and its tool_use row first, then a
file-history-snapshot, the prompt row and its two attachments (the prompt stamped 75 ms
before the tool_use). Each case here takes a real transcript, cuts it where a kill during
the tool leaves it (the tool_use row is the last one written, no result), and moves the
model's rows of the turn to just before the turn's prompt row, in the same way."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dh_cli import wrappers
from dh_cli.mirror.importer import import_sessions
from dh_cli.resume.prepare import current_turn, prepare_resume
from dh_cli.worlds.local import LocalWorld

from .conftest import fixture_home


def _transcript(home: Path) -> Path:
    (path,) = [p for p in home.rglob("*.jsonl") if "subagents" not in p.parts]
    return path


def _tool_row_moved_before_prompt(path: Path, cut: int, first_moved: int, prompt_row: int) -> dict:
    """Keep lines [0, cut); move lines [first_moved, cut) (the model's rows, the tool_use row
    last) to just before line prompt_row. The tool_use row."""
    lines = path.read_bytes().splitlines(keepends=True)[:cut]
    moved = lines[first_moved:]
    lines = lines[:prompt_row] + moved + lines[prompt_row:first_moved]
    path.write_bytes(b"".join(lines))
    return json.loads(moved[-1])


def _imported(tmp_path, harness: str, scenario: str, cut: int, first_moved: int, prompt_row: int):
    home = fixture_home(harness, scenario, tmp_path)
    call_row_obj = _tool_row_moved_before_prompt(_transcript(home), cut, first_moved, prompt_row)
    world = LocalWorld()
    wrapper = wrappers.get(harness)
    report = import_sessions(world, wrapper, home, all_=True)
    session = world.get_session(report.sessions[0]["id"])
    return world, wrapper, session, home, call_row_obj


def _file_slice(world, session, source) -> list:
    """What the current turn was before the fix: from the last prompt row on, by file order."""
    generation = world.latest_generation(source.id) or 0
    start = world.last_offset_of_kind(source.id, generation, "user")
    return list(world.records(session.id, source.id, generation, from_offset=start))


CASES = {
    # harness, scenario, lines kept, the first of the model's rows moved, the turn's prompt
    # row (0-based); the tool_use row is the last line kept
    "claude-code third turn": ("claude-code", "multiturn", 22, 21, 20),
    "claude-code first turn": ("claude-code", "killed", 7, 5, 2),  # text + tool_use rows
    "pi third turn": ("pi", "multiturn", 13, 12, 11),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_tool_call_written_before_its_prompt_is_in_the_current_turn(tmp_path, dh_home, case):
    world, wrapper, session, _home, moved = _imported(tmp_path, *CASES[case])
    source = world.sources(session.id)[0]
    call_id = next(c.id for c in wrapper.parse(json.dumps(moved).encode()).tool_calls)
    # the fixture reproduces what was seen: by file order nothing dangles
    assert wrapper.turn_state(_file_slice(world, session, source)).dangling == []
    turn = current_turn(world, session, source)
    assert [c.id for c in wrapper.turn_state(turn).dangling] == [call_id]
    assert turn[0].kind == "user" and turn[-1].native_id == wrapper.parse(turn[-1].raw).native_id
    assert json.loads(turn[-1].raw) == moved  # parent first: the call is the leaf, last
    earlier = [json.loads(r.raw) for r in turn if r.offset < turn[0].offset]
    assert earlier[-1] == moved and all(row.get("type") in ("assistant", "message")
                                        for row in earlier)  # nothing of the turns before


@pytest.mark.parametrize("case", list(CASES))
def test_the_call_written_before_its_prompt_is_repaired_once(tmp_path, dh_home, case):
    world, wrapper, session, home, moved = _imported(tmp_path, *CASES[case])
    prepared = prepare_resume(world, wrapper, session)
    call_id = next(c.id for c in wrapper.parse(json.dumps(moved).encode()).tool_calls)
    assert [r["call_id"] for r in prepared.repairs] == [call_id]
    last = json.loads(_transcript(home).read_bytes().splitlines()[-1])
    parent = last.get("parentUuid") or last.get("parentId")
    assert parent == (moved.get("uuid") or moved.get("id"))  # chained after the call's row
    again = prepare_resume(world, wrapper, session)
    assert again.repairs == [] and wrapper.turn_state(
        current_turn(world, session, world.sources(session.id)[0])).dangling == []


@pytest.mark.parametrize("harness,scenario,cut", [("claude-code", "multiturn", 22), ("pi", "multiturn", 13),
                                                  ("codex", "multiturn", None)])
def test_in_file_order_the_current_turn_is_the_file_slice(tmp_path, dh_home, harness, scenario, cut):
    """Rows in chain order (and Codex, whose records carry no parent chain): as before."""
    home = fixture_home(harness, scenario, tmp_path)
    path = _transcript(home)
    if cut:
        path.write_bytes(b"".join(path.read_bytes().splitlines(keepends=True)[:cut]))
    world, wrapper = LocalWorld(), wrappers.get(harness)
    session = world.get_session(import_sessions(world, wrapper, home, all_=True).sessions[0]["id"])
    source = world.sources(session.id)[0]
    assert [r.offset for r in current_turn(world, session, source)] == \
        [r.offset for r in _file_slice(world, session, source)]


def _records(lines: list[bytes]) -> list:
    from dh_cli.models import Record

    return [Record(1, 0, i, raw) for i, raw in enumerate(lines)]  # the wrapper parses raw


def test_the_turn_state_names_the_prompt_that_opened_the_last_turn():
    """What the supervisor compares to tell a turn served by this attempt from the last one
    (runner._lingering): OpenCode's last user message row, Pi's last user message line."""
    fixtures = Path(__file__).parent / "fixtures" / "real"
    rows = (fixtures / "opencode/basic/db/rows.jsonl").read_bytes().splitlines(keepends=True)
    users = [json.loads(r)["id"] for r in rows if json.loads(r)["table"] == "message"
             and json.loads(json.loads(r)["data"])["role"] == "user"]
    state = wrappers.get("opencode").turn_state(_records(rows))
    assert state.complete and state.opener == f"message/{users[-1]}"
    (transcript,) = (fixtures / "pi/multiturn/pi-agent").rglob("*.jsonl")
    lines = transcript.read_bytes().splitlines(keepends=True)
    prompts = [json.loads(x)["id"] for x in lines if (json.loads(x).get("message") or {}).get("role") == "user"]
    assert len(prompts) == 3
    state = wrappers.get("pi").turn_state(_records(lines))
    assert state.opener == prompts[-1]
    first = next(i for i, x in enumerate(lines) if json.loads(x).get("id") == prompts[0])
    assert wrappers.get("pi").turn_state(_records(lines[:first + 2])).opener == prompts[0]
