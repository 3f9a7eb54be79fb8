"""The Supervisor's state machine, tick by tick: a real Supervisor and a real log, with fake
processes and a fake clock (tests/fakes/procs.py, clock.py), so each case runs in
milliseconds. tests/test_run_supervise.py keeps a few of the same paths with real processes.

Every transition of dh_cli/supervisor/states.py and the test that drives it:

    STOPPED  -> STARTING  first launch           test_a_clean_run_goes_starting_running_exited
    STARTING -> RUNNING   up for start_secs      test_a_clean_run_goes_starting_running_exited,
                                                 test_running_waits_for_start_secs_and_the_session_row_says_running_throughout
    STARTING -> BACKOFF   a failed start         test_a_failed_start_backs_off_from_starting
    STARTING -> FATAL     too many failed starts test_a_harness_that_cannot_start_is_fatal_in_seconds_with_its_stderr
    STARTING -> STOPPING  user signal            test_a_user_signal_while_starting_is_stopping_from_starting
    STARTING -> EXITED    work ended             test_work_that_ends_within_start_secs_is_exited_from_starting
    RUNNING  -> BACKOFF   crashed                test_a_crash_backs_off_then_resumes_with_the_plan,
                                                 test_backoff_doubles_between_restarts,
                                                 test_a_held_lease_relaunches_as_without_a_world
    RUNNING  -> BACKOFF   crashed, lease stale   test_a_lease_that_could_not_be_renewed_lets_the_harness_run_but_not_relaunch
                          (no relaunch after it)
    RUNNING  -> FATAL     too many restarts      test_too_many_restarts_is_fatal,
                                                 test_restarts_counted_in_the_log_survive_a_new_supervisor
    RUNNING  -> EXITED    work ended             test_a_clean_run_goes_starting_running_exited,
                                                 test_no_stall_while_the_turn_is_complete
    RUNNING  -> EXITED    crashed, --no-supervise test_without_supervision_a_crash_is_exited_not_restarted
    RUNNING  -> STOPPING  user signal            test_a_user_signal_is_forwarded_then_exited_without_relaunch,
                                                 test_the_grace_before_sigkill,
                                                 test_a_harness_that_goes_within_the_grace_gets_no_sigkill
    RUNNING  -> STOPPING  stall                  test_a_stall_is_stopping_then_backoff_and_resume
    RUNNING  -> STOPPING  lingering after a turn test_a_lingering_harness_is_stopped_once_its_turn_is_in_the_log
                          (and never otherwise:  test_a_harness_is_not_stopped_as_lingering_unless_it_is)
    RUNNING  -> STOPPING  takeover (epoch moved) test_a_takeover_stops_the_harness_and_this_dh_never_writes_the_world_again
    STOPPING -> EXITED    after a user signal    test_a_user_signal_is_forwarded_then_exited_without_relaunch
    STOPPING -> EXITED    after lingering        test_a_lingering_harness_is_stopped_once_its_turn_is_in_the_log
    STOPPING -> BACKOFF   after a stall          test_a_stall_is_stopping_then_backoff_and_resume
    STOPPING -> BACKOFF   after a takeover       test_a_takeover_stops_the_harness_and_this_dh_never_writes_the_world_again
                          (no relaunch: lease_lost, exit 4)
    STOPPING -> FATAL     a stall, no restarts   test_a_stall_with_no_restarts_left_is_fatal_from_stopping
    BACKOFF  -> STARTING  delay over             test_a_crash_backs_off_then_resumes_with_the_plan,
                                                 test_an_interactive_relaunch_gets_the_plans_env_and_typed_text
    BACKOFF  -> EXITED    user signal            test_a_user_signal_during_backoff_is_exited_without_relaunch
    RUNNING  -> WAITING   a provider's limit     test_a_limit_with_a_reset_waits_for_it_then_goes_on_once,
                                                 test_a_limit_without_a_reset_is_tried_again_with_capped_backoff
    STARTING -> WAITING   a probe refused again  test_a_limit_without_a_reset_is_tried_again_with_capped_backoff
    WAITING  -> STARTING  reset or next try      test_a_limit_with_a_reset_waits_for_it_then_goes_on_once
    RUNNING  -> STOPPING  a TUI at a limit       test_a_tui_showing_a_limit_at_its_prompt_is_stopped_waited_out_and_relaunched
    STOPPING -> WAITING   a TUI at a limit       test_a_tui_showing_a_limit_at_its_prompt_is_stopped_waited_out_and_relaunched
    WAITING  -> EXITED    user signal            test_a_user_signal_while_waiting_on_a_limit_leaves_it_interrupted
    RUNNING  -> EXITED    limit, --on-limit stop test_on_limit_stop_exits_with_the_harness_code_and_one_line
    STARTING -> EXITED    limit, longest wait    test_a_limit_is_given_up_after_the_longest_wait
    (STARTING|RUNNING -> STOPPING, log unwritable: test_an_unwritable_log_while_the_harness_runs_never_stops_it)
"""

