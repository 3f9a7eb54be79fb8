"""One attempt of a harness and how it ended: the facts the supervisor records, the outcome
they make (finished, stopped, crashed, hung) and the words the log keeps for it."""

from __future__ import annotations

import signal
from dataclasses import dataclass, field

USER_STOPS = {signal.SIGINT, signal.SIGQUIT, signal.SIGHUP}


@dataclass
class Attempt:
    number: int
    rc: int | None = None
    ran_for: float = 0.0
    stalled: bool = False
    user_signal: int | None = None
    tools: list[dict] = field(default_factory=list)
    parts_ended: list[dict] = field(default_factory=list)  # the harness's helpers dh ended
    stderr_tail: str = ""  # the end of what the harness wrote on stderr (when dh saw it)
    limit: object = None  # the provider's limit a TUI showed at its prompt (dh then stopped it)


def exit_signal(rc: int | None) -> int | None:
    return -rc if rc is not None and rc < 0 else None


def classify(attempt: Attempt, turn_complete: bool, interactive: bool) -> str:
    """finished | stopped | crashed | hung."""
    if attempt.user_signal:
        return "stopped"
    if attempt.stalled:
        return "hung"
    if interactive and exit_signal(attempt.rc) in USER_STOPS:
        # In a terminal these come from the user: Ctrl-C (or Ctrl-\) in a TUI that left its
        # pty's signal keys on, or the terminal hanging up. Never a reason to relaunch.
        return "stopped"
    if exit_signal(attempt.rc):
        # A headless harness killed after its final answer was written has nothing left to
        # do: resuming it would only pay for a fresh model call. An interactive one is
        # brought back (a resume without a prompt costs nothing) so the user can go on.
        return "finished" if turn_complete and not interactive else "crashed"
    if interactive or turn_complete or attempt.rc == 0:
        return "finished"  # the harness chose to exit (a failing code is passed through)
    return "crashed"


def why_ended(attempt: Attempt, outcome: str) -> str:
    """What ended the attempt, in words, for the session's last state event."""
    sig = attempt.user_signal or exit_signal(attempt.rc)
    name = signal.Signals(sig).name if sig else None
    if attempt.user_signal:
        return f"dh got {name}: the harness was stopped with it"
    if outcome == "stopped":
        return f"the harness ended on the user's {name} (Ctrl-C or a hang-up)"
    if outcome == "hung":
        return "no progress during a turn"
    if name:
        return f"the harness was killed by {name}"
    return f"the harness exited with code {attempt.rc}"
