"""dh over the REAL harness TUIs in a pseudo-terminal, the screen rendered by pyte: the prompt
is typed once, the harness's process group is SIGKILLed (a) while a model reply is stalled and
(b) while a shell tool runs, and with no further keystroke

* dh relaunches the harness in the same terminal and the cut turn completes;
* every finished reply was requested from the fake model exactly once (nothing paid twice);
* each tool step's effect happened once;
* the screen right after dh's notice holds no row of the old frame (dh cleared it), and the
  notice is on screen.

Then the harness's own quit ends dh with no relaunch, and the session says `finished`."""

from __future__ import annotations

import fcntl
import json
import os
import signal
import struct
import termios
import time

import psutil
import pytest

from tests.fakes.model_server import tool_results
from tests.rig import SCRIPT
from tests.soak.checks import last_user_text

from tests.helpers.real_runs import (MAY_HAVE_RUN, R, SLOW_COMMAND, check_no_rebilling, events,
                                     launched_pid, logged, read, session_of)

pytest.importorskip("pexpect")
pytest.importorskip("pyte")
from .tui import NOTICE, TUI, Tui, seed_claude_tui, trust_codex_project  # noqa: E402

pytestmark = pytest.mark.e2e

STALL_SCRIPT = {"replies": [R[0], dict(R[1], delay_s=60, delay_times=1), *R[2:]]}
TOOL_SCRIPT = {"replies": [{"text": "Running a slow command.", "shell": SLOW_COMMAND}, *R[1:]]}
PROMPT = "Create the files."



# the record kind that shows reply #0's tool step is on disk (OpenCode's rows are whole
# messages and parts: its tool part is logged as one `tool_call` row, result included)
STEP_ON_DISK = {"opencode": "tool_call"}
def real_tui_rig(real_rig, installed, harness: str, script, sub: str = ""):
    """A rig over the release set `installed` stands for (pinned, newest: see conftest)."""
    rig = real_rig(script, sub)
    if harness == "claude-code":
        seed_claude_tui(rig, installed.versions()[harness])
    if harness == "codex":
        trust_codex_project(rig)
    return rig


def served(rig, index: int, event: str = "request"):
    return lambda: any(e.get("reply_index") == index and e["event"] == event for e in rig.server.log)


def command_running(rig) -> bool:
    """The slow shell tool is running (found by its command line among all processes)."""
    for proc in psutil.process_iter(["cmdline", "cwd"]):
        try:
            if "effect.log" in " ".join(proc.info["cmdline"] or []) and \
                    proc.info["cwd"] == os.path.realpath(rig.proj):
                return True
        except psutil.Error:
            continue
    return False


def start(rig, harness: str) -> Tui:
    return Tui(rig, harness, TUI[harness][0])


def kill_and_continue(tui: Tui, rig, harness: str, when: str) -> None:
    """Type the prompt, wait for `when`, SIGKILL the harness's group, and wait (no key typed)
    for the final reply to be delivered and shown."""
    ready = TUI[harness][1]
    tui.until(lambda: tui.on_screen(ready), what="the editor")
    # Pi 1.6.0 aborted a turn typed while its start-up still ran ("Command aborted" 14 ms
    # into the first tool): type once the screen is still, as a person would
    tui.quiet()
    tui.submit(PROMPT, served(rig, 0))
    if when == "stall":
        tui.until(served(rig, 1), what="reply #1 requested")
        # kill once the tool result is logged: a TUI may write it after the next request
        step = STEP_ON_DISK.get(harness, "tool_result")
        tui.until(lambda: logged(rig, step) >= 1, what=f"reply #0's step logged ({step})")
    else:
        # Claude Code's TUI writes its transcript a moment late: killed before the prompt and
        # the call reached the file, it leaves nothing to resume (and dh cannot know the
        # typed prompt). So the kill comes once the call is logged, the command still running.
        tui.until(lambda: logged(rig, "tool_call") >= 1 and command_running(rig),
                  what="the tool call logged and its command running")
    old_frame = [row for row in tui.rows() if row.strip()]
    os.killpg(launched_pid(rig), signal.SIGKILL)
    tui.until(lambda: tui.at_notice is not None, what="dh's notice")
    notice_screen = tui.at_notice
    assert any(NOTICE in row for row in notice_screen), notice_screen
    leftover = [row for row in old_frame if row in notice_screen and NOTICE not in row]
    assert not leftover, f"old rows still on screen after the relaunch: {leftover}"
    tui.until(served(rig, 3, "response_done"), what="the final reply")
    tui.until(lambda: tui.on_screen("All done."), what="the final answer on screen")
    check_resize_reaches(tui, launched_pid(rig))