import signal
from types import SimpleNamespace

import pytest

from dh_cli import events
from dh_cli.events_text import SUMMARIES, summary
from dh_cli.resume.plan import RelaunchPlan
from dh_cli.supervisor import states
from dh_cli.supervisor.policy import PolicyConfig
from dh_cli.supervisor.runner import FORWARDED, Supervisor
from dh_cli.supervisor.spec import LaunchSpec, RunOptions
from dh_cli.team.live_world import WorldLink
from dh_cli.worlds.local import LocalWorld
from dh_cli.wrappers import get

from .fakes.clock import FakeClock
from .fakes.procs import FakeProcs, Script

S, R, B, X, F, P = (states.STARTING, states.RUNNING, states.BACKOFF, states.EXITED, states.FATAL,
                    states.STOPPING)
FOREVER = Script(runs_for=None)  # runs until signalled


class FakeRelauncher:
    """The relaunch plan (resume/plan.py) as the Supervisor sees it."""

    def __init__(self, complete, env=None, typed=None):
        self.complete, self.env, self.typed, self.planned = complete, env or {}, typed, []
        self.opener = "prompt-1"  # the record that opened the log's current turn
        self.limits: list = []  # what limit() answers, one per attempt that exited (None: no limit)
        self.limit_asked_at: list[float] = []

    def limit(self, session, now):
        self.limit_asked_at.append(now)
        return self.limits.pop(0) if self.limits else None

    def turn_complete(self, session) -> bool:
        return self.complete() if callable(self.complete) else self.complete

    def turn_mark(self, session):
        return self.opener, self.turn_complete(session)

    def plan(self, session, spec, attempt, tools):
        self.planned.append(attempt)
        return RelaunchPlan("resume", session, argv=("--resume", "s1"), env=self.env,
                            typed=self.typed, kept=1)


class FakeWatchers:
    """The live mirror: its last progress is the launch (nothing written since)."""

    def __init__(self, clock):
        self.clock, self.last_progress, self.drains = clock, 0.0, 0

    def before_launch(self, session):
        pass

    def launched(self, session):
        self.last_progress = self.clock.now()

    def knows_id(self):
        return True

    def found_id(self, native_id):
        pass

    def ended(self, session):
        self.drains += 1


def rig(tmp_path, scripts, complete=True, interactive=False, harness="pi", **opts):
    clock = FakeClock()
    procs = FakeProcs(clock, scripts)
    world = LocalWorld(tmp_path / "dh.db")
    session = world.create_session(harness, cwd=str(tmp_path), home=str(tmp_path / "home"), state="starting")
    notices: list[str] = []
    run_opts = RunOptions(cwd=str(tmp_path), env={"PATH": "/bin"}, tool_grace=0, notice=notices.append,
                          **opts)
    spec = LaunchSpec(("/bin/pi",), ("-p", "x"), {"PATH": "/bin"}, str(tmp_path),
                      headless=not interactive, interactive=interactive)
    relauncher = FakeRelauncher(complete)
    supervisor = Supervisor(world, get(harness), session, run_opts, spec, relauncher, procs=procs,
                            clock=clock, watchers=FakeWatchers(clock))
    return SimpleNamespace(clock=clock, procs=procs, world=world, session=session, notices=notices,
                           relauncher=relauncher, supervisor=supervisor, t0=clock.now())


def transitions(r) -> list[tuple[str, str]]:
    return [(e.details["from"], e.details["to"]) for e in r.world.events(r.session.id) if e.type == "state"]


def last_state(r) -> dict:
    return [e.details for e in r.world.events(r.session.id) if e.type == "state"][-1]


def session_state(r) -> str:
    return r.world.get_session(r.session.id).state


def test_a_clean_run_goes_starting_running_exited(tmp_path):
    r = rig(tmp_path, [Script(runs_for=3, rc=0)])
    assert r.supervisor.run(["-p", "x"]) == 0
    assert transitions(r) == [(states.STOPPED, S), (S, R), (R, X)]
    (running,) = [e for e in r.world.events(r.session.id) if e.type == "state" and e.details["to"] == R]
    assert running.details["reason"] == "up for 1 s"
    assert r.clock.now() - r.t0 == pytest.approx(3)
    assert session_state(r) == "finished" and r.world.get_session(r.session.id).attempts == 1
    assert r.procs.spawned[0]["argv"] == ["/bin/pi", "-p", "x"] and not r.procs.spawned[0]["pty"]


