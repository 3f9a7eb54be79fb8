"""The wrapper decisions behind an interactive relaunch (how each TUI carries a cut turn on,
which processes are the harness's own), the terminal put back between attempts, and which
ends of an attempt are never followed by a relaunch. The real TUIs: tests/e2e/test_tui.py."""

from __future__ import annotations

import json
import os
import pty
import signal

from dh_cli.models import Record
from dh_cli.supervisor.runner import Attempt, Supervisor, classify, why_ended
from dh_cli.supervisor.terminal import CLEAR, RESET, PtyChild, restore_screen
from dh_cli.supervisor import tools
from dh_cli.supervisor.tools import ToolTracker
from dh_cli.wrappers import get

PROMPT = "Continue from where you left off."
SID = "abf42ce6-c18b-4670-bcf6-b3f5170ccd41"


def records(*rows: dict) -> list[Record]:
    return [Record(1, 0, i, (json.dumps(row) + "\n").encode()) for i, row in enumerate(rows)]


CLAUDE_PROMPT = {"type": "user", "uuid": "u1", "message": {"role": "user", "content": "Create the files."}}
CLAUDE_CALL = {"type": "assistant", "uuid": "a1", "message": {
    "id": "msg_1", "role": "assistant", "model": "m", "stop_reason": "tool_use",
    "content": [{"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {}}]}}
CLAUDE_RESULT = {"type": "user", "uuid": "r1", "message": {"role": "user", "content": [
    {"type": "tool_result", "tool_use_id": "toolu_1", "content": "ok"}]}}
CLAUDE_CUT_TEXT = {"type": "assistant", "uuid": "a2", "message": {
    "id": "msg_2", "role": "assistant", "model": "m", "stop_reason": None,
    "content": [{"type": "text", "text": "Now I will"}]}}


def claude_resume(rows, prompt=PROMPT, notes=False):
    return get("claude-code").interactive_resume(["--dangerously-skip-permissions", "--session-id", SID],
                                                 SID, None, prompt, records(*rows), notes=notes)


def test_claude_continues_a_turn_cut_after_a_user_row_itself():
    plan = claude_resume([CLAUDE_PROMPT, CLAUDE_CALL, CLAUDE_RESULT])
    assert plan.continues == "harness"
    assert plan.env == {"CLAUDE_CODE_RESUME_INTERRUPTED_TURN": "1", "CLAUDE_CODE_RESUME_PROMPT": PROMPT}
    assert plan.argv == ["--dangerously-skip-permissions", f"--resume={SID}"]  # no second prompt


def test_claude_cut_in_its_prompt_row_is_resent_by_claude():
    assert claude_resume([CLAUDE_PROMPT]).continues == "harness"


def test_claude_cut_in_its_prompt_row_gets_dh_notes_in_argv():
    """Claude resends a cut prompt row and never the continue text: dh's word on a change no
    record holds rides in argv, with Claude's own continuation off (one, never two)."""
    plan = claude_resume([CLAUDE_PROMPT], notes=True)
    assert plan.continues == "prompt" and plan.argv[-1] == PROMPT
    assert plan.env == {"CLAUDE_CODE_RESUME_INTERRUPTED_TURN": None}


def test_claude_cut_after_a_tool_result_takes_dh_notes_as_its_continue_text():
    plan = claude_resume([CLAUDE_PROMPT, CLAUDE_CALL, CLAUDE_RESULT], notes=True)
    assert plan.continues == "harness" and plan.env["CLAUDE_CODE_RESUME_PROMPT"] == PROMPT


def test_claude_cut_after_an_assistant_row_gets_dh_prompt_and_no_auto_resume():
    plan = claude_resume([CLAUDE_PROMPT, CLAUDE_CUT_TEXT])
    assert plan.continues == "prompt" and plan.argv[-1] == PROMPT
    assert plan.env == {"CLAUDE_CODE_RESUME_INTERRUPTED_TURN": None}  # unset: never twice


def test_claude_complete_turn_is_resumed_idle_with_auto_resume_off():
    plan = claude_resume([CLAUDE_PROMPT, CLAUDE_CALL, CLAUDE_RESULT], prompt=None)
    assert plan.continues == "none" and plan.argv[-1] == f"--resume={SID}"
    assert plan.env == {"CLAUDE_CODE_RESUME_INTERRUPTED_TURN": None}


def test_pi_and_codex_take_the_continuation_as_a_positional_prompt():
    pi = get("pi").interactive_resume(["--provider", "mock", "--session", "/s.jsonl"], "x",
                                      "/s.jsonl", PROMPT, [])
    assert pi.argv == ["--provider", "mock", "--session", "/s.jsonl", PROMPT] and pi.continues == "prompt"
    codex = get("codex").interactive_resume([], "th-1", None, PROMPT, [])
    assert codex.argv == ["resume", "th-1", PROMPT] and codex.env == {}


def test_opencode_gets_the_continuation_typed_once_its_footer_is_drawn():
    plan = get("opencode").interactive_resume([], "ses_1", None, PROMPT, [])
    assert plan.argv == ["--session=ses_1"] and "--prompt" not in plan.argv
    assert (plan.continues, plan.typed, plan.ready) == ("typed", PROMPT, b"ctrl+p")
    idle = get("opencode").interactive_resume([], "ses_1", None, None, [])
    assert idle.typed is None and idle.continues == "none"


def test_codex_app_server_daemon_is_part_of_the_harness(tmp_path):
    codex = get("codex")
    daemon = tmp_path / "packages/app-server-daemon/releases/0.171.0-x86_64/bin/codex"
    assert codex.harness_part(f"{daemon} app-server --listen unix:// --managed-daemon", tmp_path)
    assert codex.harness_part(f"{daemon} app-server daemon pid-update-loop", tmp_path)
    assert not codex.harness_part("/bin/bash -c sleep 3; echo app-server", tmp_path)
    other_home = tmp_path / "elsewhere"
    assert not codex.harness_part(f"{daemon} app-server --listen unix://", other_home)
    assert not get("claude-code").harness_part(f"{daemon} app-server", tmp_path)


def test_a_harness_part_is_never_a_tool_outcome(monkeypatch):
    # this process has no re-parented children of its own here (in a full run the test
    # PostgreSQL's watchdog is one, and would be taken for a tool that outlived the harness)
    monkeypatch.setattr(tools, "child_processes", lambda pid: [])
    tracker = ToolTracker(os.getpid(), is_part=lambda command: "app-server" in command)
    pid = os.getpid()
    tracker.parts[pid] = (0.0, "codex app-server")
    assert tracker.survivors() == [] and tracker.settle(0.0) == []
    assert tracker.ended_parts == []  # not running with that create time: nothing to end


def test_user_stops_in_a_terminal_are_never_relaunched():
    for sig in (signal.SIGINT, signal.SIGQUIT, signal.SIGHUP):
        attempt = Attempt(1, rc=-sig)
        assert classify(attempt, False, interactive=True) == "stopped"
        assert signal.Signals(sig).name in why_ended(attempt, "stopped")
    assert classify(Attempt(1, rc=-signal.SIGKILL), False, interactive=True) == "crashed"
    assert classify(Attempt(1, rc=-signal.SIGINT), False, interactive=False) == "crashed"
    stopped = Attempt(1, rc=-signal.SIGTERM, user_signal=signal.SIGTERM)
    assert classify(stopped, False, True) == "stopped" and "SIGTERM" in why_ended(stopped, "stopped")
    assert "code 0" in why_ended(Attempt(1, rc=0), "finished")


def test_attempt_env_sets_and_unsets():
    supervisor = Supervisor.__new__(Supervisor)
    supervisor.spec = type("S", (), {"env": {"A": "1", "CLAUDE_CODE_RESUME_INTERRUPTED_TURN": "1"}})()
    supervisor.attempt_env = {"CLAUDE_CODE_RESUME_INTERRUPTED_TURN": None, "B": "2"}
    assert supervisor._attempt_env() == {"A": "1", "B": "2"}


def read_all(fd: int) -> bytes:
    out = b""
    while True:
        try:
            chunk = os.read(fd, 65536)
        except (BlockingIOError, OSError):
            return out
        if not chunk:
            return out
        out += chunk


def test_restore_screen_puts_every_mode_back_and_clears_between_attempts():
    master, slave = pty.openpty()
    os.set_blocking(master, False)
    try:
        restore_screen(slave, clear=True, kitty_pushed=2)
        written = read_all(master)
    finally:
        os.close(master)
        os.close(slave)
    for mode in (b"\x1b[?1049l", b"\x1b[?25h", b"\x1b[?2004l", b"\x1b[?1000l", b"\x1b[?1006l",
                 b"\x1b>", b"\x1b[?2026l"):
        assert mode in written
    assert written.count(b"\x1b[<u") == 2 and written.endswith(CLEAR) and RESET in written


def test_restore_screen_writes_nothing_to_a_file(tmp_path):
    with open(tmp_path / "out", "wb") as handle:
        restore_screen(handle.fileno(), clear=True)
    assert (tmp_path / "out").read_bytes() == b""


def test_kitty_modes_pushed_and_not_popped_are_counted():
    child = PtyChild.__new__(PtyChild)
    child.kitty_pushed = 0
    child._count_kitty(b"\x1b[>1u text \x1b[>3u")
    child._count_kitty(b"\x1b[<u")
    assert child.kitty_pushed == 1
    child._count_kitty(b"\x1b[<u\x1b[<u")
    assert child.kitty_pushed == 0  # never below zero: dh pops only what the TUI pushed


def test_ready_mark_split_across_reads_is_seen():
    child = PtyChild.__new__(PtyChild)
    child.ready_mark, child.ready_at, child.tail = b"ctrl+p", None, b""
    child._see_ready(b"... ctrl")
    assert child.ready_at is None
    child._see_ready(b"+p commands")
    assert child.ready_at is not None


def test_pi_killed_before_its_first_answer_says_the_typed_prompt_is_lost():
    """Pi writes no file before its first answer and keeps typed prompts in memory only: the
    original command comes back, with a line telling the user to type the prompt again."""
    args = ["--provider", "mock", "--session", "/s.jsonl"]
    plan = get("pi").restart_unstarted(args, None, "/s.jsonl")
    assert plan.argv == args and plan.continues == "none"
    assert plan.note and "type it again" in plan.note and "pi's files" in plan.note


def test_pi_killed_before_its_first_answer_with_the_prompt_in_argv_runs_it_again():
    assert get("pi").restart_unstarted(["--provider", "mock", "Create the files."], None, None) is None
