"""SIGKILL of dh itself, at every stage where it holds state: while it mirrors a running harness
live, while it rebuilds a big session, and around a crash of the harness (after the exit is
logged, during the repair of the cut tool call, during the relaunch). SIGKILL during
`dh import` is in test_import_kill.py; during `dh world push` in test_worlds_push.py.

After each kill, running the command again (or `dh resume`) must end with a consistent log:
every native record exactly once (the logged bytes equal the native file, in one generation),
the cut tool call closed once, no model reply paid twice, and never two harness processes on
the session at the same moment (the process table is sampled throughout)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dh_cli.resume.rebuild import source_bytes
from dh_cli.worlds.local import LocalWorld

from .fakes.transcripts import write_claude_transcript
from .fakes.model_server import FakeModelServer
from .rig import SCRIPT, Rig
from tests.helpers import harnesses
from tests.helpers.readonly import query_read_only
from tests.helpers.wait import wait_until
from tests.helpers.kill import HarnessWatch, kill, rig, spawn_run, the_session  # noqa: F401 (rig)


def events_in(db: Path) -> list[tuple[str, int | None]]:
    """(type, attempt) of every event, read without locking anything; [] while no log. A
    state event is named by the state it enters (`state:BACKOFF`): there are several per
    attempt (STARTING, RUNNING, then BACKOFF or EXITED)."""
    return query_read_only(db, "SELECT CASE WHEN type = 'state' THEN 'state:' || "
                               "json_extract(details, '$.to') ELSE type END, attempt "
                               "FROM events ORDER BY seq", [])


def wait_event(db: Path, type_: str, nth: int = 1, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while sum(t == type_ for t, _ in events_in(db)) < nth:
        assert time.monotonic() < deadline, f"no {type_!r} event #{nth}: {events_in(db)}"
        time.sleep(0.002)



def check_consistent(rig) -> None:
    """Every native record in the log exactly once: the latest generation is the native
    file byte for byte, no second generation was needed, and the turn finished."""
    world, session = the_session(rig)
    for source in world.sources(session.id):
        if source.kind != "jsonl":
            continue
        native = Path(source.path).read_bytes()
        assert source_bytes(world, source) == native
        assert world.source_stats(source.id) == (1, len(native.splitlines(keepends=True)))
    assert any(b"All done." in r.raw for r in world.records(session.id))


def native_calls(rig) -> dict[str, int]:
    """Tool results per call id in the native Pi file: 1 each, never a repeated repair."""
    world, session = the_session(rig)
    counts: dict[str, int] = {}
    for raw in Path(session.native_path).read_bytes().splitlines():
        message = json.loads(raw).get("message") or {}
        if message.get("role") == "toolResult":
            counts[message["toolCallId"]] = counts.get(message["toolCallId"], 0) + 1
    return counts


# during live mirroring ------------------------------------------------------------------------
def effects_at_most_once(rig) -> None:
    """The scripted model is stateless: after a cut-off call is reported as "may already have
    taken effect" it moves on, so an effect appears once or not at all, never twice."""
    assert (rig.proj / "steps.log").read_text() in ("", "step0\n")
    assert read(rig.proj / "a.txt") in ("", "alpha\n")


def read(path: Path) -> str:
    return path.read_text() if path.exists() else ""


@pytest.mark.parametrize("harness", harnesses.ALL)
def test_dh_killed_while_mirroring_then_resume(rig, harness):
    """dh dies while the harness waits on a slow model reply. The harness runs on without it
    until its next write to the stdout pipe dh held (EPIPE: it dies there); `dh resume` logs
    what it wrote meanwhile, repairs the cut step and finishes the turn.

    A harness that had received a reply but not yet saved it when it hit the broken pipe
    loses that reply, so one model call may be paid twice here: dh cannot keep a harness
    alive past its own SIGKILL while it holds the harness's stdout."""
    watch = HarnessWatch(str(rig.bin_dir))
    proc = spawn_run(rig, harness)
    rig.server.wait_for(lambda log: any(e.get("reply_index") == 1 for e in log), timeout=30)
    time.sleep(0.3)
    kill(proc)
    watch.wait_gone()
    world, session = the_session(rig)
    resumed = rig.dh("resume", session.id, timeout=120)
    assert resumed.returncode == 0, resumed.stderr.decode()
    assert watch.stop() == 1
    assert rig.server.rebilled() <= 1, rig.server.completed_counts()
    effects_at_most_once(rig)
    if harness != "opencode":
        check_consistent(rig)
    else:
        assert any(b"All done." in r.raw for r in world.records(session.id))
    check_dh_death_marked(rig, session.id)