def test_running_waits_for_start_secs_and_the_session_row_says_running_throughout(tmp_path):
    seen = []
    r = rig(tmp_path, [Script(runs_for=3, rc=0)], policy=PolicyConfig(start_secs=2))
    r.clock.after(1, lambda: seen.append((r.supervisor.state, session_state(r))))
    r.clock.after(2.5, lambda: seen.append((r.supervisor.state, session_state(r))))
    r.supervisor.run([])
    assert seen == [(S, "running"), (R, "running")]  # "starting": its dh has no lock yet (liveness.py)


def test_a_crash_backs_off_then_resumes_with_the_plan(tmp_path):
    r = rig(tmp_path, [Script(runs_for=5, rc=-9), Script(runs_for=5, rc=0)])
    r.relauncher.complete = lambda: len(r.procs.children) == 2
    assert r.supervisor.run(["-p", "x"]) == 0
    assert transitions(r) == [(states.STOPPED, S), (S, R), (R, B), (B, S), (S, R), (R, X)]
    assert r.relauncher.planned == [2]
    assert r.procs.spawned[1]["argv"] == ["/bin/pi", "--resume", "s1"]
    assert r.procs.spawned[1]["at"] == pytest.approx(r.t0 + 5)  # the first restart is immediate
    assert any("pi killed by SIGKILL; resuming session" in n and "1 finished call(s) kept" in n
               for n in r.notices)
    assert last_state(r)["outcome"] == "finished"


def test_what_a_dead_harness_left_running_is_seized_before_its_pipes_are_drained(tmp_path):
    """The pipes' drain waits for every holder of them to close (up to 5 s on a helper that
    outlives the harness); a tool shell killed with the harness and the command inside it
    that ends meanwhile are then known by their names alone (in CI, Codex's `bash -c
    sleep 3; …` was reported as "bash"). Its parts are frozen at the same look."""
    r = rig(tmp_path, [Script(runs_for=5, rc=-9), Script(runs_for=5, rc=0)])
    r.relauncher.complete = lambda: len(r.procs.children) == 2
    assert r.supervisor.run(["-p", "x"]) == 0
    assert [t.seized for t in r.procs.trackers] == [[False], [False]]
    assert all(t.settled for t in r.procs.trackers)


def test_backoff_doubles_between_restarts(tmp_path):
    crash = Script(runs_for=2, rc=1)
    r = rig(tmp_path, [crash, crash, crash, crash, Script(runs_for=2, rc=0)], complete=False,
            policy=PolicyConfig(max_restarts=10))
    r.relauncher.complete = lambda: len(r.procs.children) == 5
    assert r.supervisor.run([]) == 0
    starts = [s["at"] - r.t0 for s in r.procs.spawned]
    assert starts == pytest.approx([0, 2, 5, 9, 15])  # each ran 2 s, then waited 0, 1, 2, 4 s
    delays = [e.details.get("delay") for e in r.world.events(r.session.id)
              if e.type == "state" and e.details["to"] == B]
    assert delays == [0, 1, 2, 4]


def test_a_harness_that_cannot_start_is_fatal_in_seconds_with_its_stderr(tmp_path):
    bad_flag = Script(runs_for=0.05, rc=2, stderr="Usage: pi [options]\nerror: unknown option '--bogus'\n")
    r = rig(tmp_path, [bad_flag], complete=False)
    assert r.supervisor.run(["--bogus"]) == 2
    assert len(r.procs.spawned) == 4  # the first start and start_retries (3) more
    assert r.clock.now() - r.t0 < 4  # 0 + 1 + 2 s of backoff
    assert R not in [to for _, to in transitions(r)]  # never up for start_secs
    assert transitions(r)[-1] == (S, F) and last_state(r)["failed_start"] is True
    assert session_state(r) == "fatal"
    (line,) = [n for n in r.notices if n.startswith("Error:")]
    assert "giving up on session" in line and "died within 1 s of its start 4 times" in line
    assert "unknown option '--bogus'" in line and f"dh resume {r.session.id}" in line
    assert "\n" not in line
    exited = [e.details for e in r.world.events(r.session.id) if e.type == "exited"]
    assert all("unknown option" in d["stderr_tail"] for d in exited)


def test_too_many_restarts_is_fatal(tmp_path):
    r = rig(tmp_path, [Script(runs_for=2, rc=1)], complete=False, policy=PolicyConfig(max_restarts=2))
    assert r.supervisor.run([]) == 1
    assert len(r.procs.spawned) == 3
    assert transitions(r)[-1] == (R, F)
    assert last_state(r)["reason"] == "crashed after 2 restart(s)"
    (line,) = [n for n in r.notices if n.startswith("Error:")]
    assert "its stderr" not in line  # it did start: the stderr is not why it gave up


