"""Get a session ready to resume: the native state on disk must hold everything the log holds
(ingest what the harness wrote last; rebuild from the log what is missing, shorter or
different), and every tool call cut off by the crash is closed in the harness's own format,
worded by its replay class, so the model is never asked twice for an answer dh already has."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from .. import events
from ..confine import confined_source
from ..mirror.session import SessionMirror
from ..models import Session
from ..stores import store_of
from ..util import scrub
from ..wrappers.base import Wrapper
from ..documents.restore import restore_documents as restore_session_documents
from ..worlds.log import Log
from ..wrappers.replay import repair_text, replay_class


@dataclass
class Prepared:
    finished_calls: int = 0  # tool calls whose results the resumed harness will see
    repairs: list[dict] = field(default_factory=list)
    rebuilt: list[str] = field(default_factory=list)
    has_state: bool = False  # False: nothing was written yet, relaunch the original command
    turn_complete: bool = False
    unlogged: list[dict] = field(default_factory=list)  # settled tools no dangling call explains


def restore_files(world, session: Session, prepared: Prepared,
                  harness: tuple[list[str], dict] | None = None) -> None:
    """Put back from the log every source whose native state is missing or differs, as its
    store does it (a JSONL file rewritten; an OpenCode session through `opencode import`,
    `harness` = (binary argv, environment) to run it with, by default the binary dh would
    launch in dh's environment)."""
    from ..wrappers import get as get_wrapper

    wrapper = get_wrapper(session.harness)
    store = store_of(wrapper)
    for source in world.sources(session.id):
        source = confined_source(world, wrapper, session, source)
        details = store.restore(world, wrapper, session, source, lambda: harness or _launch_binary(wrapper))
        if details is not None:
            events.add(world, session.id, events.rebuilt(details))
            prepared.rebuilt.append(source.relpath)


def _launch_binary(wrapper: Wrapper) -> tuple[list[str], dict]:
    from ..supervisor.launch import find_binary

    return find_binary(wrapper, dict(os.environ)), dict(os.environ)


def repair_dangling(world, wrapper: Wrapper, session: Session, mirror: SessionMirror,
                    overrides: dict, outcomes: list[dict], prepared: Prepared) -> None:
    main = confined_source(world, wrapper, session, world.sources(session.id)[0])
    records = current_turn(world, session, main)
    state = wrapper.turn_state(records)
    prepared.turn_complete = state.complete
    prepared.finished_calls = world.finished_calls(main.id)
    queue = list(outcomes)
    for call in state.dangling:
        cls = replay_class(call.name, overrides, wrapper.safe_tools)
        outcome = queue.pop(0) if queue and cls == "never" else None
        text = repair_text(cls, outcome)
        events.add(world, session.id, events.repair(call.id, call.name, cls, outcome))
        if not _apply_repair(world, wrapper, session, main, call, text, records):
            # the conversation moved past this call on an earlier resume: a dead branch
            events.add(world, session.id, events.repair_skipped(call.id, "dead branch"))
            continue
        mirror.sync()
        records = current_turn(world, session, main)
        events.add(world, session.id, events.repaired(call.id, call.name, cls, text))
        prepared.repairs.append({"call_id": call.id, "tool": call.name, "replay": cls})
    for outcome in map(scrub, queue):  # a command line may hold a token: never in the log
        events.add(world, session.id, events.unlogged_tool(outcome))
        prepared.unlogged.append(outcome)


def _apply_repair(world, wrapper, session, main, call, text, records) -> bool:
    return store_of(wrapper).repair(world, wrapper, session, main, call, text, records)


def current_turn(world, session: Session, source) -> list:
    """The records of the current turn, as the session's store finds it (stores/)."""
    from ..wrappers import get as get_wrapper

    return store_of(get_wrapper(session.harness)).current_turn(world, session, source)


def prepare_resume(world: Log, wrapper: Wrapper, session: Session, overrides: dict | None = None,
                   outcomes: list[dict] | None = None,
                   harness: tuple[list[str], dict] | None = None, synced: bool = False) -> Prepared:
    """synced: the caller has just drained every native file into the log (prepare_sync,
    after the harness exited): the first sync here would read nothing new."""
    prepared = Prepared()
    mirror = SessionMirror(world, wrapper, session)
    if not synced:
        mirror.sync()
    if not world.sources(session.id) or world.record_count(session.id) == 0:
        return prepared  # the harness wrote nothing yet: relaunch the original command
    prepared.has_state = True
    restore_files(world, session, prepared, harness)
    if prepared.rebuilt:  # the native state was lost: so may the documents kept beside it be
        restore_session_documents(world, wrapper, session)  # dh_cli/documents/restore.py
    mirror.sync()
    repair_dangling(world, wrapper, session, mirror, overrides or {}, outcomes or [], prepared)
    return prepared