def pty_size(pid: int) -> tuple[int, int]:
    """(rows, columns) of the terminal the process has as its stdin."""
    fd = os.open(f"/proc/{pid}/fd/0", os.O_RDONLY | os.O_NOCTTY)
    try:
        rows, cols, _, _ = struct.unpack("HHHH", fcntl.ioctl(fd, termios.TIOCGWINSZ, b"\0" * 8))
    finally:
        os.close(fd)
    return rows, cols


def check_resize_reaches(tui: Tui, pid: int) -> None:
    """A resize of the user's terminal still reaches the relaunched harness (SIGWINCH)."""
    assert pty_size(pid) == (tui.screen.lines, tui.screen.columns)
    tui.child.setwinsize(30, 100)
    tui.screen.resize(30, 100)
    deadline = time.monotonic() + 10
    while pty_size(pid) != (30, 100):
        assert time.monotonic() < deadline, f"the harness's terminal is still {pty_size(pid)}"
        tui.pump(0.1)


def check_quit(tui: Tui, rig, harness: str) -> None:
    code = tui.quit(TUI[harness][2])
    assert code == 0, tui.text()
    assert [e.type for e in events(rig)].count("launched") == 2
    assert session_of(rig)["state"] == "finished"


@pytest.mark.parametrize("harness", list(TUI))
def test_tui_kill_during_stalled_reply_goes_on(real_rig, installed, harness):
    rig = real_tui_rig(real_rig, installed, harness, STALL_SCRIPT)
    tui = start(rig, harness)
    try:
        kill_and_continue(tui, rig, harness, "stall")
        check_quit(tui, rig, harness)
    finally:
        tui.close()
    check_no_rebilling(rig)
    assert rig.server.completed_counts() == {0: 1, 1: 1, 2: 1, 3: 1}
    assert read(rig.proj / "steps.log") == "step0\n" and read(rig.proj / "a.txt") == "alpha\n"


# Claude Code 2.1.197's TUI may write the turn's prompt row (and its attachments) AFTER the
# model's text and Bash tool_use rows when the model answers fast (seen: prompt stamped
# 14.881 s, tool_use 14.957 s, the tool_use row first in the file; 3 of 12 runs). dh's current
# turn follows the parent chain (stores/turns.py), so the call is still repaired; with the
# turn cut by file order from the prompt row it went unrepaired and reply #0 was served twice.
# Codex: its app-server daemon is frozen the moment the TUI is seen dead (ToolTracker.
# _freeze_parts): left running through the tool grace, it took the command's end as its cue,
# got the next reply and was ended before it wrote that reply to the rollout, so the
# relaunched TUI asked for it again (1 run in 4, reply #2 served twice).
@pytest.mark.parametrize("harness", list(TUI))
def test_tui_kill_during_shell_tool_goes_on(real_rig, installed, harness):
    rig = real_tui_rig(real_rig, installed, harness, TOOL_SCRIPT)
    tui = start(rig, harness)
    try:
        kill_and_continue(tui, rig, harness, "tool")
        assert not harness_parts(rig)  # Codex: dh runs the agent in the TUI, no daemon
        check_quit(tui, rig, harness)
    finally:
        tui.close()
    check_no_rebilling(rig)
    assert rig.server.completed_counts() == {0: 1, 1: 1, 2: 1, 3: 1}
    # the command ran at most once, never again: to its end, or (Codex: its shell dies with
    # the TUI, of its parent-death signal, as under `codex exec`) cut before its echo
    assert read(rig.proj / "effect.log") == ("" if harness == "codex" else "once\n")
    assert read(rig.proj / "a.txt") == "alpha\n"
    first_after = rig.server.main_requests()[1]
    results = tool_results(first_after["api"], first_after["body"])
    # dh's repair, for every harness (Codex's daemon, frozen, never recorded the result itself)
    assert MAY_HAVE_RUN in results[0][1], results