def test_a_stall_is_stopping_then_backoff_and_resume(tmp_path):
    r = rig(tmp_path, [FOREVER, Script(runs_for=1, rc=0)], complete=False, stall_timeout=10)
    r.relauncher.complete = lambda: len(r.procs.children) == 2 and r.procs.children[1].rc is not None
    assert r.supervisor.run([]) == 0
    assert transitions(r)[:5] == [(states.STOPPED, S), (S, R), (R, P), (P, B), (B, S)]
    ((pgid, sig, at),) = r.procs.signals
    assert (pgid, sig) == (r.procs.children[0].pgid, signal.SIGTERM)
    assert 10 < at - r.t0 <= 11  # seen at the first tick past the stall timeout
    types = [e.type for e in r.world.events(r.session.id)]
    assert types.index("stall") < types.index("exited")
    backoff = [e.details for e in r.world.events(r.session.id) if e.type == "state" and e.details["to"] == B]
    assert backoff[0]["outcome"] == "hung"
    assert any("pi hung (no progress for 10 s during a turn); resuming" in n for n in r.notices)


def test_no_stall_while_the_turn_is_complete(tmp_path):
    r = rig(tmp_path, [Script(runs_for=30, rc=0)], complete=True, stall_timeout=10)
    assert r.supervisor.run([]) == 0
    assert not r.procs.signals


@pytest.mark.parametrize("sig", FORWARDED)
def test_a_user_signal_is_forwarded_then_exited_without_relaunch(tmp_path, sig):
    r = rig(tmp_path, [FOREVER], complete=False)
    r.clock.after(3, lambda: r.procs.deliver(sig))
    assert r.supervisor.run([]) == 128 + sig
    assert r.procs.signals == [(r.procs.children[0].pgid, sig, r.t0 + 3)]  # the same signal, at once
    assert transitions(r) == [(states.STOPPED, S), (S, R), (R, P), (P, X)]
    assert last_state(r)["outcome"] == "stopped"
    assert len(r.procs.spawned) == 1 and r.relauncher.planned == []
    assert session_state(r) == "stopped"
    assert set(r.procs.trapped) == set(FORWARDED) and r.procs.untrapped
    assert r.procs.ended_descendants == 1  # nothing dh started is left behind


def test_a_user_signal_while_starting_is_stopping_from_starting(tmp_path):
    r = rig(tmp_path, [FOREVER], complete=False)
    r.clock.after(0.2, lambda: r.procs.deliver(signal.SIGINT))
    assert r.supervisor.run([]) == 130
    assert transitions(r) == [(states.STOPPED, S), (S, P), (P, X)]


def test_the_grace_before_sigkill(tmp_path):
    stubborn = Script(runs_for=None, ignores=frozenset({signal.SIGTERM}))
    r = rig(tmp_path, [stubborn], complete=False, stop_wait=5.0)
    r.clock.after(2, lambda: r.procs.deliver(signal.SIGTERM))
    assert r.supervisor.run([]) == 143
    pgid = r.procs.children[0].pgid
    assert r.procs.signals == [(pgid, signal.SIGTERM, r.t0 + 2), (pgid, signal.SIGKILL, r.t0 + 7)]


def test_a_harness_that_goes_within_the_grace_gets_no_sigkill(tmp_path):
    r = rig(tmp_path, [FOREVER], complete=False, stop_wait=5.0)
    r.clock.after(2, lambda: r.procs.deliver(signal.SIGTERM))
    r.supervisor.run([])
    assert [sig for _, sig, _ in r.procs.signals] == [signal.SIGTERM]


def test_a_user_signal_during_backoff_is_exited_without_relaunch(tmp_path):
    crash = Script(runs_for=2, rc=1)
    r = rig(tmp_path, [crash], complete=False, policy=PolicyConfig(max_restarts=10))
    r.clock.after(4.5, lambda: r.procs.deliver(signal.SIGTERM))  # in the 1 s backoff after the 2nd crash
    assert r.supervisor.run([]) == 143
    assert len(r.procs.spawned) == 2 and r.relauncher.planned == [2]
    assert transitions(r)[-2:] == [(R, B), (B, X)]
    assert session_state(r) == "stopped"


def test_restarts_counted_in_the_log_survive_a_new_supervisor(tmp_path):
    r = rig(tmp_path, [Script(runs_for=2, rc=1)], complete=False, policy=PolicyConfig(max_restarts=2))
    for _ in range(2):
        r.world.add_event(r.session.id, "state", {"from": R, "to": B, "reason": "crashed"}, 1)
    again = Supervisor(r.world, get("pi"), r.session, r.supervisor.opts, r.supervisor.spec,
                       r.relauncher, procs=r.procs, clock=r.clock, watchers=FakeWatchers(r.clock))
    assert again.run([]) == 1 and len(r.procs.spawned) == 1  # FATAL at once


