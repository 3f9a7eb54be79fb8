"""Claude Code's TUI killed before its transcript held the prompt (issue 13): the rows and the
history line are in the shapes the real 2.1.197 / 2.1.332 TUIs wrote in those runs (see
ClaudeWrapper.restart_unstarted; the real TUIs are driven by
tests/e2e/test_tui.py::test_tui_claude_killed_before_its_transcript_holds_the_prompt)."""

from __future__ import annotations

import json
from pathlib import Path

from dh_cli.models import Record
from dh_cli.wrappers import get
from dh_cli.wrappers.claude_prompts import LOST, RESENT, unsent_prompt

SID = "45c4e2df-24ec-49bf-93be-e7440ee3445c"
STARTUP = [{"type": "mode", "mode": "normal", "sessionId": SID},
           {"type": "permission-mode", "permissionMode": "bypassPermissions", "sessionId": SID},
           {"type": "atis-latch", "atis": "", "sessionId": SID}]
ARGS = ["--dangerously-skip-permissions", "--session-id", SID]


def lines(rows: list[dict]) -> bytes:
    return b"".join(json.dumps(r, separators=(",", ":")).encode() + b"\n" for r in rows)


def records(rows: list[dict]) -> list[Record]:
    return [Record(1, 0, i, lines([r])) for i, r in enumerate(rows)]


def setup(tmp_path: Path, rows: list[dict] | None, history: list[dict]) -> tuple[Path, Path]:
    cwd = tmp_path / "proj"
    cwd.mkdir()
    home = tmp_path / ".claude"
    transcript = get("claude-code").transcript_path(home, str(cwd), SID)
    transcript.parent.mkdir(parents=True)
    if rows is not None:
        transcript.write_bytes(lines(rows))
    (home / "history.jsonl").write_bytes(lines(history))
    return cwd, transcript


def typed(cwd: Path, text: str, at: int = 1796126621979, sid: str = SID, pasted=None) -> dict:
    return {"display": text, "pastedContents": pasted or {}, "timestamp": at,
            "project": str(cwd), "sessionId": sid}


def test_startup_rows_only_the_typed_prompt_is_sent_again_under_the_same_id(tmp_path):
    cwd = tmp_path / "proj"
    history = [typed(cwd, "older, another session", sid="0" * 8), typed(cwd, "Create the files.")]
    cwd, transcript = setup(tmp_path, STARTUP, history)
    plan = get("claude-code").interactive_resume(ARGS, SID, str(transcript), "Continue.",
                                                 records(STARTUP))
    assert plan.argv == [*ARGS, "Create the files."]  # not --resume: it has no conversation
    assert plan.continues == "prompt" and plan.note == RESENT
    assert plan.env == {"CLAUDE_CODE_RESUME_INTERRUPTED_TURN": None}
    assert not transcript.exists()  # or --session-id refuses the id as in use


def test_no_transcript_and_no_history_line_says_the_prompt_is_lost(tmp_path):
    cwd, transcript = setup(tmp_path, None, [])
    plan = get("claude-code").restart_unstarted(ARGS, SID, str(transcript))
    assert plan.argv == ARGS and plan.continues == "none" and plan.note == LOST


def test_a_transcript_with_a_conversation_is_never_removed(tmp_path):
    row = {"type": "user", "uuid": "u1", "message": {"role": "user", "content": "hi"}, "sessionId": SID}
    cwd, transcript = setup(tmp_path, [*STARTUP, row], [typed(tmp_path / "proj", "hi")])
    assert get("claude-code").restart_unstarted(ARGS, SID, str(transcript)) is None
    assert transcript.exists()


