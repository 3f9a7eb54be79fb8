"""`dh restore --unhide` (resume/unhide.py, wrappers/claude_picker.py) over the fake harnesses
and the real transcripts captured from Claude Code: what it changes, that it asks to be
named, keeps the original, leaves the log's copy and every other session alone, and does
nothing the second time. The real picker's proof is tests/e2e/test_restore_listed_real.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dh_cli.wrappers.claude_picker import hidden_by, picker_entrypoint, unhidden

from .helpers.restore_runs import rig, run_session, stamp  # noqa: F401 (rig: a fixture)

REAL = sorted(Path(__file__).parent.glob("fixtures/real/claude-code/*/claude-config/projects/*/*.jsonl"))


def dh_json(rig, *args: str) -> tuple[int, object]:
    done = rig.dh(*args, "--json")
    return done.returncode, json.loads(done.stdout or b"null")


def logged_generations(rig, session_id: str) -> list[bytes]:
    world = rig.world()
    try:
        source = world.sources(session_id)[0]
        top = world.latest_generation(source.id)
        return [b"".join(world.raw_lines(source.id, g)) for g in range(top + 1)]
    finally:
        world.close()


@pytest.mark.parametrize("path", REAL, ids=lambda p: p.parent.parent.parent.parent.name)
def test_the_picker_s_entrypoint_of_a_real_p_transcript_changes_in_its_own_record_alone(path):
    data = path.read_bytes()
    assert hidden_by(data) == "sdk-cli"
    change = unhidden(data)
    assert (change.field, change.old, change.new) == ("entrypoint", "sdk-cli", "cli")
    lines, changed = data.splitlines(), change.data.splitlines()
    assert [i for i, (a, b) in enumerate(zip(lines, changed)) if a != b] == [change.line - 1]
    assert json.loads(changed[change.line - 1]) == {**json.loads(lines[change.line - 1]), "entrypoint": "cli"}
    assert hidden_by(change.data) is None and unhidden(change.data) is None
    assert b'"entrypoint":"sdk-cli"' in change.data  # later records keep theirs: one change


def test_the_picker_reads_the_first_entrypoint_of_the_head_else_the_last_of_the_tail():
    head = b'{"a":1}\n{"entrypoint":"cli"}\n{"entrypoint":"sdk-cli"}\n'
    assert picker_entrypoint(head)[0] == "cli" and unhidden(head) is None
    tail = b'{"pad":"' + b"x" * 70000 + b'"}\n{"entrypoint":"sdk-py"}\n{"entrypoint": "sdk-ts"}\n'
    assert hidden_by(tail) == "sdk-ts"
    assert unhidden(tail).data.endswith(b'{"entrypoint": "cli"}\n')


def test_an_entrypoint_that_is_not_a_record_s_own_field_is_refused():
    nested = b'{"type":"user","meta":{"entrypoint":"sdk-cli"},"entrypoint":"sdk-cli"}\n'
    with pytest.raises(ValueError):
        unhidden(nested)


def test_unhide_changes_one_field_keeps_the_original_and_the_log_s_copy_then_does_nothing(rig):
    hidden, main = run_session(rig, "claude-code")
    other, other_main = run_session(rig, "pi")
    original, other_before = main.read_bytes(), stamp(other_main)
    rows = {r["id"]: r for r in dh_json(rig, "log", "list")[1]}
    assert rows[hidden["id"]]["hidden"] and not rows[other["id"]]["hidden"]

    code, (plain,) = dh_json(rig, "restore", hidden["id"])  # no opt-in: nothing changes
    assert code == 0 and plain["status"] == "present" and main.read_bytes() == original
    assert plain["hidden"]["from"] == "sdk-cli"
    code, (dry,) = dh_json(rig, "restore", "--unhide", "--dry-run", hidden["id"])
    assert code == 0 and dry["status"] == "would unhide" and main.read_bytes() == original

    code, (done,) = dh_json(rig, "restore", "--unhide", hidden["id"])
    assert code == 0 and done["status"] == "unhidden", done
    change = done["change"]
    assert (change["path"], change["field"], change["from"], change["to"]) == (
        str(main), "entrypoint", "sdk-cli", "cli")
    assert Path(change["kept"]).read_bytes() == original and not change["kept"].endswith(".jsonl")
    assert main.read_bytes() == unhidden(original).data
    assert logged_generations(rig, hidden["id"]) == [original, main.read_bytes()]
    rows = {r["id"]: r for r in dh_json(rig, "log", "list")[1]}
    assert rows[hidden["id"]]["hidden"] is None and rows[hidden["id"]]["lost"] is None
    assert dh_json(rig, "restore", "--lost", "--dry-run")[1] == []

    after = stamp(main)
    code, again = dh_json(rig, "restore", "--unhide", hidden["id"], other["id"])
    assert code == 0 and [r["status"] for r in again] == ["not hidden", "not hidden"]
    assert stamp(main) == after and stamp(other_main) == other_before
    assert len(list(main.parent.glob("*.dh-kept"))) == 1


def test_unhide_asks_for_named_sessions_and_refuses_a_lost_one(rig):
    hidden, main = run_session(rig, "claude-code")
    assert rig.dh("restore", "--unhide").returncode == 2
    assert rig.dh("restore", "--unhide", "--lost").returncode == 2
    main.unlink()
    code, (done,) = dh_json(rig, "restore", "--unhide", hidden["id"])
    assert code == 1 and done["status"] == "lost" and "dh restore" in done["error"]
    assert not main.exists()


def test_the_log_list_names_the_unhide_command_where_dh_can_lift_the_filter(rig):
    claude, _ = run_session(rig, "claude-code")
    codex, _ = run_session(rig, "codex")
    rows = {r["id"]: r for r in dh_json(rig, "log", "list")[1]}
    assert rows[claude["id"]]["unhide"] == f"dh restore --unhide {rows[claude['id']]['prefix']}"
    assert rows[codex["id"]]["hidden"] and rows[codex["id"]]["unhide"] is None
    text = rig.dh("log", "list").stdout.decode()
    assert rows[claude["id"]]["unhide"] in text


def test_a_picker_filter_dh_cannot_lift_is_refused_not_reported_listed(rig):
    codex, main = run_session(rig, "codex")
    before = stamp(main)
    code, (done,) = dh_json(rig, "restore", "--unhide", codex["id"])
    assert code == 1 and done["status"] == "failed" and "codex exec" in done["error"]
    assert stamp(main) == before


def test_an_unhidden_session_resumed_under_dh_keeps_the_change(rig):
    hidden, main = run_session(rig, "claude-code")
    assert dh_json(rig, "restore", "--unhide", hidden["id"])[0] == 0
    changed = main.read_bytes()
    resumed = rig.dh("resume", hidden["id"], timeout=120)
    assert resumed.returncode == 0, resumed.stderr.decode(errors="replace")[-2000:]
    assert main.read_bytes().startswith(changed) and hidden_by(main.read_bytes()) is None
    assert dh_json(rig, "restore", "--lost", "--dry-run")[1] == []