def test_an_interactive_relaunch_gets_the_plans_env_and_typed_text(tmp_path):
    r = rig(tmp_path, [Script(runs_for=5, rc=-9), Script(runs_for=5, rc=0)], complete=False,
            interactive=True)
    r.relauncher.env, r.relauncher.typed = {"RESUME_TURN": "1", "PATH": None}, "Continue."
    assert r.supervisor.run([]) == 0
    first, second = r.procs.spawned
    assert first["pty"] and first["typed"] is None and first["env"] == {"PATH": "/bin"}
    assert second["env"] == {"RESUME_TURN": "1"} and second["typed"] == "Continue."


def test_every_event_the_supervisor_writes_is_a_known_type_with_a_readable_line(tmp_path):
    r = rig(tmp_path, [Script(runs_for=0.1, rc=1, stderr="boom"), FOREVER], complete=False,
            stall_timeout=5)
    r.clock.after(30, lambda: r.procs.deliver(signal.SIGTERM))
    r.supervisor.run([])
    written = {e.type for e in r.world.events(r.session.id)}
    assert {"launch", "launched", "state", "exited", "stall"} <= written
    assert written <= set(events.TYPES)
    assert set(events.TYPES) <= set(SUMMARIES)
    for event in r.world.events(r.session.id):
        line = summary(event.type, event.details)
        assert not line.startswith(f"{event.type} {{"), line


def test_an_unwritable_log_while_the_harness_runs_never_stops_it(tmp_path):
    """Disk full mid-attempt (test_disk_full.py with a real process): the RUNNING and
    STOPPING transitions go unjournaled, the harness runs on, the user's stop still works."""
    from dh_cli.errors import LogDbError

    r = rig(tmp_path, [FOREVER], complete=False)
    add_event = r.world.add_event

    def failing(session_id, type_, details=None, attempt=None, phase=None):
        if type_ == "state" and details["to"] in (R, P):
            raise LogDbError("cannot write the log (disk I/O error)")
        return add_event(session_id, type_, details, attempt, phase)
    r.world.add_event = failing
    r.clock.after(30, lambda: r.procs.deliver(signal.SIGTERM))
    assert r.supervisor.run([]) == 143
    assert r.procs.signals[0][1:] == (signal.SIGTERM, r.t0 + 30)
    assert transitions(r) == [(states.STOPPED, S), (P, X)]  # the real from, though unjournaled


def test_the_supervisor_and_the_relaunch_plan_write_events_only_through_their_constructors():
    from pathlib import Path

    import dh_cli

    root = Path(dh_cli.__file__).parent
    for module in ("supervisor/runner.py", "supervisor/launch.py", "resume/plan.py"):
        calls = [line for line in (root / module).read_text().splitlines() if "add_event(" in line]
        assert calls and all("event.type" in line for line in calls), (module, calls)


def test_work_that_ends_within_start_secs_is_exited_from_starting(tmp_path):
    """A quick `-p` turn: done before start_secs, it is EXITED, never counted a failed start."""
    r = rig(tmp_path, [Script(runs_for=0.3, rc=0)], complete=True)
    assert r.supervisor.run([]) == 0
    assert transitions(r) == [(states.STOPPED, S), (S, X)]
    assert last_state(r)["outcome"] == "finished" and session_state(r) == "finished"
    assert len(r.procs.spawned) == 1


def test_a_failed_start_backs_off_from_starting(tmp_path):
    r = rig(tmp_path, [Script(runs_for=0.1, rc=1), Script(runs_for=3, rc=0)], complete=False)
    r.relauncher.complete = lambda: len(r.procs.children) == 2
    assert r.supervisor.run([]) == 0
    assert transitions(r) == [(states.STOPPED, S), (S, B), (B, S), (S, R), (R, X)]
    backoff = [e.details for e in r.world.events(r.session.id) if e.type == "state" and e.details["to"] == B]
    assert backoff[0]["failed_start"] is True


def test_without_supervision_a_crash_is_exited_not_restarted(tmp_path):
    r = rig(tmp_path, [Script(runs_for=3, rc=1)], complete=False, supervise=False)
    assert r.supervisor.run([]) == 1
    assert transitions(r) == [(states.STOPPED, S), (S, R), (R, X)]
    assert last_state(r)["outcome"] == "crashed" and session_state(r) == "crashed"
    assert len(r.procs.spawned) == 1 and r.relauncher.planned == []


def test_a_stall_with_no_restarts_left_is_fatal_from_stopping(tmp_path):
    r = rig(tmp_path, [FOREVER], complete=False, stall_timeout=10, policy=PolicyConfig(max_restarts=0))
    r.clock.after(60, lambda: r.procs.deliver(signal.SIGTERM))  # a backstop: never hangs the test
    assert r.supervisor.run([]) == 128 + signal.SIGTERM  # killed by dh's SIGTERM
    assert transitions(r) == [(states.STOPPED, S), (S, R), (R, P), (P, F)]
    assert last_state(r)["outcome"] == "hung" and session_state(r) == "fatal"
    assert len(r.procs.spawned) == 1