def test_a_prompt_typed_after_a_complete_turn_rides_in_argv(tmp_path):
    turn = [{"type": "user", "uuid": "u1", "timestamp": "2026-12-01T12:00:00.000Z",
             "message": {"role": "user", "content": "first"}, "sessionId": SID},
            {"type": "assistant", "uuid": "a1", "parentUuid": "u1", "timestamp": "2026-12-01T12:00:01.000Z",
             "message": {"role": "assistant", "stop_reason": "end_turn", "content": [{"type": "text", "text": "ok"}]},
             "sessionId": SID}]
    first_ms = 1796126400000  # 12:00:00.000, before the reply: the first prompt's own line
    cwd = tmp_path / "proj"
    cwd_, transcript = setup(tmp_path, turn, [typed(cwd, "first", first_ms),
                                              typed(cwd, "second", first_ms + 5000)])
    plan = get("claude-code").interactive_resume(ARGS, SID, str(transcript), None, records(turn))
    assert plan.argv == ["--dangerously-skip-permissions", f"--resume={SID}", "second"]
    assert plan.note == RESENT and transcript.exists()


def test_history_lines_of_other_projects_pasted_text_and_flags(tmp_path):
    cwd = tmp_path / "proj"
    _, transcript = setup(tmp_path, None, [typed(tmp_path / "elsewhere", "not here")])
    assert unsent_prompt(SID, str(transcript), 0) is None
    (transcript.parents[2] / "history.jsonl").write_bytes(
        lines([typed(cwd, "[Pasted text #1 +3 lines]", pasted={"1": {"id": 1, "type": "text"}})]))
    assert unsent_prompt(SID, str(transcript), 0) is None  # its text is not in the line
    (transcript.parents[2] / "history.jsonl").write_bytes(lines([typed(cwd, "--help me")]))
    plan = get("claude-code").restart_unstarted(ARGS, SID, str(transcript))
    assert plan.argv == [*ARGS, "--", "--help me"]  # a prompt is never read as a flag


def test_commands_in_the_history_are_never_sent_again(tmp_path):
    cwd = tmp_path / "proj"
    _, transcript = setup(tmp_path, None, [typed(cwd, "!echo once >> effect.log"),
                                           typed(cwd, "/model"), typed(cwd, "# remember")])
    assert unsent_prompt(SID, str(transcript), 0) is None
    plan = get("claude-code").restart_unstarted(ARGS, SID, str(transcript))
    assert plan.argv == ARGS and plan.note == LOST


def test_a_local_command_s_rows_are_not_a_prompt(tmp_path, run_dh):
    """`/exit` typed in Claude Code 2.1.332's TUI leaves a caveat, the command and its output
    as user rows (none of them sent to the model): no new turn, and the turn
    its answer finished stays finished."""
    import json

    from tests.conftest import fixture_home

    home = fixture_home("claude-code", "basic", tmp_path)
    (transcript,) = home.glob("projects/*/*.jsonl")
    leaf = json.loads(transcript.read_text().splitlines()[-1])["leafUuid"]
    base = {"isSidechain": False, "type": "user", "userType": "external", "cwd": "/tmp",
            "sessionId": transcript.stem, "version": "2.1.332", "timestamp": "2026-12-04T20:04:15.767Z"}
    rows = [dict(base, parentUuid=leaf, uuid="local-1", isMeta=True, rowSource="harness",
                 message={"role": "user", "content": "<local-command-caveat>The command below "
                          "was run directly in Claude Code, not sent to you.</local-command-caveat>"}),
            dict(base, parentUuid="local-1", uuid="local-2", rowSource="local",
                 message={"role": "user", "content": "<command-name>/exit</command-name>\n"
                          "<command-message>exit</command-message>\n<command-args></command-args>"}),
            dict(base, parentUuid="local-2", uuid="local-3", rowSource="local",
                 message={"role": "user", "content": "<local-command-stdout>Catch you later!"
                          "</local-command-stdout>"})]
    with transcript.open("a") as out:
        out.writelines(json.dumps(row) + "\n" for row in rows)
    assert run_dh("import", "claude", "--all", "--home", str(home)).exit_code == 0
    (listed,) = json.loads(run_dh("log", "list", "--json").stdout)
    shown = json.loads(run_dh("log", "show", listed["id"], "--json").stdout)
    assert {item["turn"] for item in shown["items"]} == {1}
    assert shown["turn_complete"] is True
    assert "/exit" not in json.dumps(shown["items"])