def check_dh_death_marked(rig, session_id: str) -> None:
    """dh's own death is a crash of the attempt it ran: marked once, by the next command
    that finds the attempt unended, and shown inside the turn it cut."""
    shown = json.loads(rig.dh("log", "show", session_id, "--json").stdout)
    marked = [e for e in shown["events"] if e["details"].get("dh_killed")]
    assert [(e["attempt"], e["details"]["outcome"]) for e in marked] == [(1, "crashed")]
    crashes = [i for i in shown["items"] if i["type"] == "crash"]
    assert [(c["text"], c["turn"]) for c in crashes] == [("crash: dh was killed", 1)]


def test_dh_killed_while_a_quiet_harness_runs_costs_nothing(rig):
    """Pi in text mode writes its stdout only at the end: with dh gone it finishes the whole
    turn alone. `dh resume` then logs the rest and, the turn being complete, launches
    nothing: no reply is paid twice, no tool runs twice."""
    watch = HarnessWatch(str(rig.bin_dir))
    proc = subprocess.Popen([sys.executable, "-m", "dh_cli", "run", "pi", "--", "-p", "--provider",
                             "mock", "--model", "mock-claude", "Create the files."], cwd=rig.proj,
                            env=rig.env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    rig.server.wait_for(lambda log: any(e.get("reply_index") == 1 for e in log), timeout=30)
    time.sleep(0.3)
    kill(proc)
    watch.wait_gone()
    world, session = the_session(rig)
    assert world.record_count(session.id) < len(Path(session.native_path).read_bytes().splitlines())
    resumed = rig.dh("resume", session.id, timeout=120)
    assert resumed.returncode == 0, resumed.stderr.decode()
    assert b"already finished its turn; nothing to resume" in resumed.stderr
    assert watch.stop() == 1
    assert rig.server.rebilled() == 0, rig.server.completed_counts()
    assert len(rig.server.main_requests()) == 4
    assert (rig.proj / "steps.log").read_text() == "step0\n"
    assert (rig.proj / "a.txt").read_text() == "alpha\n"
    check_consistent(rig)
    check_dh_death_marked(rig, session.id)
    again = rig.dh("resume", session.id, timeout=120)  # marked once, however often resumed
    assert again.returncode == 0, again.stderr.decode()
    check_dh_death_marked(rig, session.id)


def test_dh_killed_after_the_turn_ended_leaves_no_crash(rig):
    """dh killed while the harness, its turn over, has not yet exited (Codex's `exec` can
    take seconds; the fault soak's case 0213, seed 30): nothing was cut, so the next
    command marks the attempt finished with its exit unrecorded, and no view shows a crash."""
    watch = HarnessWatch(str(rig.bin_dir))
    proc = spawn_run(rig, "claude-code", env={"DH_FAKE_CRASH": "linger-at-end=5"})
    world, session = wait_until(lambda: _with_final_answer(rig), "the final answer in the log", 60)
    kill(proc)
    watch.wait_gone()
    resumed = rig.dh("resume", session.id, timeout=120)
    assert resumed.returncode == 0, resumed.stderr.decode()
    assert watch.stop() == 1
    shown = json.loads(rig.dh("log", "show", session.id, "--json").stdout)
    ended = [(e["attempt"], e["details"]["outcome"]) for e in shown["events"]
             if e["details"].get("exit_unrecorded")]
    assert ended == [(1, "finished")]
    assert not [e for e in shown["events"] if e["details"].get("dh_killed")]
    assert not [i for i in shown["items"] if i["type"] == "crash"]
    assert rig.server.rebilled() == 0


def _with_final_answer(rig):
    try:
        world, session = the_session(rig)
    except ValueError:  # no session yet
        return None
    if any(b"All done." in (r.raw or b"") for r in world.records(session.id)):
        return world, session
    return None


# around a crash of the harness: exit logged, repair, relaunch ----------------------------------
POINTS = [("exited", 1), ("state:BACKOFF", 1), ("resume", 1), ("repair", 1), ("repaired", 1),
          ("resume_plan", 1), ("launch", 2), ("launched", 2)]


@pytest.mark.parametrize("event,nth", POINTS, ids=[f"{e}#{n}" for e, n in POINTS])
def test_dh_killed_around_repair_and_relaunch(rig, event, nth):
    """Pi is killed while its first shell command runs; dh is killed as soon as the log shows
    `event` (the exit, the resume intent, the repair, the relaunch). Then `dh resume`, which
    waits for a relaunched harness that outlived dh, and launches nothing when that harness
    finished the turn on its own."""
    rig.server.set_script(SCRIPT)
    watch = HarnessWatch(str(rig.bin_dir))
    env = {"DH_FAKE_CRASH": "during-tool=1", "DH_FAKE_CRASH_ONCE": str(rig.tmp / "crashed")}
    proc = spawn_run(rig, "pi", env)
    db = Path(rig.env["DH_HOME"]) / "dh.db"
    wait_event(db, event, nth)
    kill(proc)
    world, session = the_session(rig)
    if watch.running():  # the relaunched harness outlived dh: a resume must wait for it
        refused = rig.dh("resume", session.id)
        if watch.running():
            assert refused.returncode == 4 and b"still running" in refused.stderr
    watch.wait_gone()
    again = rig.dh("resume", session.id, timeout=120)
    assert again.returncode == 0, again.stderr.decode()
    assert watch.stop() == 1
    check_consistent(rig)
    # a relaunched harness orphaned by the kill can lose a delivered reply (see above: EPIPE)
    assert rig.server.rebilled() <= (1 if event in ("launch", "launched") else 0), \
        rig.server.completed_counts()
    assert set(native_calls(rig).values()) == {1}  # each call closed once: never two repairs
    effects_at_most_once(rig)


# during rebuild ---------------------------------------------------------------------------------
def test_dh_killed_during_rebuild_then_rerun(tmp_path):
    """Killed while writing a 60 MB session back: the target is never a half file (the
    temporary one is renamed only when complete), and the rerun writes it whole and removes
    the temporary file the killed run left behind."""
    home = tmp_path / "claude"
    native = home / "projects" / "-home-dev-project" / "0000aaaa-bbbb-cccc-dddd-eeeeeeeeeeee.jsonl"
    write_claude_transcript(native, 60 << 20, seed=1)
    env = {**os.environ}
    assert subprocess.run([sys.executable, "-m", "dh_cli", "import", "claude", "--all", "--home",
                           str(home)], env=env, capture_output=True).returncode == 0
    (session,) = LocalWorld().list_sessions()
    out = tmp_path / "restore"
    target = out / native.relative_to(home)
    kills = 0
    for _ in range(3):
        proc = subprocess.Popen([sys.executable, "-m", "dh_cli", "log", "rebuild", session["id"],
                                 "--to", str(out), "--force"], env=env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE)
        deadline = time.monotonic() + 60
        while proc.poll() is None and not list(target.parent.glob(".*.dh-tmp-*")):
            assert time.monotonic() < deadline
            time.sleep(0.001)
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            kills += proc.wait() == -signal.SIGKILL
        assert not target.exists() or target.read_bytes() == native.read_bytes()
        if target.exists():
            target.unlink()
    assert kills, "no kill landed while the file was being written"
    assert list(target.parent.glob(".*.dh-tmp-*")), "the killed rebuilds left no temporary file"
    rerun = subprocess.run([sys.executable, "-m", "dh_cli", "log", "rebuild", session["id"], "--to",
                            str(out)], env=env, capture_output=True, text=True)
    assert rerun.returncode == 0, rerun.stderr
    assert target.read_bytes() == native.read_bytes()
    assert sorted(p.name for p in target.parent.iterdir()) == [target.name]
    again = subprocess.run([sys.executable, "-m", "dh_cli", "log", "rebuild", session["id"], "--to",
                            str(out)], env=env, capture_output=True, text=True)
    assert again.returncode == 0 and again.stdout.startswith("unchanged")


def snapshots_in(db: Path, reason: str = "tool") -> int:
    return query_read_only(db, f"SELECT COUNT(*) FROM ws_snapshots WHERE reason = '{reason}'",
                           [(0,)])[0][0]


def test_a_folder_changed_since_the_last_recorded_step_is_told_to_the_model(rig):
    """dh and the harness die together after a command changed the folder but before the
    harness recorded the call (Claude Code runs a command before it writes the call; a lost
    home leaves no trace of it either): `dh resume` finds the folder changed against the last
    recorded step's snapshot, and the continuation prompt says so."""
    watch = HarnessWatch(str(rig.bin_dir))
    proc = spawn_run(rig, "claude-code")
    rig.server.wait_for(lambda log: any(e.get("reply_index") == 1 for e in log), timeout=30)
    wait_until(lambda: snapshots_in(Path(rig.env["DH_HOME"]) / "dh.db"),
               "the snapshot of reply #0's step", 30)
    kill(proc)
    watch.wait_gone()
    with open(rig.proj / "steps.log", "a") as log:  # a command no record holds
        log.write("unrecorded\n")
    world, session = the_session(rig)
    asked = len(rig.server.main_requests())
    resumed = rig.dh("resume", session.id, timeout=120)
    assert resumed.returncode == 0, resumed.stderr.decode()
    watch.stop()
    first = json.dumps(rig.server.main_requests()[asked]["body"])
    assert "The working folder changed after the last step this session recorded" in first
    assert "steps.log modified" in first and "may already have taken effect" in first


def _resumed_prompt(rig, asked: int) -> str:
    return json.dumps(rig.server.main_requests()[asked]["body"])


def test_a_folder_changed_before_the_first_step_is_told_to_the_model(tmp_path):
    """Killed with dh before the session's first step was snapshotted (its first model call
    still out), after a command the harness never recorded created a file: the folder as
    the session found it (its start snapshot) shows the file was not there."""
    late_first = {"replies": [dict(SCRIPT["replies"][0], delay_s=3, delay_times=1),
                              *SCRIPT["replies"][1:]]}
    server = FakeModelServer(late_first).start()
    try:
        rig = Rig(tmp_path, server)
        (rig.proj / "kept.txt").write_text("there before the session\n")
        watch = HarnessWatch(str(rig.bin_dir))
        proc = spawn_run(rig, "claude-code")
        server.wait_for(lambda log: any(e.get("reply_index") == 0 for e in log), timeout=30)
        # taken beside the harness's start: it may come after the first request, never
        # after the reply (3 s late here) that a command would need
        wait_until(lambda: snapshots_in(Path(rig.env["DH_HOME"]) / "dh.db", "start") == 1,
                   "the start snapshot", 3)
        kill(proc)
        watch.wait_gone()
        (rig.proj / "made.txt").write_text("by a command no record holds\n")
        world, session = the_session(rig)
        asked = len(server.main_requests())
        resumed = rig.dh("resume", session.id, timeout=120)
        assert resumed.returncode == 0, resumed.stderr.decode()
        watch.stop()
        first = _resumed_prompt(rig, asked)
        assert "made.txt created" in first and "may already have taken effect" in first
        assert "kept.txt" not in first
    finally:
        server.stop()


def test_dh_own_relaunch_tells_the_model_of_a_changed_folder(rig):
    """The harness alone is killed (dh relaunches it itself) after a command it had not
    recorded changed the folder: the continuation dh's relaunch sends says so, and the
    snapshot dh took after the harness stopped is not taken for the last recorded step."""
    watch = HarnessWatch(str(rig.bin_dir))
    proc = spawn_run(rig, "claude-code")
    rig.server.wait_for(lambda log: any(e.get("reply_index") == 1 for e in log), timeout=30)
    wait_until(lambda: snapshots_in(Path(rig.env["DH_HOME"]) / "dh.db"),
               "the snapshot of reply #0's step", 30)
    with open(rig.proj / "steps.log", "a") as log:
        log.write("unrecorded\n")
    asked = len(rig.server.main_requests())
    (harness,) = watch.running()
    harness.kill()
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 0, stderr.decode()
    watch.stop()
    first = _resumed_prompt(rig, asked)
    assert "steps.log modified" in first and "may already have taken effect" in first
    assert snapshots_in(Path(rig.env["DH_HOME"]) / "dh.db", "attempt_end") >= 1
