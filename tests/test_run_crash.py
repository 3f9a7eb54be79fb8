"""`dh run` over each (fake) harness: a clean run, and a crash matrix — the harness SIGKILLs
itself after a record, in the middle of writing one, during a tool and during a model call.
Each must end with the turn complete after automatic resume, nothing paid twice, no `never`
tool run twice, and every native record in the log exactly once."""

import pytest

from dh_cli.resume.rebuild import source_bytes

from .fakes.model_server import FakeModelServer
from .helpers.model import told_may_have_run
from .rig import HARNESSES, SCRIPT, Rig

KILL_SCRIPT = {"replies": [SCRIPT["replies"][0], dict(SCRIPT["replies"][1], delay_s=5, delay_times=1),
                           *SCRIPT["replies"][2:]]}
# Kill points per harness (see tests/fakes: a "record" is one line, or one OpenCode row write).
# after-record points sit on message boundaries: each real harness writes the rows of one
# model message in one go, so a kill between them is not a state the real programs leave.
# mid-record points tear a tool-result line, the one record a harness writes on its own.
# during-tool counts shell commands only; during-model=2 lands while reply #1 is stalled, so
# the killed call was never completely delivered (a kill after a delivered reply that the
# harness had not yet saved loses that reply in the harness itself, before dh can see it).
CRASHES = {
    "claude-code": ["after-record=3", "after-record=7", "after-record=8", "after-record=10",
                    "after-record=13", "mid-record=8", "mid-record=10", "during-tool=1",
                    "during-model=2"],
    "pi": ["after-record=5", "after-record=6", "after-record=8", "after-record=10", "mid-record=6",
           "mid-record=8", "during-tool=1", "during-model=2"],
    "codex": ["after-record=8", "after-record=12", "after-record=15", "after-record=20",
              "after-record=29", "mid-record=15", "mid-record=20", "during-tool=1", "during-tool=2",
              "during-tool=3", "during-model=2"],
    "opencode": ["after-record=2", "after-record=9", "during-tool=1", "during-tool=2",
                 "during-model=2"],
}
MATRIX = [(h, c) for h, crashes in CRASHES.items() for c in crashes]


@pytest.fixture
def rig(tmp_path, request):
    # only a kill during a model call needs reply #1 to stall; elsewhere the stall is 5 s idle
    crash = getattr(request.node, "callspec", None) and request.node.callspec.params.get("crash", "")
    server = FakeModelServer(KILL_SCRIPT if (crash or "").startswith("during-model") else SCRIPT).start()
    yield Rig(tmp_path, server)
    server.stop()


def check_log_equals_native(rig) -> None:
    world = rig.world()
    (session,) = world.list_sessions()
    for source in world.sources(session["id"]):
        if source.kind == "jsonl":
            with open(source.path, "rb") as handle:
                assert source_bytes(world, source) == handle.read()


def final_text_logged(rig) -> bool:
    world = rig.world()
    (session,) = world.list_sessions()
    return any(b"All done." in r.raw for r in world.records(session["id"]))


@pytest.mark.parametrize("harness", HARNESSES)
def test_clean_run(rig, harness):
    result = rig.run(harness)
    assert result.returncode == 0, result.stderr.decode()
    assert (rig.proj / "steps.log").read_text() == "step0\n"
    assert (rig.proj / "a.txt").read_text() == "alpha\n"
    assert rig.server.rebilled() == 0
    assert final_text_logged(rig)
    check_log_equals_native(rig)
    assert b"resuming" not in result.stderr


def read(path) -> str:
    return path.read_text() if path.exists() else ""


@pytest.mark.parametrize("harness,crash", MATRIX)
def test_crash_matrix(rig, harness, crash):
    result = rig.run(harness, crash=crash)
    assert result.returncode == 0, result.stderr.decode()
    assert list(rig.tmp.glob("crashed-*")), "the crash point was never reached"
    assert b"resuming session" in result.stderr or b"nothing to resume" in result.stderr
    assert final_text_logged(rig)
    assert rig.server.rebilled() == 0, rig.server.completed_counts()
    # a cut-off call is reported, never re-run by dh: each effect happened at most once
    assert read(rig.proj / "steps.log") in ("", "step0\n")
    assert read(rig.proj / "a.txt") in ("", "alpha\n")
    check_log_equals_native(rig)
    if crash.startswith("during-tool"):
        assert told_may_have_run(rig.server), "the cut-off shell call was not reported"


@pytest.mark.parametrize("harness", HARNESSES)
def test_the_resume_notice_counts_the_finished_calls_kept(rig, harness):
    """Killed while reply #1 is asked for: the shell call of reply #0 has its result, and the
    notice says so for every harness (OpenCode keeps call and result in one part row)."""
    rig.server.set_script(KILL_SCRIPT)
    result = rig.run(harness, crash="during-model=2")
    assert result.returncode == 0, result.stderr.decode()
    assert b"resuming session" in result.stderr and b"1 finished call(s) kept" in result.stderr, \
        result.stderr.decode()