def test_scripts_reach_the_final_reply():
    assert STALL_SCRIPT["replies"][-1] == SCRIPT["replies"][-1] == {"text": "All done."}


STOPS = {"SIGTERM": (signal.SIGTERM, 143, "stopped"), "SIGHUP": (signal.SIGHUP, 129, "stopped"),
         "ctrl-c": (None, 0, "finished")}


@pytest.mark.parametrize("stop", list(STOPS))
@pytest.mark.parametrize("harness", ["claude-code", "pi"])
def test_tui_stopped_by_the_user_is_never_relaunched(real_rig, installed, harness, stop):
    """SIGTERM or SIGHUP to dh, or Ctrl-C twice in the TUI (its own way out): dh ends with the
    harness, launches it once only, and the session's state and last event say why."""
    rig = real_tui_rig(real_rig, installed, harness, SCRIPT)
    tui = start(rig, harness)
    sig, code, state = STOPS[stop]
    try:
        tui.until(lambda: tui.on_screen(TUI[harness][1]), what="the editor")
        tui.quiet()
        if sig:
            os.kill(tui.child.pid, sig)
            assert tui.quit([]) == code, tui.text()
        else:
            # twice within Pi's double-press window
            assert tui.quit(["\x03", "\x03"], gap=0.2) == code, tui.text()
    finally:
        tui.close()
    assert [e.type for e in events(rig)].count("launched") == 1
    assert session_of(rig)["state"] == state
    last = [e.details for e in events(rig) if e.type == "state"][-1]
    assert last["to"] == "EXITED"
    assert (stop in last["why"]) if sig else "code 0" in last["why"], last


@pytest.mark.parametrize("harness", ["claude-code", "pi"])
def test_tui_terminal_is_put_back_after_dh_is_sigkilled(real_rig, installed, harness):
    """kill -9 of dh itself: no handler of dh's runs, but its guardian process puts the
    terminal back (cursor shown, modes reset, cooked mode) for the shell."""
    rig = real_tui_rig(real_rig, installed, harness, SCRIPT)
    tui = start(rig, harness)
    try:
        tui.until(lambda: tui.on_screen(TUI[harness][1]), what="the editor")
        tui.quiet()
        size = len(tui.raw)
        os.kill(tui.child.pid, signal.SIGKILL)
        deadline = time.monotonic() + 15
        while b"\x1b[?25h" not in tui.raw[size:] and time.monotonic() < deadline:
            tui.pump(0.1)
        assert b"\x1b[?25h" in tui.raw[size:] and b"\x1b[?1049l" in tui.raw[size:]
        assert not tui.screen.cursor.hidden
        attrs = termios.tcgetattr(tui.child.child_fd)
        assert attrs[3] & termios.ICANON and attrs[3] & termios.ECHO  # cooked again
    finally:
        tui.close()


def harness_parts(rig) -> list:
    """Codex's app-server processes started from the rig's CODEX_HOME (its daemon and the
    daemon's pid-update loop), alive."""
    daemons = str(rig.tmp / ".codex" / "packages" / "app-server-daemon")
    found = []
    for proc in psutil.process_iter(["cmdline", "status"]):
        if proc.info["status"] != psutil.STATUS_ZOMBIE and \
                (proc.info["cmdline"] or [""])[0].startswith(daemons):
            found.append(proc)
    return found


