"""The restart policy. Pure: the caller passes the classified exit and how long the attempt
ran; `RestartPolicy.after_exit` names the state entered and how long to wait."""

from __future__ import annotations

from dataclasses import dataclass, field

from . import states


@dataclass(frozen=True)
class PolicyConfig:
    max_restarts: int = 5  # restarts allowed before FATAL (reset after stable running)
    start_secs: float = 1.0  # dying sooner than this counts as a failed start
    backoff_base: float = 1.0  # second restart waits this long, then doubles...
    backoff_cap: float = 30.0  # ...up to this
    stable_secs: float = 60.0  # running this long resets the restart counter
    # Failed starts in a row allowed before FATAL (supervisord's startretries): a harness
    # that dies at once on a bad flag ends after 4 launches and 0+1+2 s of backoff, where
    # it was relaunched 6 times over 16 s before failed starts had a limit of their own.
    start_retries: int = 3
    # A provider's limit (WAITING): never two launches closer than limit_spacing, an unknown
    # reset tried again after limit_spacing, then twice that... up to limit_cap; a known one
    # waited out plus limit_margin; given up once the wait would pass limit_max_wait.
    limit_spacing: float = 60.0
    limit_cap: float = 900.0
    limit_margin: float = 5.0
    limit_max_wait: float = 6 * 3600.0


@dataclass(frozen=True)
class Decision:
    state: str  # the state entered: BACKOFF (then restart), EXITED or FATAL
    delay: float = 0.0
    reason: str = ""
    failed_start: bool = False  # the attempt died before start_secs


@dataclass
class RestartPolicy:
    config: PolicyConfig = field(default_factory=PolicyConfig)
    restarts: int = 0  # restarts since the last reset; persisted in the log by the caller
    failed_starts: int = 0  # consecutive attempts that died before start_secs

    def after_exit(self, outcome: str, ran_for: float) -> Decision:
        """outcome: finished | stopped | crashed | hung."""
        if outcome in ("finished", "stopped"):
            return Decision(states.EXITED, reason=outcome)
        if ran_for >= self.config.stable_secs:
            self.restarts = 0  # a stable run earns a fresh budget
        failed = ran_for < self.config.start_secs
        self.failed_starts = self.failed_starts + 1 if failed else 0
        if self.failed_starts > self.config.start_retries:
            return Decision(states.FATAL, reason=f"died within {self.config.start_secs:g} s of its "
                            f"start {self.failed_starts} times in a row", failed_start=True)
        if self.restarts >= self.config.max_restarts:
            return Decision(states.FATAL, reason=f"{outcome} after {self.restarts} restart(s)",
                            failed_start=failed)
        delay = self._backoff()
        self.restarts += 1
        return Decision(states.BACKOFF, delay, reason=outcome, failed_start=failed)

    def _backoff(self) -> float:
        """First restart immediate, then base, 2*base, 4*base ... capped."""
        if self.restarts == 0:
            return 0.0
        return min(self.config.backoff_cap, self.config.backoff_base * 2 ** (self.restarts - 1))


def limit_wait(config: PolicyConfig, reset_at: float | None, now: float, tries: int,
               waited: float) -> float | None:
    """Seconds to wait before going on after a provider's limit (None: give up). reset_at
    and now are epoch seconds; tries: limits met in a row before this one; waited: seconds
    already spent waiting on them. Never less than limit_spacing: a harness that gives up at
    once on a refusal is relaunched at most once per spacing."""
    if reset_at is not None and reset_at > now:
        delay = reset_at - now + config.limit_margin
    else:
        delay = min(config.limit_cap, config.limit_spacing * 2 ** tries)
    delay = max(delay, config.limit_spacing)
    return None if waited + delay > config.limit_max_wait else delay
