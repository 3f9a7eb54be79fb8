"""The supervisor: launch the harness, mirror it live, and when an attempt ends decide —
through the restart policy — whether the work is done or the session must be resumed.

Every intent is journaled before it is acted on and every outcome after (launch → launched →
exited → state), so the log can always say why a session was relaunched, and the restart
count survives dh itself being restarted. Each change of the state machine (states.py) goes
through `_transition`, which writes its real from/to and the session's state together.

The Supervisor is handed what it does not decide itself: the relaunch plan (a `relauncher`
with `turn_complete(session)`, `turn_mark(session)` and `plan(session, spec, attempt, tools)`, see
dh_cli/resume/plan.py, so this package imports nothing from resume/), the processes and the
clock (seam.py: `Procs`, `Clock`) and the attempt's watchers (watchers.py)."""

from __future__ import annotations

import signal
import sqlite3
from dataclasses import replace
from pathlib import Path

from .. import events
from ..errors import LogDbError
from ..models import Session
from ..util import scrub, without_password
from ..wrappers.base import Wrapper
from ..wrappers.grants import launch_grant
from ..worlds.log import Log
from . import states
from .attempts import Attempt, classify, exit_signal, why_ended  # noqa: F401 - re-exported
from .policy import Decision, RestartPolicy
from .waiting import LimitWait, limit_words
from ..procs import drain
from .seam import Clock, Procs
from .spec import LaunchSpec, RunOptions  # noqa: F401 - re-exported
from .watchers import AttemptWatchers

FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
TICK = 1.0  # the supervisor sleeps this long at most between checks (exit and signals wake it)
SNAPSHOT_EVERY = 2.0  # seconds between looks at the harness's tool processes
TAIL_CHARS = 300  # of the harness's stderr, in the one error line of a FATAL


