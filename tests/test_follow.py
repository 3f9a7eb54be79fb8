"""`dh log show --follow`: new timeline items, settled tool calls and dh events appear as they
are logged, from the log alone, across a crash and a resume; Ctrl-C ends it cleanly."""

import json
import os
import queue
import signal
import subprocess
import sys
import threading

import pytest

from dh_cli.logviews.follow import Follower, follow
from dh_cli.worlds.local import LocalWorld

from .conftest import fixture_home
from .helpers.wait import wait_until


@pytest.fixture
def live(tmp_path, run_dh):
    """A real Claude Code session logged up to a dangling tool call; returns a function that
    appends the next native lines and mirrors them, as the supervisor's tailer would."""
    home = fixture_home("claude-code", "multiturn", tmp_path)
    native = next(home.glob("projects/*/*.jsonl"))
    lines = native.read_bytes().splitlines(keepends=True)
    native.write_bytes(b"".join(lines[:7]))  # ends with a tool_use whose result is not written yet
    assert run_dh("import", "claude", "--all", "--home", str(home)).exit_code == 0
    (session,) = LocalWorld().list_sessions()

    def append(upto: int) -> None:
        with native.open("ab") as f:
            f.write(b"".join(lines[append.done:upto]))
        append.done = upto
        assert run_dh("import", "claude", "--all", "--home", str(home)).exit_code == 0

    append.done = 7
    return session["id"], append


def test_catch_up_then_only_what_is_new(live):
    session_id, append = live
    world = LocalWorld()
    follower = Follower(world, session_id)
    first = follower.poll()
    assert [u["type"] for u in first] == ["prompt", "assistant", "model_call", "tool_call"]
    assert first[-1]["status"] == "dangling"
    assert follower.poll() == []  # nothing changed, nothing rebuilt
    append(14)
    second = follower.poll()
    assert [(u["kind"], u["type"]) for u in second] == [
        ("result", "tool_call"), ("item", "assistant"), ("item", "model_call"),
        ("item", "prompt"), ("item", "model_call"), ("item", "tool_call")]
    assert second[0]["status"] == "ok" and second[0]["call_id"] == first[-1]["call_id"]


def test_a_crash_and_a_resume_show_up_as_events(live):
    session_id, append = live
    world = LocalWorld()
    follower = Follower(world, session_id)
    follower.poll()
    world.add_event(session_id, "exited", {"code": -9, "signal": 9}, 1, "outcome")
    world.add_event(session_id, "resume", {"attempt": 2}, 2, "intent")
    assert [(u["kind"], u["type"]) for u in follower.poll()] == [("event", "exited"), ("event", "resume")]
    append(25)  # the resumed harness writes on
    assert any(u["type"] == "prompt" and u["turn"] == 3 for u in follower.poll())


def test_the_generator_follows_a_writer_in_another_thread(live):
    session_id, append = live
    seen, stop = [], threading.Event()

    def reader():
        for update in follow(LocalWorld(), session_id, interval=0.05, stop=stop.is_set):
            seen.append(update)

    thread = threading.Thread(target=reader)
    thread.start()
    try:
        # the reader's catch-up must see the call dangling first: a reader whose first poll
        # came after the append (its thread started late, seen under pytest-xdist) gets the
        # call already answered, as an item, and never a result
        wait_until(lambda: any(u.get("status") == "dangling" for u in seen), "a dangling call")
        append(14)
        LocalWorld().add_event(session_id, "launch", {"argv": []}, 2, "intent")
        wait_until(lambda: any(u["kind"] == "event" for u in seen), "an event")
        wait_until(lambda: any(u["kind"] == "result" for u in seen), "a result")
    finally:
        stop.set()
        thread.join(30)
    assert not thread.is_alive()


def test_follow_from_another_process_and_ctrl_c_ends_it_with_130(live, dh_home):
    session_id, append = live
    env = {**os.environ, "DH_HOME": str(dh_home)}
    proc = subprocess.Popen([sys.executable, "-m", "dh_cli", "log", "show", session_id[:8],
                             "--follow", "--json"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)
    lines = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in proc.stdout], daemon=True).start()
    try:
        first = [json.loads(lines.get(timeout=20)) for _ in range(4)]
        assert first[-1]["type"] == "tool_call"
        LocalWorld().add_event(session_id, "exited", {"code": -9, "signal": 9}, 1, "outcome")
        assert json.loads(lines.get(timeout=10))["type"] == "exited"
        proc.send_signal(signal.SIGINT)
        assert proc.wait(10) == 130
        assert "Traceback" not in proc.stderr.read()
    finally:
        proc.kill()
        proc.wait()


def test_text_follow_prints_the_timeline_lines(live, run_dh, monkeypatch):
    session_id, _ = live
    stop_after = iter([False, True])
    monkeypatch.setattr("dh_cli.commands.log_read.follow",
                        lambda world, sid: follow(world, sid, 0.01, stop=lambda: next(stop_after)))
    text = run_dh("log", "show", session_id, "--follow").stdout
    assert "[turn 1] user: " in text and "  tool Bash [dangling]" in text
    assert "last turn:" not in text  # the follow output only, not the whole view after it
