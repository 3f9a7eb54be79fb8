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
from ..workspace import start_watcher
from ..wrappers.base import Wrapper
from . import states
from .attempts import Attempt, classify, exit_signal, why_ended  # noqa: F401 - re-exported
from .live import Launch, LiveMirror, launched_native
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


class Supervisor:
    def __init__(self, world, wrapper: Wrapper, session: Session, opts: RunOptions):
        self.world, self.wrapper, self.opts = world, wrapper, opts
        self.session = session
        self.policy = RestartPolicy(opts.policy, restarts=self._restarts_so_far())
        self.user_signal: int | None = None
        self.child = None
        self.wake_fd: int | None = None
        self.attempt_env: dict[str, str | None] = {}  # the wrapper's changes for the next attempt
        self.attempt_typed = (None, None)  # text to type into the next attempt's TUI, when
        self.attempt_note: str | None = None  # the wrapper's line for the user at the relaunch

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
        guardian = self._guardian()  # before become_subreaper: never dh's child
        try:
            return self._run(argv)
        finally:
            from .terminal import dismiss_guardian

            dismiss_guardian(guardian)

    def _guardian(self) -> int | None:
        if not self.opts.interactive:
            return None
        from .terminal import start_guardian

        return start_guardian()

    def _run(self, argv: list[str]) -> int:
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
            if hasattr(self.child, "restore"):
                self.child.restore()  # on every way out, even an error mid-attempt
            end_descendants(exclude=set())

    def _loop(self, argv: list[str]) -> int:
        while True:
            attempt = self._run_attempt(argv)
            outcome = classify(attempt, self._turn_complete(), self.opts.interactive)
            decision = self.policy.after_exit(outcome, attempt.ran_for)
            self._event("state", {"from": states.RUNNING, "to": decision.state, "reason": decision.reason,
                                  "outcome": outcome, "delay": decision.delay,
                                  "why": why_ended(attempt, outcome)}, attempt.number)
            if decision.state == states.EXITED or not self.opts.supervise:
                return self._final_code(attempt, outcome)
            if decision.state == states.FATAL:
                return self._fatal(attempt, decision.reason)
            if self.opts.link and not self.opts.link.may_relaunch():
                return self._not_mine(attempt)
            if self._sleep(decision.delay):
                return 128 + self.user_signal
            argv, kept = self._resume_argv(attempt)
            if hasattr(self.child, "clear"):
                self.child.clear()  # the relaunched TUI draws on a clean screen, under the notice
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
                               "ran_for": round(attempt.ran_for, 3), "tools": attempt.tools,
                               "parts_ended": attempt.parts_ended},
                    number, "outcome")
        return attempt

    def _attempt_env(self) -> dict[str, str]:
        env = dict(self.opts.env)
        for name, value in self.attempt_env.items():
            if value is None:
                env.pop(name, None)
            else:
                env[name] = value
        return env

    def _spawn(self, argv: list[str]):
        full = self.opts.binary + argv
        env, self.attempt_env = self._attempt_env(), {}
        self.launch = self._launch_info()
        self.live = LiveMirror(self.world.path, self.wrapper, self.session.id, self._watch_dirs(),
                               notice=self.opts.notice, launch=self.launch)
        if self.opts.interactive:
            from .terminal import PtyChild

            typed, ready = self.attempt_typed
            child = PtyChild(full, env, self.opts.cwd, typed=typed, ready=ready)
            self.attempt_typed = (None, None)
        else:
            child = PipeChild(full, env, self.opts.cwd, self._on_output)
        self.child = child
        self.live.start()
        self.workspace = start_watcher(self.world.path, self.wrapper, self.session, self.opts.cwd,
                                       self.opts.replay, self.opts.notice)  # dh_cli/workspace
        return child

    def _on_output(self, line: bytes) -> None:
        if self.live.native_id is None and (native := self.wrapper.id_from_output(line)):
            self.live.native_id = native
            self.live.wake.set()

    def _launch_info(self) -> Launch | None:
        """Taken just before the launch when dh knows neither the session's id nor its
        file: the live mirror then finds what the harness creates (or, told to continue a
        session it picks itself, writes to) by cwd and time, not by its stdout."""
        if self.session.harness_session_id or self.session.native_path:
            return None
        resuming = self.wrapper.plan_launch(self.opts.args, self.opts.cwd,
                                            Path(self.session.home)).resuming
        return Launch.of(self.wrapper, Path(self.session.home), self.session.cwd or self.opts.cwd,
                         resuming)

    def _watch_dirs(self) -> list[Path] | None:
        """The session file's folder when known, else the wrapper's folders (the first one
        created when missing, so a watch can be set before the harness writes)."""
        path = Path(self.session.native_path) if self.session.native_path else None
        home = Path(self.session.home)
        folders = [path.parent] if path else self.wrapper.watch_folders(home)
        try:
            folders[0].mkdir(parents=True, exist_ok=True)
            return folders
        except OSError:
            return None

    def _watch(self, child, attempt: Attempt) -> None:
        home = Path(self.session.home)
        tracker = ToolTracker(child.pid, lambda command: self.wrapper.harness_part(command, home))
        forwarded, snapped = None, 0.0
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
            elif self._lingering(child):
                self._end_lingering(child, attempt)
        attempt.rc, attempt.ran_for = rc, time.monotonic() - child.started
        attempt.user_signal = self.user_signal
        child.finish()
        grace = 0.5 if self.user_signal else self.opts.tool_grace
        attempt.tools = [o.to_dict() for o in tracker.settle(grace)]
        attempt.parts_ended = tracker.ended_parts
        self.live.stop()
        if self.live.error:
            raise self.live.error
        prepare_sync(self.world, self.wrapper, self.session, self.live.native_id, self.launch)
        self.workspace.stop()  # its last snapshot sees every record the drain committed

    def _stalled(self, child) -> bool:
        timeout = self.opts.stall_timeout
        if not timeout:
            return False
        idle = time.monotonic() - max(self.live.last_progress, child.last_output)
        return idle > timeout and not self._turn_complete()

    def _lingering(self, child) -> bool:
        """A headless harness whose wrapper says it may not exit after its turn (OpenCode
        `run`, see OpenCodeWrapper.linger_after_turn): this attempt logged records, the turn
        is complete in the log, and nothing has come since for that long."""
        grace = self.wrapper.linger_after_turn
        if grace is None or not self.opts.headless or self.live.last_progress <= child.started:
            return False
        idle = time.monotonic() - max(self.live.last_progress, child.last_output)
        return idle > grace and self._turn_complete()

    def _end_lingering(self, child, attempt: Attempt) -> None:
        grace = self.wrapper.linger_after_turn
        self._event("linger", {"after": grace}, attempt.number, "intent")
        self.opts.notice(f"dh: {self.wrapper.name} finished its turn but did not exit within "
                         f"{grace:g} s; dh ends it (the turn is in the log: dh log show "
                         f"{self.session.id})")
        self._stop(child, signal.SIGTERM)

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
            plan = None if self.opts.headless else self.wrapper.restart_unstarted(
                self.opts.args, session.harness_session_id, session.native_path)
            self._event("resume_plan", {"mode": "relaunch", "why": "no native state yet",
                                        "argv": plan.argv if plan else self.opts.args},
                        attempt.number + 1, "outcome")
            if plan is None:
                return self.opts.args, 0
            self._apply(plan)
            return plan.argv, 0
        if self.opts.headless:
            argv = self.wrapper.resume_args(self.opts.args, session.harness_session_id,
                                            session.native_path,
                                            self._continue_prompt(prepared.unlogged), True)
            continues = "prompt"
        else:
            argv, continues = self.interactive_resume(session, prepared)
        self._event("resume_plan", {"mode": "resume", "argv": argv, "repairs": prepared.repairs,
                                    "rebuilt": prepared.rebuilt, "kept": prepared.finished_calls,
                                    "continues": continues}, attempt.number + 1, "outcome")
        return argv, prepared.finished_calls

    def interactive_resume(self, session: Session, prepared) -> tuple[list[str], str]:
        """The wrapper decides how its TUI carries a cut turn on (argv, environment); the
        supervisor only applies it to the next attempt."""
        cut = not prepared.turn_complete
        prompt = self._continue_prompt(prepared.unlogged) if cut else None
        records = current_turn(self.world, session, self.world.sources(session.id)[0])
        plan = self.wrapper.interactive_resume(self.opts.args, session.harness_session_id,
                                               session.native_path, prompt, records)
        self._apply(plan)
        return plan.argv, plan.continues

    def _apply(self, plan) -> None:  # the wrapper's Relaunch, for the next attempt
        self.attempt_env, self.attempt_typed = plan.env, (plan.typed, plan.ready)
        self.attempt_note = plan.note

    def _continue_prompt(self, unlogged: list[dict]) -> str:
        """The continuation prompt, with a word on each tool command that ran without a call
        in the session (the model decides what to check). In a terminal the user is told too."""
        notes = [unlogged_text(outcome) for outcome in unlogged]
        if not self.opts.headless:
            for note in notes:
                self.opts.notice(f"dh: {note}")
        return "\n\n".join([self.opts.continue_prompt, *notes])

    def _notice_resume(self, attempt: Attempt, outcome: str, kept: int) -> None:
        sig = exit_signal(attempt.rc)
        if outcome == "hung":
            how = f"hung (no progress for {self.opts.stall_timeout:g} s during a turn)"
        else:
            how = f"killed by {signal.Signals(sig).name}" if sig else f"exited with code {attempt.rc}"
        self.opts.notice(f"dh: {self.wrapper.name} {how}; resuming session {self.session.id} "
                         f"(attempt {attempt.number + 1}, {kept} finished call(s) kept)")
        if self.attempt_note:
            self.opts.notice(f"dh: {self.attempt_note}")
            self.attempt_note = None

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


def prepare_sync(world, wrapper, session, native_id: str | None = None,
                 launch: Launch | None = None) -> None:
    """The final drain: read every native file to its end once the harness has exited."""
    from ..mirror.session import SessionMirror

    session = world.get_session(session.id)
    native = wrapper.locate(Path(session.home), native_id or session.harness_session_id,
                            Path(session.native_path) if session.native_path else None)
    if native is None and not native_id:
        native = launched_native(world, wrapper, session, launch)
    if native and native.harness_session_id != session.harness_session_id:
        world.update_session(session.id, harness_session_id=native.harness_session_id,
                             native_path=str(native.sources[0].path))
        session = world.get_session(session.id)
    mirror = SessionMirror(world, wrapper, session)
    if native:
        mirror.track(native)
    mirror.sync()