class Supervisor(LimitWait):
    def __init__(self, world: Log, wrapper: Wrapper, session: Session, opts: RunOptions,
                 spec: LaunchSpec, relauncher, procs: Procs | None = None,
                 clock: Clock | None = None, watchers=None):
        self.world, self.wrapper, self.opts, self.spec = world, wrapper, opts, spec
        self.session, self.relauncher = session, relauncher
        self.procs, self.clock = procs or Procs(), clock or Clock()
        self.watchers = watchers or AttemptWatchers(world, wrapper, opts, spec)
        self.policy = RestartPolicy(opts.policy, restarts=self._restarts_so_far())
        self.state = states.STOPPED
        self.user_signal: int | None = None
        self.child = None
        self.wake_fd: int | None = None
        self.attempt_env: dict[str, str | None] = {}  # the wrapper's changes for the next attempt
        self.attempt_typed = (None, None)  # text to type into the next attempt's TUI, when
        self.attempt_note: str | None = None  # the wrapper's line for the user at the relaunch
        self.turn_at_launch = None  # the log's turn mark when this attempt started (_lingering)
        self.guardian: int | None = None  # told of the harness's parts, to end if dh dies
        self.limits_met, self.limit_waited = 0, 0.0  # limits in a row, and the seconds waited on them
        self.limit_looked_at = None  # the progress mark a TUI's limit was last looked for at

    def _restarts_so_far(self) -> int:
        """The restart counter lives in the log, so it survives dh itself restarting."""
        count = 0
        for event in self.world.events(self.session.id):
            if event.type == events.STATE and event.details.get("to") == states.BACKOFF:
                count += 1
            elif event.type == events.STATE and event.details.get("reset"):
                count = 0
        return count

    # the state machine --------------------------------------------------------------------
    def _transition(self, to: str, reason: str, attempt: int | None = None,
                    outcome: str | None = None, **more) -> None:
        """Enter `to`: the event names the state left, and the session row gets the
        session-state word of the same constant (states.session_state)."""
        extra = {"outcome": outcome, **more} if outcome else more
        event, before = events.state(self.state, to, reason, **extra), self.state
        self.state = to
        if before in states.ATTEMPT_STATES and to in states.ATTEMPT_STATES:
            self._while_running(lambda: self._write(event, attempt))
            return  # the session row says "running" throughout (states.session_state)
        self._write(event, attempt)
        self.world.update_session(self.session.id, state=states.session_state(to, outcome))

    def _while_running(self, write) -> None:
        """A write while the harness runs (STARTING -> RUNNING -> STOPPING) must never stop
        it: with the log unwritable (disk full, test_disk_full.py) the live mirror says so
        and retries, and this one transition goes unjournaled."""
        try:
            write()
        except (LogDbError, sqlite3.Error, OSError):
            pass

    # the loop -----------------------------------------------------------------------------
    def run(self, argv: list[str]) -> int:
        self.guardian = self.procs.guardian() if self.spec.interactive else None  # before the subreaper flag
        try:
            return self._run(argv)
        finally:
            self.procs.dismiss_guardian(self.guardian)

    def _remember_world(self, link) -> None:
        """A later plain `dh resume` asks this world first (team/returning.py)."""
        remember = getattr(self.world, "remember_world", None)
        if remember is not None:
            remember(self.session.id, link.world, without_password(link.url))

    def _run(self, argv: list[str]) -> int:
        self.procs.become_subreaper()
        self.wake_fd, untrap = self.procs.trap(FORWARDED, self._on_signal)
        try:
            if self.opts.link:
                self._remember_world(self.opts.link)
                self.opts.link.attach(self.world.path, self.session.id)
            return self._loop(argv)
        finally:
            if self.opts.link and hasattr(self.opts.link, "shipper"):
                self.opts.link.detach()
            untrap()
            if hasattr(self.child, "restore"):
                self.child.restore()  # on every way out, even an error mid-attempt
            self.procs.end_descendants()

    def _loop(self, argv: list[str]) -> int:
        while True:
            attempt = self._run_attempt(argv)
            limit = self._limit_met(attempt)
            if limit is not None:
                code = self._wait_out(attempt, limit)
                if code is not None:
                    return code
                argv = self._relaunch(attempt, "limited", limit)
                continue
            self.limits_met, self.limit_waited = 0, 0.0
            outcome = classify(attempt, self.relauncher.turn_complete(self.session), self.spec.interactive)
            decision = self.policy.after_exit(outcome, attempt.ran_for)
            ended = {"outcome": outcome, "why": why_ended(attempt, outcome)}
            if decision.state == states.EXITED or not self.opts.supervise:
                self._transition(states.EXITED, decision.reason, attempt.number, **ended)
                return self._final_code(attempt, outcome)
            if decision.state == states.FATAL:
                self._transition(states.FATAL, decision.reason, attempt.number, **ended,
                                 failed_start=decision.failed_start)
                return self._fatal(attempt, decision)
            self._transition(states.BACKOFF, decision.reason, attempt.number, **ended,
                             delay=decision.delay, failed_start=decision.failed_start)
            if self.opts.link and not self.opts.link.may_relaunch():
                return self._not_mine(attempt)
            if self._sleep(decision.delay):
                return self._stopped_in_backoff(attempt)
            argv = self._relaunch(attempt, outcome)

    def _run_attempt(self, argv: list[str]) -> Attempt:
        number = self.session.attempts + 1
        self.world.update_session(self.session.id, attempts=number)
        self.session = replace(self.session, attempts=number)
        grant = launch_grant(self.wrapper, argv, self.spec.env, needed=True)
        self._write(events.launch(self.spec.argv(argv), grant.to_dict()), number)
        attempt = Attempt(number)
        child = self._spawn(argv)
        self._write(events.launched(child.pid, child.create_time), number)
        self._transition(states.STARTING, "relaunch" if number > 1 else "launch", number)
        self._watch(child, attempt)
        self._write(events.exited(attempt.rc, exit_signal(attempt.rc), attempt.stalled,
                                  attempt.user_signal, attempt.ran_for, attempt.tools,
                                  attempt.parts_ended, self._failed_start_tail(attempt)), number)
        return attempt

    def _attempt_env(self) -> dict[str, str]:
        env = dict(self.spec.env)
        for name, value in self.attempt_env.items():
            if value is None:
                env.pop(name, None)
            else:
                env[name] = value
        return env

    def _spawn(self, argv: list[str]):
        env, self.attempt_env = self._attempt_env(), {}
        self.watchers.before_launch(self.session)
        if self.wrapper.linger_after_turn is not None and self.spec.headless:
            self.turn_at_launch = self.relauncher.turn_mark(self.session)
        typed, ready = self.attempt_typed
        self.attempt_typed = (None, None)
        self.child = self.procs.spawn(self.spec.argv(argv), env, self.spec.cwd, pty=self.spec.interactive,
                                      on_line=self._on_output, typed=typed, ready=ready)
        self.started = self.clock.now()
        self.watchers.launched(self.session)
        return self.child

    def _on_output(self, line: bytes) -> None:
        if not self.watchers.knows_id() and (native := self.wrapper.id_from_output(line)):
            self.watchers.found_id(native)

    def _watch(self, child, attempt: Attempt) -> None:
        home = Path(self.session.home)
        tracker = self.procs.tracker(child.pid, lambda command: self.wrapper.harness_part(command, home),
                                     self.wrapper.tool_command,
                                     lambda pid, created: self.procs.guard_part(self.guardian, pid, created))
        snapped, stopping = -SNAPSHOT_EVERY, False
        while (rc := child.wait_exit(self._tick(), self.wake_fd)) is None:
            now = self.clock.now()
            if self.state == states.STARTING and now - self.started >= self.opts.policy.start_secs:
                self._transition(states.RUNNING, f"up for {self.opts.policy.start_secs:g} s", attempt.number)
            if now - snapped >= SNAPSHOT_EVERY:
                tracker.snapshot()  # which tool commands run, whatever their process group
                snapped = now
            if not stopping:
                stopping = self._check(child, attempt)
        self._ended(child, attempt, rc, tracker)

    def _tick(self) -> float:
        """Until the next check: TICK, or sooner when start_secs ends before it."""
        if self.state != states.STARTING:
            return TICK
        return max(0.0, min(TICK, self.started + self.opts.policy.start_secs - self.clock.now()))

    def _check(self, child, attempt: Attempt) -> bool:
        """One look at a running attempt; True once dh has stopped it (then no more looks)."""
        if self.user_signal:
            self._stop(child, self.user_signal, f"dh got {signal.Signals(self.user_signal).name}", attempt)
        elif self.opts.link and self.opts.link.taken_over():
            self._stop(child, signal.SIGTERM, "another machine runs the session now", attempt)
        elif self._stalled(child):
            attempt.stalled = True
            self._write(events.stall(self.opts.stall_timeout), attempt.number)
            self._stop(child, signal.SIGTERM, "stalled", attempt)
        elif self._lingering(child):
            self._end_lingering(child, attempt)
        elif (limit := self._limit_at_prompt(child)) is not None:
            attempt.limit = limit
            self._stop(child, signal.SIGTERM, f"{limit_words(limit)} shown at its prompt", attempt)
        else:
            return False
        return True

    def _ended(self, child, attempt: Attempt, rc: int, tracker) -> None:
        attempt.rc, attempt.ran_for = rc, self.clock.now() - self.started
        attempt.user_signal = self.user_signal
        tracker.seize()  # before the pipes are drained, which can wait seconds on a helper
        child.finish()
        attempt.stderr_tail = child.stderr_tail()
        grace = 0.5 if self.user_signal else self.opts.tool_grace
        attempt.tools = [o.to_dict() for o in tracker.settle(grace)]
        attempt.parts_ended = tracker.ended_parts
        self.session = self.watchers.ended(self.session) or self.session

    def _idle(self, child) -> float:
        return self.clock.now() - max(self.watchers.last_progress, child.last_output)

    def _stalled(self, child) -> bool:
        timeout = self.opts.stall_timeout
        if not timeout:
            return False
        return self._idle(child) > timeout and not self.relauncher.turn_complete(self.session)

    def _lingering(self, child) -> bool:
        """A headless harness whose wrapper says it may not exit after its turn (OpenCode
        `run`, see OpenCodeWrapper.linger_after_turn): this attempt logged records, nothing
        has come since for that long, and the log's current turn is complete and is not the
        one that was complete at the launch. OpenCode `run --session` of an imported session
        first re-logs that session's rows (the import rewrote them) and writes the new
        prompt seconds later (6.6 s after its launch here): in CI dh saw the last run's
        complete turn, ended it before the prompt was written, and the turn was lost."""
        grace = self.wrapper.linger_after_turn
        if grace is None or not self.spec.headless or self.watchers.last_progress <= self.started:
            return False
        if self._idle(child) <= grace:
            return False
        mark = self.relauncher.turn_mark(self.session)
        return mark is not None and mark[1] and mark != self.turn_at_launch

    def _end_lingering(self, child, attempt: Attempt) -> None:
        grace = self.wrapper.linger_after_turn
        self._write(events.linger(grace), attempt.number)
        self.opts.notice(f"dh: {self.wrapper.name} finished its turn but did not exit within "
                         f"{grace:g} s; dh ends it (the turn is in the log: dh log show "
                         f"{self.session.id})")
        self._stop(child, signal.SIGTERM, "finished its turn but did not exit", attempt)

    def _stop(self, child, sig: int, reason: str, attempt: Attempt) -> None:
        """STOPPING: signal the harness's group; SIGKILL it if it has not gone after stop_wait."""
        self._transition(states.STOPPING, reason, attempt.number)
        self.procs.signal_group(child.pgid, sig)
        if child.wait(timeout=self.opts.stop_wait) is None:
            self.procs.signal_group(child.pgid, signal.SIGKILL)

    def _on_signal(self, signum, frame) -> None:
        self.user_signal = self.user_signal or signum

    # after an attempt ---------------------------------------------------------------------
    def _relaunch(self, attempt: Attempt, outcome: str, limit=None) -> list[str]:
        plan = self.relauncher.plan(self.session, self.spec, attempt.number + 1, attempt.tools)
        self.session = plan.session
        self.attempt_env, self.attempt_typed = dict(plan.env), (plan.typed, plan.ready)
        self.attempt_note = plan.note  # the wrapper's line, shown under the relaunch notice
        if hasattr(self.child, "clear"):
            self.child.clear()  # the relaunched TUI draws on a clean screen, under the notice
        self._notice_resume(attempt, outcome, plan.kept, limit)
        return list(plan.argv)

    def _notice_resume(self, attempt: Attempt, outcome: str, kept: int, limit=None) -> None:
        sig = exit_signal(attempt.rc)
        if limit is not None:
            how = f"waited out its {limit_words(limit)}"
        elif outcome == "hung":
            how = f"hung (no progress for {self.opts.stall_timeout:g} s during a turn)"
        else:
            how = f"killed by {signal.Signals(sig).name}" if sig else f"exited with code {attempt.rc}"
        self.opts.notice(f"dh: {self.wrapper.name} {how}; resuming session {self.session.id} "
                         f"(attempt {attempt.number + 1}, {kept} finished call(s) kept)")
        if self.attempt_note:
            self.opts.notice(f"dh: {self.attempt_note}")
            self.attempt_note = None

    def _sleep(self, delay: float) -> bool:
        """Back off (woken at once by a signal); True when the user stopped dh meanwhile."""
        deadline = self.clock.now() + delay
        fds = [self.wake_fd] if self.wake_fd is not None else []
        while not self.user_signal and (left := deadline - self.clock.now()) > 0:
            for fd in self.clock.wait_fds(fds, left):
                drain(fd)
        return bool(self.user_signal)

    def _stopped_in_backoff(self, attempt: Attempt) -> int:
        name = signal.Signals(self.user_signal).name
        self._transition(states.EXITED, "stopped", attempt.number, outcome="stopped",
                         why=f"dh got {name} while waiting to restart")
        return 128 + self.user_signal

    def _final_code(self, attempt: Attempt, outcome: str) -> int:
        if attempt.user_signal:
            return 128 + attempt.user_signal
        sig = exit_signal(attempt.rc)
        if sig and outcome == "finished":
            self.opts.notice(f"dh: {self.wrapper.name} was killed by {signal.Signals(sig).name} after "
                             f"its turn completed; nothing to resume (session {self.session.id})")
            return 0
        return 128 + sig if sig else (attempt.rc or 0)

    def _fatal(self, attempt: Attempt, decision: Decision) -> int:
        """The one error line of a session dh gives up on (with what the harness said last
        on stderr when it could not start), and the harness's own exit code."""
        line = f"Error: giving up on session {self.session.id}: {self.wrapper.name} {decision.reason}"
        tail = self._failed_start_tail(attempt)
        if tail:
            line += f"; its stderr ended: {tail}"
        self.opts.notice(f"{line} (hint: resume it by hand with: dh resume {self.session.id})")
        sig = exit_signal(attempt.rc)
        return 128 + sig if sig else (attempt.rc or 1)

    def _failed_start_tail(self, attempt: Attempt) -> str | None:
        """The end of the stderr of an attempt that died before start_secs, on one line."""
        if attempt.ran_for >= self.opts.policy.start_secs or not attempt.stderr_tail:
            return None
        words = " / ".join(line.strip() for line in attempt.stderr_tail.splitlines() if line.strip())
        return scrub(words[-TAIL_CHARS:]) or None

    def _not_mine(self, attempt: Attempt) -> int:
        """The world's lease is another's now (or could not be renewed): no relaunch here."""
        why = self.opts.link.taken_over() or "its lease in the world could not be renewed in time"
        self._write(events.lease_lost(why), attempt.number)
        self.opts.notice(f"dh: not relaunching session {self.session.id}: {why}")
        return 4  # as SessionLocked: another holder has it

    def _write(self, event: events.Event, attempt: int | None = None) -> None:
        # argv, resume plans and tool command lines: never a secret in the log
        self.world.add_event(self.session.id, event.type, scrub(event.details), attempt, event.phase)

