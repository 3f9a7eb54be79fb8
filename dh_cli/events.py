"""The types of dh's own journal events, in one place, each with a constructor.

An event is written as (type, details, phase): phase "intent" before dh acts, "outcome"
after, "info" otherwise (see supervisor/runner.py's module docstring). The readable line of
each type is in events_text.py; tests/test_supervisor_states.py checks that every type
here has one. Other packages still pass some of these names as strings (versions.py,
workspace/, documents/, mirror/): they are listed here so `dh log show` reads them all."""

from __future__ import annotations

from dataclasses import dataclass, field

RUN = "run"
LAUNCH = "launch"
LAUNCHED = "launched"
EXITED = "exited"
STATE = "state"
STALL = "stall"
LINGER = "linger"
RESUME = "resume"
RESUME_PLAN = "resume_plan"
RESUME_SKIPPED = "resume_skipped"
LEASE_LOST = "lease_lost"
LIMIT = "limit"
# written outside the supervisor (by resume/, mirror/, worlds/, versions.py, documents/, workspace/)
REPAIR, REPAIRED, REPAIR_SKIPPED, UNLOGGED_TOOL = "repair", "repaired", "repair_skipped", "unlogged_tool"
REBUILT, MOVED, SOURCE_MOVED, TAKEOVER = "rebuilt", "moved", "source_moved", "takeover"
SOURCE_REWRITTEN, SOURCE_DELETED = "source_rewritten", "source_deleted"
SOURCE_BACK, SOURCE_UNREADABLE = "source_back", "source_unreadable"
LOG_WRITE_FAILED, DOCUMENTS_RESTORED = "log_write_failed", "documents_restored"
UNTRIED_VERSION, WORKSPACE = "untried_version", "workspace"

TYPES = (RUN, LAUNCH, LAUNCHED, EXITED, STATE, STALL, LINGER, RESUME, RESUME_PLAN, RESUME_SKIPPED,
         LEASE_LOST, LIMIT, REPAIR, REPAIRED, REPAIR_SKIPPED, UNLOGGED_TOOL, REBUILT, MOVED, SOURCE_MOVED,
         TAKEOVER, SOURCE_REWRITTEN, SOURCE_DELETED, SOURCE_BACK, SOURCE_UNREADABLE,
         LOG_WRITE_FAILED, DOCUMENTS_RESTORED, UNTRIED_VERSION, WORKSPACE)


@dataclass(frozen=True)
class Event:
    """An event not yet written: `world.add_event(session_id, e.type, e.details, attempt, e.phase)`."""

    type: str
    details: dict = field(default_factory=dict)
    phase: str = "info"


def run(argv: list[str], prompt, headless: bool) -> Event:
    return Event(RUN, {"argv": argv, "prompt": prompt, "headless": headless}, "intent")


def launch(argv: list[str]) -> Event:
    return Event(LAUNCH, {"argv": argv}, "intent")


def launched(pid: int, create_time: float | None) -> Event:
    return Event(LAUNCHED, {"pid": pid, "create_time": create_time}, "outcome")


def exited(code, signal, stalled: bool, user_signal, ran_for: float, tools: list,
           parts_ended: list, stderr_tail: str | None = None) -> Event:
    details = {"code": code, "signal": signal, "stalled": stalled, "user_signal": user_signal,
               "ran_for": round(ran_for, 3), "tools": tools, "parts_ended": parts_ended}
    if stderr_tail:
        details["stderr_tail"] = stderr_tail
    return Event(EXITED, details, "outcome")


def state(from_: str, to: str, reason: str, **more) -> Event:
    """A transition of the restart state machine (supervisor/states.py), with its real from."""
    return Event(STATE, {"from": from_, "to": to, "reason": reason, **more})


def stall(timeout: float) -> Event:
    return Event(STALL, {"timeout": timeout}, "intent")


def linger(after: float) -> Event:
    return Event(LINGER, {"after": after}, "intent")


def resume(by: str, attempt: int | None = None) -> Event:
    details = {"by": by} if attempt is None else {"by": by, "attempt": attempt}
    return Event(RESUME, details, "intent")


def resume_plan(mode: str, **details) -> Event:
    """mode "resume" (argv, repairs, rebuilt, kept, continues) or "relaunch" (why)."""
    return Event(RESUME_PLAN, {"mode": mode, **details}, "outcome")


def resume_skipped(by: str, why: str) -> Event:
    return Event(RESUME_SKIPPED, {"by": by, "why": why}, "outcome")


def lease_lost(reason: str) -> Event:
    return Event(LEASE_LOST, {"reason": reason})


def limit(which: str, label: str, reset_at: float | None, where: str, text: str, **more) -> Event:
    """The service refused the turn for a limit (wrappers/limits.py Limit): which one, when
    it resets if the harness said (epoch seconds), where dh read it, the harness's words."""
    return Event(LIMIT, {"which": which, "label": label, "reset_at": reset_at, "where": where,
                         "text": text, **more})