@pytest.mark.harnesses("codex")
def test_tui_codex_daemon_ends_with_a_sigkilled_dh_and_the_turn_goes_on_at_resume(real_rig, installed):
    """kill -9 of dh while Codex's TUI, kept on its app-server daemon by the user, runs a shell
    command: the TUI dies with dh, and so must the daemon. Left running (0.171.0), it ran the
    command to its end and asked the model for the three remaining replies within 10 s, with
    no dh to mirror it, and a `dh resume` then would have repaired the rollout it was writing.
    Resumed, the turn completes, each reply paid once; the command, cut, is reported to the
    model as maybe run. (dh's own launches run the agent in the TUI: no daemon at all.)"""
    rig = real_tui_rig(real_rig, installed, "codex", TOOL_SCRIPT)
    tui = Tui(rig, "codex", ["-c", "features.daemon_auto_start=true"])
    try:
        tui.until(lambda: tui.on_screen(TUI["codex"][1]), what="the editor")
        tui.quiet()
        tui.submit(PROMPT, served(rig, 0))
        tui.until(lambda: logged(rig, "tool_call") >= 1 and command_running(rig) and harness_parts(rig),
                  what="the tool call logged, its command and the daemon running")
        time.sleep(2.5)  # dh's look at the harness's processes comes every 2 s
        os.kill(tui.child.pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while harness_parts(rig) and time.monotonic() < deadline:
            time.sleep(0.1)
        left = [p.info["cmdline"] for p in harness_parts(rig)]
        assert not left, left
        time.sleep(5)  # the command would have ended (sleep 3) and the next reply been asked
        assert not served(rig, 1)(), rig.server.log
    finally:
        tui.close()
    resumed = Tui(rig, "codex", [], command=["resume", session_of(rig)["id"]])
    try:
        resumed.until(served(rig, 3, "response_done"), what="the final reply")
        resumed.until(lambda: resumed.on_screen("All done."), what="the final answer on screen")
        assert resumed.quit(TUI["codex"][2]) == 0, resumed.text()
    finally:
        resumed.close()
    check_no_rebilling(rig)
    assert rig.server.completed_counts() == {0: 1, 1: 1, 2: 1, 3: 1}
    assert read(rig.proj / "a.txt") == "alpha\n"
    results = tool_results(rig.server.main_requests()[1]["api"], rig.server.main_requests()[1]["body"])
    assert MAY_HAVE_RUN in results[0][1], results


# reply #0 stalls once: the TUI's first request hangs, as a slow model's would
EARLY_SCRIPT = {"replies": [dict(R[0], delay_s=60, delay_times=1), *R[1:]]}


def transcript_rows(rig) -> list[dict]:
    import json

    rows = []
    for path in (rig.tmp / ".claude" / "projects").glob("*/*.jsonl"):
        rows += [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return rows


def history(rig) -> str:
    path = rig.tmp / ".claude" / "history.jsonl"
    return path.read_text() if path.exists() else ""


def startup_rows_only(rig) -> bool:
    rows = transcript_rows(rig)
    return bool(rows) and not any(r.get("type") == "user" for r in rows)


def until_fast(tui: Tui, done, timeout: float = 20.0, what: str = "") -> None:
    """until(), polling every 5 ms: the window waited for is about 0.1 s wide."""
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, f"timed out waiting for {what}:\n{tui.text()}"
        tui.pump(0.005)


@pytest.mark.parametrize("point", ["prompt in history", "start-up rows"])
def test_tui_claude_killed_before_its_transcript_holds_the_prompt(real_rig, installed, point):
    """Claude Code's TUI sends the model request before it writes the prompt row (2.1.197:
    no transcript at all then; 2.1.332: only its start-up rows, which `--resume` refuses and
    which make `--session-id` refuse the id). Killed in that window: dh starts the same
    session id afresh with the prompt from Claude's own prompt history, says so, and the
    turn completes with no keystroke; the cut request was never answered, so nothing is
    paid twice."""
    rig, tui, native_id = cut_before_the_prompt_row(real_rig, installed, point)
    try:
        tui.until(lambda: tui.at_notice is not None, what="dh's notice")
        assert any(NOTICE in row for row in tui.at_notice), tui.at_notice
        tui.until(served(rig, 3, "response_done"), what="the final reply")
        tui.until(lambda: tui.on_screen("All done."), what="the final answer on screen")
        assert b"dh sends it again" in tui.raw, tui.text()  # the one-line note
        check_quit(tui, rig, "claude-code")
    finally:
        tui.close()
    check_no_rebilling(rig)
    assert rig.server.completed_counts() == {0: 1, 1: 1, 2: 1, 3: 1}
    assert read(rig.proj / "steps.log") == "step0\n" and read(rig.proj / "a.txt") == "alpha\n"
    assert session_of(rig)["harness_session_id"] == native_id  # the same session, by its id
    prompts = [r for r in transcript_rows(rig) if r.get("type") == "user"
               and r["message"]["content"] == PROMPT]
    assert len(prompts) == 1 and prompts[0]["sessionId"] == native_id, prompts


EARLY_TRIES = 3  # fresh sessions to land the kill in its window (about 0.1 s, quiet machine)


def cut_before_the_prompt_row(real_rig, installed, point: str):
    """A Claude Code TUI killed once its request is out and the prompt is in its
    history.jsonl, and before it wrote the prompt row: (rig, tui, native id). A kill that
    came too late (the other pytest-xdist worker loading the machine: 1 full run in 4) did
    not make the state this case is about, so it is tried again on a fresh session."""
    for attempt in range(EARLY_TRIES):
        rig = real_tui_rig(real_rig, installed, "claude-code", EARLY_SCRIPT, sub=f"try{attempt}")
        tui = start(rig, "claude-code")
        try:
            native_id = kill_in_the_window(rig, tui, point)
        except BaseException:
            tui.close()
            raise
        if native_id:
            return rig, tui, native_id
        tui.close()
    raise AssertionError(f"the prompt row was written before the kill in {EARLY_TRIES} sessions")


def kill_in_the_window(rig, tui: Tui, point: str) -> str | None:
    """The session's id when the TUI was killed with no prompt row on disk (as `point`
    says), None when the row was already written."""
    tui.until(lambda: tui.on_screen(TUI["claude-code"][1]), what="the editor")
    tui.quiet()
    pid, native_id = launched_pid(rig), session_of(rig)["harness_session_id"]
    # killed once the request is out and the prompt is in Claude's history.jsonl (the
    # two come within a few ms, either first), and before the prompt row (~0.1 s later
    # on a quiet machine; about a second under load). Killed before history.jsonl has
    # it, the prompt is lost, and dh's note says so (test_claude_prompts.py)
    # (a) as soon as both are there (seen: the transcript missing, or its start-up rows
    # already written); (b) once it holds its start-up rows (mode, permission-mode …),
    # still without the prompt's: the file `--resume` refuses
    tui.submit(PROMPT, served(rig, 0))
    until_fast(tui, lambda: PROMPT in history(rig) and
               (point == "prompt in history" or bool(transcript_rows(rig))), what=point)
    os.killpg(pid, signal.SIGKILL)
    # the state this case is about, read once the TUI is dead: no prompt row on disk
    if [r for r in transcript_rows(rig) if r.get("type") == "user"]:
        return None
    assert point == "prompt in history" or startup_rows_only(rig)
    return native_id


def typed_into_a_stalled_reply(real_rig, installed, harness: str):
    """(rig, tui): the prompt typed and sent, its reply stalled for a minute."""
    rig = real_tui_rig(real_rig, installed, harness, EARLY_SCRIPT)
    tui = start(rig, harness)
    try:
        tui.until(lambda: tui.on_screen(TUI[harness][1]), what="the editor")
        tui.quiet()
        tui.submit(PROMPT, served(rig, 0))
    except BaseException:
        tui.close()
        raise
    return rig, tui


def test_tui_claude_cut_in_its_prompt_row_gets_dh_word_on_a_changed_folder(real_rig, installed):
    """Killed while its first reply is stalled, Claude Code's transcript ends in the prompt
    row; a file no record explains appeared meanwhile (a command Claude ran before it wrote
    the call, made here by hand). Relaunched with its own continuation, Claude sends the cut
    prompt again and never dh's text: dh's word on the file must reach the model anyway,
    and the turn completes with no keystroke and nothing paid twice."""
    rig, tui = typed_into_a_stalled_reply(real_rig, installed, "claude-code")
    try:
        tui.until(lambda: any(r.get("type") == "user" for r in transcript_rows(rig))
                  and logged(rig, "user") >= 1, what="the prompt row, logged")
        (rig.proj / "made-by-hand.txt").write_text("unrecorded\n")
        os.killpg(launched_pid(rig), signal.SIGKILL)
        tui.until(lambda: tui.at_notice is not None, what="dh's notice")
        tui.until(served(rig, 3, "response_done"), what="the final reply")
        tui.until(lambda: tui.on_screen("All done."), what="the final answer on screen")
        check_quit(tui, rig, "claude-code")
    finally:
        tui.close()
    check_no_rebilling(rig)
    assert rig.server.completed_counts() == {0: 1, 1: 1, 2: 1, 3: 1}
    asked_again = [r for r in rig.server.main_requests() if r.get("reply_index") == 0][1]
    told = last_user_text(asked_again["body"])
    assert "made-by-hand.txt" in told, told
    assert PROMPT in json.dumps(asked_again["body"]["messages"])  # the cut prompt is still there
    assert read(rig.proj / "steps.log") == "step0\n" and read(rig.proj / "a.txt") == "alpha\n"


@pytest.mark.harnesses("pi")
def test_tui_pi_killed_before_its_first_answer_asks_for_the_prompt_again(real_rig, installed):
    """Pi 0.73.1 writes no file before its first answer, and keeps what was typed in memory:
    killed while that answer is stalled, the prompt is gone. dh relaunches Pi and says, in
    one line under its notice, that the prompt must be typed again; typed again, the turn
    completes and nothing is paid twice (the cut request was never answered). The newest Pi
    writes the prompt before it asks the model: there the turn goes on with no keystroke."""
    rig, tui = typed_into_a_stalled_reply(real_rig, installed, "pi")
    try:
        saved = session_of(rig)["records"]
        assert (saved == 0) == (installed.version_set == "pinned"), saved
        os.killpg(launched_pid(rig), signal.SIGKILL)
        tui.until(lambda: [e.type for e in events(rig)].count("launched") == 2, what="the relaunch")
        if not saved:
            tui.until(lambda: b"type it again" in tui.raw, what="dh's line on the lost prompt")
            tui.until(lambda: tui.on_screen(TUI["pi"][1]), what="the editor again")
            tui.quiet()
            tui.submit(PROMPT, lambda: len(rig.server.main_requests()) >= 2)
        tui.until(served(rig, 3, "response_done"), what="the final reply")
        tui.until(lambda: tui.on_screen("All done."), what="the final answer on screen")
        check_quit(tui, rig, "pi")
    finally:
        tui.close()
    assert (b"type it again" in tui.raw) == (not saved)
    check_no_rebilling(rig)
    assert rig.server.completed_counts() == {0: 1, 1: 1, 2: 1, 3: 1}
    assert read(rig.proj / "steps.log") == "step0\n" and read(rig.proj / "a.txt") == "alpha\n"
