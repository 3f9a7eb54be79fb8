"""The wait on a provider's limit: when an attempt met one, WAITING until it resets (or
stopping, as --on-limit says), and the words of the one line the user reads: which limit, when
dh goes on (a local wall-clock time) and in how long."""

from __future__ import annotations

import signal
import time

from .. import events
from ..util import readable_epoch
from . import states
from .attempts import Attempt, exit_signal
from .policy import limit_wait

LIMIT_SETTLE = 3.0  # seconds a TUI sits still after logging a limit before dh takes it as one


def limit_words(limit) -> str:
    """"usage limit (5-hour)", "usage limit", "rate limit"."""
    kind = "rate limit" if limit.which == "rate_limit" else "usage limit"
    return kind if limit.label in ("rate", "usage") else f"{kind} ({limit.label})"


def clock_time(epoch: float) -> str:
    """A local wall-clock time: 15:02, or with its date when not today."""
    if readable_epoch(epoch) is None:
        return "an unreadable time"
    when, today = time.localtime(epoch), time.localtime()
    same_day = when[:3] == today[:3]
    return time.strftime("%H:%M" if same_day else "%Y-%m-%d %H:%M", when)


def span(seconds: float) -> str:
    """4 h 12 min, 12 min, 45 s."""
    seconds = int(round(seconds))
    hours, minutes = divmod(seconds // 60, 60)
    if hours:
        return f"{hours} h {minutes} min"
    return f"{minutes} min" if minutes else f"{seconds} s"


def resets(reset_at: float | None) -> str:
    return f" (resets at {clock_time(reset_at)})" if reset_at else ""


class LimitWait:
    """The Supervisor's part that meets a limit and waits it out. It uses the Supervisor's
    session, spec, opts, wrapper, relauncher, watchers, clock and user_signal, its counters
    limits_met, limit_waited and limit_looked_at, and its _transition, _write, _idle, _sleep
    and _not_mine (runner.py)."""

    def _limit_met(self, attempt: Attempt):
        """The limit the harness says ended its turn (Wrapper.limit_from, through the
        relauncher, on the log's current turn), when it exited by itself or was a TUI dh
        stopped at a limit; else None."""
        if attempt.limit is not None:
            return attempt.limit
        if attempt.user_signal or attempt.stalled or exit_signal(attempt.rc):
            return None
        return self.relauncher.limit(self.session, self.clock.wall())

    def _limit_at_prompt(self, child):
        """A TUI does not exit on a limit: it shows the error and waits at its prompt. The
        limit this attempt logged once nothing has come for LIMIT_SETTLE seconds (looked
        for once per new progress); only when dh is to wait it out (else the user is left
        at the prompt, as without dh)."""
        if not self.spec.interactive or self.opts.on_limit != "wait" or not self.opts.supervise:
            return None
        mark = self.watchers.last_progress
        if mark <= self.started or mark == self.limit_looked_at or self._idle(child) < LIMIT_SETTLE:
            return None
        self.limit_looked_at = mark
        return self.relauncher.limit(self.session, self.clock.wall())

    def _wait_out(self, attempt: Attempt, limit) -> int | None:
        """WAITING until the limit resets (plus a margin) or, its reset unknown, the next try
        (policy.limit_wait); None once it is time to go on. Not a restart: max_restarts and
        the failed-start count are untouched. With --on-limit stop, or past the longest
        wait, EXITED with the harness's code; on the user's signal, EXITED `interrupted`."""
        now, policy = self.clock.wall(), self.opts.policy
        delay = limit_wait(policy, limit.reset_at, now, self.limits_met, self.limit_waited)
        self._write(events.limit(**limit.to_dict()), attempt.number)
        name, what = self.wrapper.name, limit_words(limit)
        if self.opts.on_limit == "stop" or not self.opts.supervise or delay is None:
            why = ("--on-limit stop" if self.opts.on_limit == "stop" or not self.opts.supervise
                   else f"waited {span(self.limit_waited)}, the longest allowed ({span(policy.limit_max_wait)})")
            self._transition(states.EXITED, f"{what}; {why}", attempt.number, outcome="limited",
                             why=limit.text)
            self.opts.notice(f"dh: {name} hit its {what}{resets(limit.reset_at)}; stopped ({why}). "
                             f"Go on with: dh resume {self.session.id} --at-reset")
            return attempt.rc or 1
        self.limits_met += 1
        self.limit_waited += delay
        self._transition(states.WAITING, what, attempt.number, outcome="limited", delay=round(delay, 3),
                         until=round(now + delay, 3), tries=self.limits_met)
        self.opts.notice(f"dh: {name} hit its {what}; going on at {clock_time(now + delay)}, in {span(delay)}"
                         f" · Ctrl-C stops")
        if self.opts.link and not self.opts.link.may_relaunch():
            return self._not_mine(attempt)
        if self._sleep(delay):
            sig = signal.Signals(self.user_signal).name
            self._transition(states.EXITED, "stopped", attempt.number, outcome="interrupted",
                             why=f"dh got {sig} while waiting for the {what} to reset")
            self.opts.notice(f"dh: stopped waiting; session {self.session.id} is resumable: "
                             f"dh resume {self.session.id} [--at-reset]")
            return 128 + self.user_signal
        return None
