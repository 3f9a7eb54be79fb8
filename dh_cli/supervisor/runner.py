"""The supervisor: launch the harness, mirror it live, and when an attempt ends decide —
through the restart policy — whether the work is done or the session must be resumed.

Every intent is journaled before it is acted on and every outcome after (launch → launched →
exited → state), so the log can always say why a session was relaunched, and the restart
count survives dh itself being restarted."""

from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..models import Session
from ..util import scrub
from ..resume.prepare import current_turn, prepare_resume
from ..resume.replay import unlogged_text
from ..wrappers.base import Wrapper
from . import states
from .live import LiveMirror
from .policy import PolicyConfig, RestartPolicy
from .procs import PipeChild, become_subreaper
from .tools import ToolTracker, end_descendants

FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
TICK = 1.0  # the supervisor sleeps this long at most between checks (exit and signals wake it)
SNAPSHOT_EVERY = 2.0  # seconds between looks at the harness's tool processes


@dataclass
class RunOptions:
    binary: list[str]  # how to exec the harness (e.g. ["/usr/bin/claude"])
    args: list[str]  # the user's args (plus what dh added at launch)
    cwd: str
    env: dict[str, str]
    interactive: bool = False
    headless: bool = True
    stall_timeout: float | None = None
    stop_wait: float = 5.0  # SIGTERM -> SIGKILL grace when dh stops the harness
    tool_grace: float = 3.0
    replay: dict = field(default_factory=dict)
    continue_prompt: str = "Continue from where you left off."
    policy: PolicyConfig = field(default_factory=PolicyConfig)
    supervise: bool = True
    notice: callable = print  # one-line messages to the user (stderr)
    link: object = None  # a live world (worlds/live_world.py WorldLink): lease and replication


@dataclass
class Attempt:
    number: int
    rc: int | None = None
    ran_for: float = 0.0
    stalled: bool = False
    user_signal: int | None = None
    tools: list[dict] = field(default_factory=list)


def exit_signal(rc: int | None) -> int | None:
    return -rc if rc is not None and rc < 0 else None


def classify(attempt: Attempt, turn_complete: bool, interactive: bool) -> str:
    """finished | stopped | crashed | hung."""
    if attempt.user_signal:
        return "stopped"
    if attempt.stalled:
        return "hung"
    if exit_signal(attempt.rc):
        # A headless harness killed after its final answer was written has nothing left to
        # do: resuming it would only pay for a fresh model call. An interactive one is
        # brought back (a resume without a prompt costs nothing) so the user can go on.
        return "finished" if turn_complete and not interactive else "crashed"
    if interactive or turn_complete or attempt.rc == 0:
        return "finished"  # the harness chose to exit (a failing code is passed through)
    return "crashed"


