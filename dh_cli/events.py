"""The types of dh's own journal events, in one place, each with a constructor.

An event is written as (type, details, phase): phase "intent" before dh acts, "outcome"
after, "info" otherwise (see supervisor/runner.py's module docstring). The readable line of
each type is in events_text.py; tests/test_supervisor_states.py checks that every type
here has one. Every writer builds its event here (tests/test_event_literals.py holds it):
`add(world, session_id, event)`, or `event.pair()` among a source's commit (phase "info")."""

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
FORKED = "forked"
UNHIDDEN = "unhidden"

TYPES = (RUN, LAUNCH, LAUNCHED, EXITED, STATE, STALL, LINGER, RESUME, RESUME_PLAN, RESUME_SKIPPED,
         LEASE_LOST, LIMIT, REPAIR, REPAIRED, REPAIR_SKIPPED, UNLOGGED_TOOL, REBUILT, MOVED,
         SOURCE_MOVED, TAKEOVER, SOURCE_REWRITTEN, SOURCE_DELETED, SOURCE_BACK, SOURCE_UNREADABLE,
         LOG_WRITE_FAILED, DOCUMENTS_RESTORED, UNTRIED_VERSION, WORKSPACE, FORKED,
         UNHIDDEN)


@dataclass(frozen=True)
class Event:
    """An event not yet written: `world.add_event(session_id, e.type, e.details, attempt, e.phase)`."""

    type: str
    details: dict = field(default_factory=dict)
    phase: str = "info"

    def pair(self) -> tuple[str, dict]:
        """(type, details), as `Log.commit` journals a source's events with its records."""
        return self.type, self.details


def add(world, session_id: str, event: Event, attempt: int | None = None):
    """Journal the event in the log (`Log.add_event`); the stored event."""
    return world.add_event(session_id, event.type, event.details, attempt, event.phase)


def run(argv: list[str], prompt, headless: bool) -> Event:
    return Event(RUN, {"argv": argv, "prompt": prompt, "headless": headless}, "intent")


def launch(argv: list[str], grant: dict | None = None) -> Event:
    """grant: what the flags let the model do (wrappers/grants.py), read by a machine that
    takes the session over, whose own flags must grant as much."""
    return Event(LAUNCH, {"argv": argv, **({"grant": grant} if grant else {})}, "intent")


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
    """mode "resume" (argv, repairs, rebuilt, kept, continues, cut: the turn the harness was
    in was cut off, and what it writes next goes on with it) or "relaunch" (why)."""
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


# written outside the supervisor -------------------------------------------------------------
def repair(call_id: str, tool: str, replay: str, outcome) -> Event:
    return Event(REPAIR, {"call_id": call_id, "tool": tool, "replay": replay, "outcome": outcome},
                 "intent")


def repaired(call_id: str, tool: str, replay: str, text: str) -> Event:
    return Event(REPAIRED, {"call_id": call_id, "tool": tool, "replay": replay, "text": text}, "outcome")


def repair_skipped(call_id: str, why: str) -> Event:
    return Event(REPAIR_SKIPPED, {"call_id": call_id, "why": why}, "outcome")


def unlogged_tool(outcome: dict) -> Event:
    """A tool process dh settled that no dangling call explains (resume/prepare.py)."""
    return Event(UNLOGGED_TOOL, outcome)


def rebuilt(details: dict) -> Event:
    """A native source written back from the log (the store's restore says what it did)."""
    return Event(REBUILT, details, "outcome")


def unhidden(change: dict) -> Event:
    """A native file changed so the harness's own picker lists the session (`dh restore
    --unhide`): {"path", "line", "field", "from", "to", "kept"}."""
    return Event(UNHIDDEN, change, "outcome")


def moved(plan: dict) -> Event:
    """The session relocated to another checkout or home (resume/relocate.py's plan)."""
    return Event(MOVED, plan, "outcome")


def source_moved(from_: str, to: str, path: str, generation: int, records: int) -> Event:
    return Event(SOURCE_MOVED, {"from": from_, "to": to, "path": path, "generation": generation,
                                "records": records})


def source_rewritten(path: str, reason: str, **more) -> Event:
    """The native file was rewritten: a new generation (more: old_generation, old_offset,
    new_size)."""
    return Event(SOURCE_REWRITTEN, {"path": path, "reason": reason, **more})


def source_deleted(path: str) -> Event:
    return Event(SOURCE_DELETED, {"path": path})


def source_unreadable(error: str, path: str | None = None) -> Event:
    return Event(SOURCE_UNREADABLE, {"error": error} if path is None else {"path": path, "error": error})


def source_back(path: str) -> Event:
    return Event(SOURCE_BACK, {"path": path})


def takeover(from_host: str, from_epoch: int, host: str, epoch: int, by: str) -> Event:
    return Event(TAKEOVER, {"from_host": from_host, "from_epoch": from_epoch, "host": host,
                            "epoch": epoch, "by": by})


def forked(from_session: str, from_native: str | None, world: str | None) -> Event:
    """This session began as a fork of `from_session` (its native session `from_native`),
    which replicated to `world` and stays there as it was (resume/fork.py)."""
    return Event(FORKED, {"from": from_session, "from_native": from_native, "world": world}, "intent")


def log_write_failed(since: str, seconds: float, error: str) -> Event:
    """The log could not be written for `seconds` from `since`; written once it can again."""
    return Event(LOG_WRITE_FAILED, {"since": since, "seconds": seconds, "error": error})


def documents_restored(files: list[str]) -> Event:
    return Event(DOCUMENTS_RESTORED, {"files": files}, "outcome")


def untried_version(harness: str, version: str, tried: list[str]) -> Event:
    return Event(UNTRIED_VERSION, {"harness": harness, "version": version, "tried": tried})


def workspace(to: str, outcome: dict) -> Event:
    """What a resume did to the working tree (workspace/resume.py)."""
    return Event(WORKSPACE, {"to": to, **outcome}, "outcome")
