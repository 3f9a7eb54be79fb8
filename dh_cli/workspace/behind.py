"""Which recorded steps a restored snapshot does not hold.

A snapshot after a step is taken tens of milliseconds after the step's result is logged
(watch.py); a machine killed in between has logged the step and not its files, and a restore
on another machine (or into a lost checkout) then brings the folder as it was before that
step. The model's conversation still holds the step's result, so the relaunch tells it which
steps' effects may be missing (resume/plan.py); the user is told the same."""

from __future__ import annotations

from dataclasses import dataclass

from .. import events
from .store import Snapshot, store_for
from .watch import START, RecordFollower


@dataclass(frozen=True)
class Step:
    """A completed tool call that may write (its replay class is not `safe`)."""

    call_id: str
    tool: str
    turn: int | None


def restored_in_this_resume(world, session_id: str) -> int | None:
    """The seq of the snapshot a restore wrote into the session's cwd since its last
    attempt (workspace/resume.py logs it before the relaunch is planned), else None."""
    for event in reversed(world.events(session_id)):
        if event.type in (events.RESUME_PLAN, events.LAUNCH):
            return None
        if event.type == events.WORKSPACE and event.details.get("action") == "restored":
            return event.details.get("snapshot")
    return None


def recorded_steps(world, wrapper, session_id: str, replay: dict) -> list[Step]:
    """Every step of the session's main file that a snapshot is taken after, in order, as the
    snapshot thread counts them (watch.RecordFollower)."""
    follower = RecordFollower(world, wrapper, session_id, replay)
    calls = [call for reason, call in follower.steps() if reason == "tool" and call]
    return [Step(call, follower.names.get(call, "?"), follower.turns.get(call)) for call in calls]


def steps_behind(snapshots: list[Snapshot], seq: int, steps: list[Step]) -> list[Step]:
    """The steps recorded after the last one the snapshot `seq` holds: a snapshot holds the
    step it names and every step before it. A start snapshot taken in the middle of a
    session (one from before snapshots, or pulled without any) holds the turns before it."""
    chain = [s for s in snapshots if s.seq <= seq]
    place = {step.call_id: i for i, step in enumerate(steps)}
    held = max((place[s.step] for s in chain if s.step in place), default=-1)
    late = chain[0].turn if chain and chain[0].reason == START and chain[0].turn else None
    return [s for s in steps[held + 1:] if late is None or (s.turn or 0) >= late]


def not_restored(world, wrapper, session_id: str, replay: dict) -> list[Step]:
    """The recorded steps whose files the restore of this resume could not bring back."""
    seq = restored_in_this_resume(world, session_id)
    if seq is None:
        return []
    steps = recorded_steps(world, wrapper, session_id, replay)
    return steps_behind(store_for(world).snapshots(session_id), seq, steps) if steps else []
