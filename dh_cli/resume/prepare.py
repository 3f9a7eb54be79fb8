"""Get a session ready to resume: the native state on disk must hold everything the log holds
(ingest what the harness wrote last; rebuild from the log what is missing, shorter or
different), and every tool call cut off by the crash is closed in the harness's own format,
worded by its replay class, so the model is never asked twice for an answer dh already has."""

from __future__ import annotations

import base64
import os
from dataclasses import dataclass, field
from pathlib import Path

from ..confine import confined_source, source_path
from ..mirror.session import SessionMirror
from ..models import Session
from ..util import scrub
from ..wrappers.base import Wrapper
from .rebuild import source_bytes, write_file
from ..documents.restore import restore_documents as restore_session_documents
from .replay import repair_text, replay_class


@dataclass
class Prepared:
    finished_calls: int = 0  # tool calls whose results the resumed harness will see
    repairs: list[dict] = field(default_factory=list)
    rebuilt: list[str] = field(default_factory=list)
    has_state: bool = False  # False: nothing was written yet, relaunch the original command
    turn_complete: bool = False
    unlogged: list[dict] = field(default_factory=list)  # settled tools no dangling call explains


def _native_matches_log(path: Path, logged: bytes) -> bool:
    """True when the file holds exactly the logged bytes (no torn tail, nothing missing)."""
    try:
        return path.stat().st_size == len(logged) and path.read_bytes() == logged
    except OSError:
        return False


def _mirrored_exactly(source, path: Path) -> bool:
    """The tailer just read this file to its end: it holds exactly the logged bytes when it
    has no torn tail, its size is the committed offset, and the committed prefix still has
    the fingerprint the tailer recorded (cheap: two 4 KiB reads, not the whole file)."""
    from ..mirror.tailer import fingerprint

    if source.status != "live" or source.pending or source.generation:
        return False
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return False
    try:
        if os.fstat(fd).st_size != source.offset:
            return False
        return (source.head_hash, source.tail_hash) == fingerprint(fd, source.offset)
    finally:
        os.close(fd)


def restore_target(world, session: Session, source) -> Path:
    """Where a source's file is restored: the one path confine.py allows for it on this
    machine (home/relpath, or the file this machine's mirror recorded)."""
    from ..wrappers import get as get_wrapper

    return source_path(world, get_wrapper(session.harness), session, source)


def restore_files(world, session: Session, prepared: Prepared) -> None:
    """Rewrite from the log every JSONL source whose file is not the logged bytes exactly."""
    for source in world.sources(session.id):
        if source.kind == "opencode":
            continue
        path = restore_target(world, session, source)
        if source.kind == "jsonl" and _mirrored_exactly(source, path):
            continue
        logged = source_bytes(world, source)
        if not logged or _native_matches_log(path, logged):
            continue
        torn = _torn_tail(path, logged)
        write_file(path, logged, force=True)
        details = {"path": source.relpath, "bytes": len(logged)}
        if torn:
            details["dropped_torn_tail_b64"] = base64.b64encode(torn[:65536]).decode()
        world.add_event(session.id, "rebuilt", details, phase="outcome")
        prepared.rebuilt.append(source.relpath)


def _torn_tail(path: Path, logged: bytes) -> bytes:
    try:
        data = path.read_bytes()
    except OSError:
        return b""
    return data[len(logged):] if data.startswith(logged) else b""


def _append(path: Path, lines: list[bytes]) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_APPEND)
    try:
        os.write(fd, b"".join(lines))
        os.fsync(fd)
    finally:
        os.close(fd)