class Supervisor:
    def __init__(self, world, wrapper: Wrapper, session: Session, opts: RunOptions):
        self.world, self.wrapper, self.opts = world, wrapper, opts
        self.session = session
        self.policy = RestartPolicy(opts.policy, restarts=self._restarts_so_far())
        self.user_signal: int | None = None
        self.child = None
        self.wake_fd: int | None = None

    def _restarts_so_far(self) -> int:
        """The restart counter lives in the log, so it survives dh itself restarting."""
        count = 0
        for event in self.world.events(self.session.id):
            if event.type == "state" and event.details.get("to") == states.BACKOFF:
                count += 1
            elif event.type == "state" and event.details.get("reset"):
                count = 0
        return count

    # the loop -----------------------------------------------------------------------------
    def run(self, argv: list[str]) -> int:
        become_subreaper()
        previous = {s: signal.signal(s, self._on_signal) for s in FORWARDED}
        self.wake_fd, wake_w = os.pipe()
        os.set_blocking(self.wake_fd, False)
        os.set_blocking(wake_w, False)
        old_wakeup = signal.set_wakeup_fd(wake_w)
        try:
            if self.opts.link:
                self.opts.link.attach(self.world.path, self.session.id)
            return self._loop(argv)
        finally:
            if self.opts.link and hasattr(self.opts.link, "shipper"):
                self.opts.link.detach()
            signal.set_wakeup_fd(old_wakeup)
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            os.close(self.wake_fd)
            os.close(wake_w)
            end_descendants(exclude=set())

    def _loop(self, argv: list[str]) -> int:
        while True:
            attempt = self._run_attempt(argv)
            outcome = classify(attempt, self._turn_complete(), self.opts.interactive)
            decision = self.policy.after_exit(outcome, attempt.ran_for)
            self._event("state", {"from": states.RUNNING, "to": decision.state, "reason": decision.reason,
                                  "outcome": outcome, "delay": decision.delay}, attempt.number)
            if decision.state == states.EXITED or not self.opts.supervise:
                return self._final_code(attempt, outcome)
            if decision.state == states.FATAL:
                return self._fatal(attempt, decision.reason)
            if self.opts.link and not self.opts.link.may_relaunch():
                return self._not_mine(attempt)
            if self._sleep(decision.delay):
                return 128 + self.user_signal
            argv, kept = self._resume_argv(attempt)
            self._notice_resume(attempt, outcome, kept)

    def _run_attempt(self, argv: list[str]) -> Attempt:
        number = self.session.attempts + 1
        self.world.update_session(self.session.id, attempts=number, state="running")
        self.session = self.world.get_session(self.session.id)
        self._event("launch", {"argv": self.opts.binary + argv}, number, "intent")
        attempt = Attempt(number)
        child = self._spawn(argv)
        self._event("launched", {"pid": child.pid, "create_time": child.create_time}, number, "outcome")
        self._watch(child, attempt)
        self._event("exited", {"code": attempt.rc, "signal": exit_signal(attempt.rc),
                               "stalled": attempt.stalled, "user_signal": attempt.user_signal,
                               "ran_for": round(attempt.ran_for, 3), "tools": attempt.tools},
                    number, "outcome")
        return attempt

    def _spawn(self, argv: list[str]):
        full = self.opts.binary + argv
        self.live = LiveMirror(self.world.path, self.wrapper, self.session.id, self._watch_dir(),
                               notice=self.opts.notice)
        if self.opts.interactive:
            from .terminal import PtyChild

            child = PtyChild(full, self.opts.env, self.opts.cwd)
        else:
            child = PipeChild(full, self.opts.env, self.opts.cwd, self._on_output)
        self.child = child
        self.live.start()
        return child

    def _on_output(self, line: bytes) -> None:
        if self.live.native_id is None and (native := self.wrapper.id_from_output(line)):
            self.live.native_id = native
            self.live.wake.set()

    def _watch_dir(self) -> Path | None:
        path = Path(self.session.native_path) if self.session.native_path else None
        folder = path.parent if path else self.wrapper.watch_root(Path(self.session.home))
        try:
            folder.mkdir(parents=True, exist_ok=True)
            return folder
        except OSError:
            return None

    def _watch(self, child, attempt: Attempt) -> None:
        tracker, forwarded, snapped = ToolTracker(child.pid), None, 0.0
        while (rc := child.wait_exit(TICK, self.wake_fd)) is None:
            if time.monotonic() - snapped >= SNAPSHOT_EVERY:
                tracker.snapshot()  # which tool commands run, whatever their process group
                snapped = time.monotonic()
            if self.user_signal and forwarded is None:
                forwarded = self.user_signal
                self._stop(child, self.user_signal)
            elif self.opts.link and self.opts.link.taken_over() and forwarded is None:
                forwarded = signal.SIGTERM  # another machine runs the session now
                self._stop(child, signal.SIGTERM)
            elif self._stalled(child):
                attempt.stalled = True
                self._event("stall", {"timeout": self.opts.stall_timeout}, attempt.number, "intent")
                self._stop(child, signal.SIGTERM)
        attempt.rc, attempt.ran_for = rc, time.monotonic() - child.started
        attempt.user_signal = self.user_signal
        child.finish()
        grace = 0.5 if self.user_signal else self.opts.tool_grace
        attempt.tools = [o.to_dict() for o in tracker.settle(grace)]
        self.live.stop()
        if self.live.error:
            raise self.live.error
        prepare_sync(self.world, self.wrapper, self.session, self.live.native_id)

    def _stalled(self, child) -> bool:
        timeout = self.opts.stall_timeout
        if not timeout:
            return False
        idle = time.monotonic() - max(self.live.last_progress, child.last_output)
        return idle > timeout and not self._turn_complete()

    def _stop(self, child, sig: int) -> None:
        """Signal the harness's group; SIGKILL it if it has not gone after stop_wait."""
        child.signal(sig)
        if child.wait(timeout=self.opts.stop_wait) is None:
            child.signal(signal.SIGKILL)

    def _on_signal(self, signum, frame) -> None:
        self.user_signal = self.user_signal or signum

    # after an attempt ---------------------------------------------------------------------
    def _turn_complete(self) -> bool:
        sources = self.world.sources(self.session.id)
        if not sources:
            return False
        records = current_turn(self.world, self.session, sources[0])
        return self.wrapper.turn_state(records).complete

    def _resume_argv(self, attempt: Attempt) -> tuple[list[str], int]:
        session = self.session = self.world.get_session(self.session.id)
        self._event("resume", {"attempt": attempt.number + 1}, attempt.number + 1, "intent")
        prepared = prepare_resume(self.world, self.wrapper, session, self.opts.replay,
                                  [t for t in attempt.tools])
        session = self.session = self.world.get_session(self.session.id)
        if not prepared.has_state or not session.harness_session_id and not session.native_path:
            self._event("resume_plan", {"mode": "relaunch", "why": "no native state yet"},
                        attempt.number + 1, "outcome")
            return self.opts.args, 0
        prompt = self._continue_prompt(prepared.unlogged)
        argv = self.wrapper.resume_args(self.opts.args, session.harness_session_id,
                                        session.native_path, prompt, self.opts.headless)
        self._event("resume_plan", {"mode": "resume", "argv": argv, "repairs": prepared.repairs,
                                    "rebuilt": prepared.rebuilt, "kept": prepared.finished_calls},
                    attempt.number + 1, "outcome")
        return argv, prepared.finished_calls

    def _continue_prompt(self, unlogged: list[dict]) -> str | None:
        """Headless: the continuation prompt, with a word on each tool command that ran
        without a call in the session (the model decides what to check). Interactive: there
        is no prompt to carry it, so the user is told."""
        notes = [unlogged_text(outcome) for outcome in unlogged]
        if not self.opts.headless:
            for note in notes:
                self.opts.notice(f"dh: {note}")
            return None
        return "\n\n".join([self.opts.continue_prompt, *notes])

    def _notice_resume(self, attempt: Attempt, outcome: str, kept: int) -> None:
        sig = exit_signal(attempt.rc)
        if outcome == "hung":
            how = f"hung (no progress for {self.opts.stall_timeout:g} s during a turn)"
        else:
            how = f"killed by {signal.Signals(sig).name}" if sig else f"exited with code {attempt.rc}"
        self.opts.notice(f"dh: {self.wrapper.name} {how}; resuming session {self.session.id} "
                         f"(attempt {attempt.number + 1}, {kept} finished call(s) kept)")

    def _sleep(self, delay: float) -> bool:
        """Back off; True when the user stopped dh meanwhile."""
        deadline = time.monotonic() + delay
        while time.monotonic() < deadline and not self.user_signal:
            time.sleep(min(0.05, delay))
        return bool(self.user_signal)

    def _final_code(self, attempt: Attempt, outcome: str) -> int:
        self.world.update_session(self.session.id, state=outcome)
        if attempt.user_signal:
            return 128 + attempt.user_signal
        sig = exit_signal(attempt.rc)
        if sig and outcome == "finished":
            self.opts.notice(f"dh: {self.wrapper.name} was killed by {signal.Signals(sig).name} after "
                             f"its turn completed; nothing to resume (session {self.session.id})")
            return 0
        return 128 + sig if sig else (attempt.rc or 0)

    def _fatal(self, attempt: Attempt, reason: str) -> int:
        self.world.update_session(self.session.id, state="fatal")
        self.opts.notice(f"dh: giving up on session {self.session.id}: {self.wrapper.name} {reason}. "
                         f"Resume it by hand with: dh resume {self.session.id}")
        sig = exit_signal(attempt.rc)
        return 128 + sig if sig else (attempt.rc or 1)

    def _not_mine(self, attempt: Attempt) -> int:
        """The world's lease is another's now (or could not be renewed): no relaunch here."""
        why = self.opts.link.taken_over() or "its lease in the world could not be renewed in time"
        self._event("lease_lost", {"reason": why}, attempt.number)
        self.opts.notice(f"dh: not relaunching session {self.session.id}: {why}")
        return 4  # as SessionLocked: another holder has it

    def _event(self, type_: str, details: dict, attempt: int | None = None, phase: str = "info"):
        # argv, resume plans and tool command lines: never a secret in the log
        self.world.add_event(self.session.id, type_, scrub(details), attempt, phase)


def prepare_sync(world, wrapper, session, native_id: str | None = None) -> None:
    """The final drain: read every native file to its end once the harness has exited."""
    from ..mirror.session import SessionMirror

    session = world.get_session(session.id)
    native = wrapper.locate(Path(session.home), native_id or session.harness_session_id,
                            Path(session.native_path) if session.native_path else None)
    if native and native.harness_session_id != session.harness_session_id:
        world.update_session(session.id, harness_session_id=native.harness_session_id,
                             native_path=str(native.sources[0].path))
        session = world.get_session(session.id)
    mirror = SessionMirror(world, wrapper, session)
    if native:
        mirror.track(native)
    mirror.sync()