# a harness that lingers after its turn (OpenCode `run`: OpenCodeWrapper.linger_after_turn) ----
def test_a_lingering_harness_is_stopped_once_its_turn_is_in_the_log(tmp_path):
    r = rig(tmp_path, [FOREVER], complete=True, harness="opencode")
    grace = r.supervisor.wrapper.linger_after_turn
    watchers = r.supervisor.watchers

    def logged_its_turn():
        watchers.last_progress, r.relauncher.opener = r.clock.now(), "prompt-2"

    r.clock.after(2, logged_its_turn)
    r.clock.after(120, lambda: r.procs.deliver(signal.SIGTERM))  # a backstop: never hangs the test
    assert r.supervisor.run([]) == 0  # the turn is done: nothing to resume, nothing to report
    ((pgid, sig, at),) = r.procs.signals
    assert (pgid, sig) == (r.procs.children[0].pgid, signal.SIGTERM)
    assert 2 + grace < at - r.t0 <= 2 + grace + 1  # at the first tick past the grace
    assert transitions(r) == [(states.STOPPED, S), (S, R), (R, P), (P, X)]
    stopping = [e.details for e in r.world.events(r.session.id) if e.type == "state" and e.details["to"] == P]
    assert stopping[0]["reason"] == "finished its turn but did not exit"
    assert last_state(r)["outcome"] == "finished" and session_state(r) == "finished"
    types = [e.type for e in r.world.events(r.session.id)]
    assert types.index("linger") < types.index("exited")
    assert any("opencode finished its turn but did not exit within" in n for n in r.notices)
    assert len(r.procs.spawned) == 1 and r.relauncher.planned == []


@pytest.mark.parametrize("case", ["turn not complete", "nothing logged by this attempt", "interactive",
                                  "only the turn complete at the launch"])
def test_a_harness_is_not_stopped_as_lingering_unless_it_is(tmp_path, case):
    """The last case: the harness logged records (OpenCode re-logs the rows of an imported
    session as it starts), but not yet a turn of its own; the complete turn is the last run's."""
    r = rig(tmp_path, [FOREVER], complete=case != "turn not complete", harness="opencode",
            interactive=case == "interactive")
    watchers = r.supervisor.watchers

    def logged():
        watchers.last_progress = r.clock.now()
        if case != "only the turn complete at the launch":
            r.relauncher.opener = "prompt-2"

    if case != "nothing logged by this attempt":
        r.clock.after(2, logged)
    r.clock.after(60, lambda: r.procs.deliver(signal.SIGTERM))  # the user ends it
    assert r.supervisor.run([]) == 143
    assert r.procs.signals == [(r.procs.children[0].pgid, signal.SIGTERM, r.t0 + 60)]
    assert not [e for e in r.world.events(r.session.id) if e.type == "linger"]


# the world's lease (worlds/live_world.py WorldLink over tenure.py and shipper.py) ----------
class FakeTenure:
    """tenure.Tenure as WorldLink reads it: the epoch held, `lost` once it moved."""

    def __init__(self):
        self.epoch, self.lost, self.expired, self.stopped = 3, None, False, []

    def stop(self, release=True):
        self.stopped.append(release)

    def lapse(self):
        raise AssertionError("only a hand-back lapses the lease")


class FakeShipper:
    def __init__(self):
        self.fenced, self.stops = None, 0

    def stop(self):
        self.stops += 1
        return True


class LinkOverFakes(WorldLink):
    """The real WorldLink (taken_over, may_relaunch, detach) on a fake lease and shipper."""

    def attach(self, db_path, session_id):
        self.session_id, self.handing_back, self._previous = session_id, False, None
        self.tenure, self.shipper = FakeTenure(), FakeShipper()


TAKEN = "session s1 was taken over by dh on b (epoch 3 -> 4)"


def test_a_takeover_stops_the_harness_and_this_dh_never_writes_the_world_again(tmp_path):
    link = LinkOverFakes("postgres", "postgresql://fake/dh")
    r = rig(tmp_path, [FOREVER], complete=False, link=link)
    r.clock.after(4, lambda: setattr(link.tenure, "lost", {"reason": TAKEN}))  # the epoch moved
    r.clock.after(120, lambda: r.procs.deliver(signal.SIGTERM))  # a backstop: never hangs the test
    assert r.supervisor.run([]) == 4  # as SessionLocked: another holder has it
    assert r.procs.signals == [(r.procs.children[0].pgid, signal.SIGTERM, r.t0 + 4)]
    assert transitions(r) == [(states.STOPPED, S), (S, R), (R, P), (P, B)]
    stopping = [e.details for e in r.world.events(r.session.id) if e.type == "state" and e.details["to"] == P]
    assert stopping[0]["reason"] == "another machine runs the session now"
    assert len(r.procs.spawned) == 1 and r.relauncher.planned == []  # no relaunch here
    (lost,) = [e.details for e in r.world.events(r.session.id) if e.type == "lease_lost"]
    assert lost["reason"] == TAKEN
    assert any(n == f"dh: not relaunching session {r.session.id}: {TAKEN}" for n in r.notices)
    assert link._epoch() is None  # the shipper gets no epoch: nothing more reaches the world
    assert link.tenure.stopped == [False]  # and the new holder's lease is not released
    assert link.shipper.stops == 1