def repair_dangling(world, wrapper: Wrapper, session: Session, mirror: SessionMirror,
                    overrides: dict, outcomes: list[dict], prepared: Prepared) -> None:
    main = confined_source(world, wrapper, session, world.sources(session.id)[0])
    records = current_turn(world, session, main)
    state = wrapper.turn_state(records)
    prepared.turn_complete = state.complete
    prepared.finished_calls = world.count_kind(main.id, "tool_result")
    queue = list(outcomes)
    for call in state.dangling:
        cls = replay_class(call.name, overrides)
        outcome = queue.pop(0) if queue and cls == "never" else None
        text = repair_text(cls, outcome)
        world.add_event(session.id, "repair", {"call_id": call.id, "tool": call.name,
                                               "replay": cls, "outcome": outcome}, phase="intent")
        if not _apply_repair(world, wrapper, session, main, call, text, records):
            # the conversation moved past this call on an earlier resume: a dead branch
            world.add_event(session.id, "repair_skipped", {"call_id": call.id, "why": "dead branch"},
                            phase="outcome")
            continue
        mirror.sync()
        records = current_turn(world, session, main)
        world.add_event(session.id, "repaired", {"call_id": call.id, "tool": call.name,
                                                 "replay": cls, "text": text}, phase="outcome")
        prepared.repairs.append({"call_id": call.id, "tool": call.name, "replay": cls})
    for outcome in map(scrub, queue):  # a command line may hold a token: never in the log
        world.add_event(session.id, "unlogged_tool", outcome, phase="info")
        prepared.unlogged.append(outcome)


def _apply_repair(world, wrapper, session, main, call, text, records) -> bool:
    if main.kind == "opencode":
        from ..mirror.opencode_db import set_tool_error

        return set_tool_error(Path(main.path), session.harness_session_id, call.id, text)  # confined
    try:
        lines = wrapper.repair_lines(records, call, text)
    except (TypeError, AttributeError, ValueError, KeyError, IndexError):
        lines = []  # damaged records around the call: reported as a skipped repair
    if lines:
        _append(Path(main.path), lines)
    return bool(lines)


def current_turn(world, session: Session, source) -> list:
    """The records of the current turn (from the last user prompt on, in the latest
    generation): where a dangling call and the turn's end can be. OpenCode rows are
    versions of a whole session, so they are all read."""
    if source.kind == "opencode":
        return list(world.records(session.id, source.id))
    generation = world.latest_generation(source.id) or 0
    start = world.last_offset_of_kind(source.id, generation, "user")
    return list(world.records(session.id, source.id, generation, from_offset=start))


def prepare_resume(world, wrapper: Wrapper, session: Session, overrides: dict | None = None,
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
    restore_files(world, session, prepared)
    restore_database(world, wrapper, session, prepared, harness)
    if prepared.rebuilt:  # the native state was lost: so may the documents kept beside it be
        restore_session_documents(world, wrapper, session)  # dh_cli/documents/restore.py
    mirror.sync()
    repair_dangling(world, wrapper, session, mirror, overrides or {}, outcomes or [], prepared)
    return prepared


def restore_database(world, wrapper: Wrapper, session: Session, prepared: Prepared,
                     harness: tuple[list[str], dict] | None = None) -> None:
    """OpenCode: a session missing from its database (lost, or a new machine) goes back
    through `opencode import` of the export built from the log. `harness` is (binary argv,
    environment) to run it with; by default the binary dh would launch, in dh's environment.
    A session still there gets the log a killed OpenCode left checkpointed (settle_database)."""
    from .opencode_restore import restore_opencode, session_in_db, settle_database

    for source in world.sources(session.id):
        if source.kind != "opencode":
            continue
        source = confined_source(world, wrapper, session, source)
        if session_in_db(Path(source.path), session.harness_session_id):
            settle_database(Path(source.path))
            continue
        if harness is None:
            from ..supervisor.launch import find_binary

            harness = (find_binary(wrapper, dict(os.environ)), dict(os.environ))
        size = restore_opencode(world, session, source, *harness)
        if size is not None:
            world.add_event(session.id, "rebuilt", {"path": source.relpath, "bytes": size,
                                                    "via": "opencode import"}, phase="outcome")
            prepared.rebuilt.append(source.relpath)
