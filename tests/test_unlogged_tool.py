"""A tool command dh settled that no dangling call in the session explains: seen with the
real Claude Code, which can start a shell command before it writes the assistant message
asking for it, so a SIGKILL in between leaves the command's effect but no call. dh journals
it and tells the model (headless: in the continuation prompt) that it may have run."""

from dh_cli import wrappers
from dh_cli.mirror.importer import import_sessions
from dh_cli.resume.prepare import prepare_resume
from dh_cli.wrappers.replay import unlogged_text
from dh_cli.worlds.local import LocalWorld

from .conftest import fixture_home

OUTCOME = {"pid": 4242, "command": "bash -c 'sleep 3; echo once >> effect.log' --token s3cr3t-value",
           "started": 1795957035.07, "finished": True, "exit_code": 0, "ended_by_dh": False,
           "killed_by": None}


def test_a_settled_tool_without_a_call_is_journaled_scrubbed_and_reported(tmp_path, dh_home):
    home = fixture_home("pi", "basic", tmp_path)  # a complete turn: no dangling call
    world = LocalWorld()
    report = import_sessions(world, wrappers.get("pi"), home, all_=True)
    session = world.get_session(report.sessions[0]["id"])
    prepared = prepare_resume(world, wrappers.get("pi"), session, {}, [OUTCOME])
    assert prepared.repairs == []
    (outcome,) = prepared.unlogged
    assert "s3cr3t-value" not in outcome["command"] and "--token ***" in outcome["command"]
    (event,) = [e for e in world.events(session.id) if e.type == "unlogged_tool"]
    assert event.details == outcome
    text = unlogged_text(outcome)
    assert "may already have taken effect" in text
    assert "echo once >> effect.log" in text and "finish on its own (exit code 0)" in text


def test_each_fate_of_an_unlogged_tool_is_said():
    assert "dh ended it" in unlogged_text({**OUTCOME, "finished": False, "ended_by_dh": True})
    assert "stopped with the harness (SIGTERM)" in unlogged_text(
        {**OUTCOME, "finished": False, "killed_by": 15})