def test_a_lease_that_could_not_be_renewed_lets_the_harness_run_but_not_relaunch(tmp_path):
    link = LinkOverFakes("postgres", "postgresql://fake/dh")
    r = rig(tmp_path, [Script(runs_for=8, rc=-9)], complete=False, link=link)
    r.clock.after(3, lambda: setattr(link.tenure, "expired", True))  # the server is unreachable
    assert r.supervisor.run([]) == 4
    assert r.procs.signals == []  # it ran on until it died by itself
    assert transitions(r) == [(states.STOPPED, S), (S, R), (R, B)]
    assert len(r.procs.spawned) == 1 and r.relauncher.planned == []
    (lost,) = [e.details for e in r.world.events(r.session.id) if e.type == "lease_lost"]
    assert "could not be renewed" in lost["reason"]
    assert link.tenure.stopped == [True]  # not lost: released (lapses anyway when unreachable)


def test_a_held_lease_relaunches_as_without_a_world(tmp_path):
    link = LinkOverFakes("postgres", "postgresql://fake/dh")
    r = rig(tmp_path, [Script(runs_for=5, rc=-9), Script(runs_for=5, rc=0)], link=link)
    r.relauncher.complete = lambda: len(r.procs.children) == 2
    assert r.supervisor.run([]) == 0
    assert transitions(r) == [(states.STOPPED, S), (S, R), (R, B), (B, S), (S, R), (R, X)]
    assert not [e for e in r.world.events(r.session.id) if e.type == "lease_lost"]


# ------------------------------------------------------------------ a provider's limit

W = states.WAITING


def usage_limit(reset_at=None):
    from dh_cli.wrappers.limits import limit

    return limit("five_hour", "5-hour", reset_at, "transcript: test", "You've hit your session limit")


def events_of(r, kind):
    return [e.details for e in r.world.events(r.session.id) if e.type == kind]


def test_a_limit_with_a_reset_waits_for_it_then_goes_on_once(tmp_path):
    r = rig(tmp_path, [Script(runs_for=5, rc=1), Script(runs_for=5, rc=0)], complete=False,
            policy=PolicyConfig(max_restarts=0, limit_margin=5))
    reset = r.clock.wall() + 5 + 3600  # an hour after the harness gives up
    r.relauncher.limits = [usage_limit(reset)]
    seen = []
    r.clock.after(100, lambda: seen.append((r.supervisor.state, session_state(r))))
    assert r.supervisor.run(["-p", "x"]) == 0
    assert seen == [(W, "waiting")]
    assert transitions(r) == [(states.STOPPED, S), (S, R), (R, W), (W, S), (S, R), (R, X)]
    assert r.procs.spawned[1]["at"] == pytest.approx(r.t0 + 5 + 3600 + 5)  # reset + margin
    assert r.relauncher.planned == [2] and r.procs.spawned[1]["argv"] == ["/bin/pi", "--resume", "s1"]
    (limit,) = events_of(r, "limit")
    assert limit["which"] == "five_hour" and limit["reset_at"] == reset
    waiting = [d for d in events_of(r, "state") if d["to"] == W][0]
    assert waiting["delay"] == pytest.approx(3605) and waiting["outcome"] == "limited"
    assert any(n.startswith("dh: pi hit its usage limit (5-hour); going on at ") and "in 1 h 0 min" in n
               and n.endswith("· Ctrl-C stops") for n in r.notices)
    assert session_state(r) == "finished"  # max_restarts=0: the wait was no restart


def test_a_limit_without_a_reset_is_tried_again_with_capped_backoff(tmp_path):
    refused = Script(runs_for=0.2, rc=1)  # a probe the service refuses at once
    r = rig(tmp_path, [Script(runs_for=5, rc=1), refused, refused, refused, refused, refused,
                       Script(runs_for=5, rc=0)], complete=False,
            policy=PolicyConfig(max_restarts=0, start_retries=0, limit_spacing=60, limit_cap=300))
    r.relauncher.limits = [usage_limit()] * 6
    assert r.supervisor.run([]) == 0
    starts = [s["at"] - r.t0 for s in r.procs.spawned]
    gaps = [b - a for a, b in zip(starts, starts[1:])]
    assert all(gap >= 60 for gap in gaps)  # never two launches within limit_spacing
    waits = [d["delay"] for d in events_of(r, "state") if d["to"] == W]
    assert waits == [60, 120, 240, 300, 300, 300]  # doubled from limit_spacing, capped
    assert len(r.procs.spawned) == 7 and len(events_of(r, "limit")) == 6
    assert not any(d["to"] in (B, F) for d in events_of(r, "state"))  # neither a restart nor a failed start


def test_a_limit_is_given_up_after_the_longest_wait(tmp_path):
    refused = Script(runs_for=0.2, rc=1)
    r = rig(tmp_path, [Script(runs_for=5, rc=1), refused, refused], complete=False,
            policy=PolicyConfig(limit_spacing=60, limit_max_wait=200))
    r.relauncher.limits = [usage_limit()] * 3
    assert r.supervisor.run([]) == 1  # the harness's code
    assert [d["delay"] for d in events_of(r, "state") if d["to"] == W] == [60, 120]  # 60+120+240 > 200
    assert transitions(r)[-1] == (S, X) and session_state(r) == "limited"
    assert any("the longest allowed" in n and f"dh resume {r.session.id} --at-reset" in n for n in r.notices)


def test_on_limit_stop_exits_with_the_harness_code_and_one_line(tmp_path):
    r = rig(tmp_path, [Script(runs_for=5, rc=1)], complete=False, on_limit="stop")
    r.relauncher.limits = [usage_limit(r.clock.wall() + 600)]
    assert r.supervisor.run([]) == 1
    assert len(r.procs.spawned) == 1 and transitions(r)[-1] == (R, X)
    limit_lines = [n for n in r.notices if n.startswith("dh: ")]
    assert len(limit_lines) == 1 and "usage limit (5-hour)" in limit_lines[0]
    assert "--on-limit stop" in limit_lines[0] and session_state(r) == "limited"


def test_a_user_signal_while_waiting_on_a_limit_leaves_it_interrupted(tmp_path):
    r = rig(tmp_path, [Script(runs_for=5, rc=1)], complete=False)
    r.relauncher.limits = [usage_limit(r.clock.wall() + 5 + 1800)]
    r.clock.after(65, lambda: r.procs.deliver(signal.SIGINT))  # 60 s into the wait
    assert r.supervisor.run([]) == 130
    assert len(r.procs.spawned) == 1 and r.relauncher.planned == []
    assert transitions(r)[-2:] == [(R, W), (W, X)] and session_state(r) == "interrupted"
    assert r.clock.now() - r.t0 == pytest.approx(65)  # woken at once, not at the reset


def test_a_killed_or_signalled_harness_is_never_asked_about_a_limit(tmp_path):
    r = rig(tmp_path, [Script(runs_for=5, rc=-9), Script(runs_for=5, rc=0)])
    r.relauncher.complete = lambda: len(r.procs.children) == 2
    assert r.supervisor.run([]) == 0
    # only the attempt that exited by itself (at 10 s) was looked at for a limit
    assert r.relauncher.limit_asked_at == [r.clock.epoch + r.t0 + 10]
    assert transitions(r)[2] == (R, B)


def test_a_tui_showing_a_limit_at_its_prompt_is_stopped_waited_out_and_relaunched(tmp_path):
    r = rig(tmp_path, [FOREVER, Script(runs_for=5, rc=0)], complete=True, interactive=True,
            policy=PolicyConfig(limit_spacing=60))
    watchers = r.supervisor.watchers
    r.clock.after(2, lambda: setattr(watchers, "last_progress", r.clock.now()))  # the limit row logged
    r.relauncher.limits = [usage_limit()]
    assert r.supervisor.run([]) == 0
    assert transitions(r)[:6] == [(states.STOPPED, S), (S, R), (R, P), (P, W), (W, S), (S, R)]
    assert r.procs.children[0].received == [signal.SIGTERM]
    stopped = [d for d in events_of(r, "state") if d["to"] == P][0]
    assert stopped["reason"] == "usage limit (5-hour) shown at its prompt"
    assert r.procs.spawned[0]["at"] - r.t0 == 0 and r.procs.spawned[1]["pty"]
    assert r.procs.spawned[1]["at"] - r.t0 == pytest.approx(5 + 60)  # 3 s still after the row, then the wait
    assert r.relauncher.planned == [2] and session_state(r) == "finished"


def test_a_tui_is_left_at_its_prompt_with_on_limit_stop(tmp_path):
    r = rig(tmp_path, [Script(runs_for=30, rc=0)], complete=True, interactive=True, on_limit="stop")
    watchers = r.supervisor.watchers
    r.clock.after(2, lambda: setattr(watchers, "last_progress", r.clock.now()))
    r.relauncher.limits = [None, None]
    assert r.supervisor.run([]) == 0
    assert r.procs.children[0].received == [] and len(r.procs.spawned) == 1
    assert r.relauncher.limit_asked_at == [r.clock.epoch + r.t0 + 30]  # only once it exited
