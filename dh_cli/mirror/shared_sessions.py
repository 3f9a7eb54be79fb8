"""The sessions the shared mirror holds (shared_server.py), and how it syncs them: every
session with news in one wake-up is synced in ONE transaction. At 32 sessions x 20 records/s
each session has one record per wake-up, so a transaction per session was a commit per
record: 38,470 statements for 9,466 commits, 1.6 of the server's 3.3 s in `execute` (cProfile,
15 s). A failed write rolls the whole round back; every session then starts again from what
the log holds (a tailer's offsets may be ahead of what was committed), as the in-process
mirror does after a failed write. A session whose own step fails (a record the log refuses,
a parser that breaks) is let go, for its client to take back, and the others sync again at
once; it does not fail the round for everyone (a savepoint per session would have cost two
statements of every session's sync).

What a client sends is checked before it is used: names are strings that can name a file,
the native id has the harness's shape, and the session is the harness's the client says."""

from __future__ import annotations

import os
import sqlite3
import time
from contextlib import contextmanager
from pathlib import Path

from .. import wrappers
from ..errors import LogConflict, LogDbError
from ..stores import warm as warm_store
from ..worlds.checkpoint import Checkpointer
from ..worlds.local import LocalWorld
from .live import POLL_WATCHED, RELOCATE, RETRY, locate, open_mirror
from .pacing import Pacer
from . import shared_wire as wire
from .failing import Failing
from .shared_wire import PROTOCOL

# SQLite's own failures of the log (disk full, I/O, locked, corrupt) fail the round, which is
# tried again; these are one session's, the log itself being fine
SESSION_ERRORS = (LogConflict, sqlite3.IntegrityError, sqlite3.ProgrammingError,
                  sqlite3.InterfaceError)
# A round waits this long for another process's write lock, then fails and is tried again
# RETRY s later (the clients' HOLD_WAIT is 30 s: a server waiting on a lock longer than that
# would be taken for dead)
PATIENCE = 5.0


class GroupWorld(LocalWorld):
    """A log connection whose writes, inside group(), all join one transaction."""

    grouped = False

    @contextmanager
    def _write(self):
        if self.grouped:
            yield self.conn
            return
        with super()._write() as conn:
            yield conn

    @contextmanager
    def group(self):
        with super()._write():
            self.grouped = True
            try:
                yield self
            finally:
                self.grouped = False


def _log_failed(exc: BaseException) -> bool:
    """Whether the log itself failed (the round is tried again), not one session's step (a
    record the log refuses, a session the log does not have, a parser that breaks)."""
    return isinstance(exc, (sqlite3.Error, LogDbError)) and not isinstance(exc, SESSION_ERRORS)


class Held:
    """One session the server mirrors, for the one client connection (`owner`) that handed
    it over. Everything here comes from that client (same uid); the files read are the ones
    the log's session names, through confine.py (mirror/session.py)."""

    def __init__(self, message: dict, owner):
        if message.get("version") != PROTOCOL:
            raise ValueError("another version of the protocol")
        self.owner = owner
        self.session_id = file_text(message["session"])
        self.wrapper = wrappers.get(file_text(message["wrapper"]))
        warm_store(self.wrapper)  # handed over at the launch: before the harness writes
        dirs = message.get("dirs") or []
        if not isinstance(dirs, list):
            raise ValueError("dirs is not a list")
        self.dirs = [Path(file_text(d)) for d in dirs]
        self.native_id = None
        if message.get("native_id") is not None:
            self.set_native_id(message["native_id"])
        self.mirror = None
        self.poll = RELOCATE if self.wrapper.side_sources else POLL_WATCHED
        self.due = 0.0  # the next sync without an event (monotonic)
        self.located = time.monotonic()
        self.failing = Failing()
        self.progress_at: float | None = None  # records committed since the last report
        self.reported = 0.0
        self.wds: set[int] = set()

    def set_native_id(self, value) -> None:
        native_id = file_text(value)
        if not self.wrapper.native_id_ok(native_id):
            raise ValueError("not a native id of the harness")  # it becomes a file pattern
        self.native_id = native_id

    def positions(self) -> dict:
        if self.mirror is None:
            return {}
        return {relpath: t.source.offset for relpath, t in self.mirror.tailers.items()}


def file_text(value) -> str:
    """A string a client sent that can name a file (no lone surrogate, no NUL)."""
    if not isinstance(value, str) or "\0" in value:
        raise ValueError("not a name")
    os.fsencode(value)
    return value


class SessionMirrors:
    """watch(held, folder) adds an inotify watch for a session; tell(held, message) sends its
    client a message."""

    def __init__(self, db: Path, watch, tell):
        self.db, self.watch, self.tell = db, watch, tell
        self.held: set[Held] = set()
        self.draining: dict[str, Held] = {}  # sessions of dead clients the log did not take yet
        self.world: GroupWorld | None = None
        self.checkpointer = Checkpointer(db)
        self.pacer = Pacer()

    def start(self) -> None:
        self.checkpointer.folds_in_writer()
        self.checkpointer.start()

    def fold_wal(self) -> None:
        """Between rounds (no transaction open): fold the WAL in here (worlds/checkpoint.py)."""
        if self.world is not None:
            self.checkpointer.fold_here(self.world.conn)

    def stop(self) -> None:
        self.checkpointer.stop()
        self.reset()

    def _open(self) -> GroupWorld:
        if self.world is None:
            world = GroupWorld(self.db, create=False)
            world.be_patient(PATIENCE)  # then the round fails and is tried again: RETRY
            world.checkpoint_elsewhere(self.checkpointer)
            self.world = world
        return self.world

    def sync(self, sessions: list[Held]) -> list[Held]:
        """One round; returns the sessions that failed otherwise than on the log (to be let
        go: their clients take them back)."""
        started, added, broken, stepping = time.monotonic(), {}, [], None
        try:
            world = self._open()
            with world.group():
                for stepping in sessions:
                    added[stepping] = self._step(stepping, world)
        except Exception as exc:  # noqa: BLE001 - see below: the round is rolled back either way
            if _log_failed(exc):
                for held in sessions:
                    self._failed(held, exc)  # the harness keeps running; start again from the log
            elif stepping is not None:
                broken = [stepping]  # to be let go: its client takes it back
            self.reset()  # the others sync again at once (_after), from what the log holds
            added = {}
        self._after(sessions, added, started)
        return broken

    def drain(self, held: Held) -> None:
        """(c) of shared_server.py: the last sync of a session whose client died. While the
        log cannot take it (a lock held past PATIENCE, a full disk) the session stays here and
        is tried again every RETRY s (drain_due); before, it was let go, and what its harness
        had written waited for a `dh resume`. A session error or a new holder ends it too."""
        broken = self.sync([held])
        if held.failing and not broken:
            held.mirror = None  # rolled back: the next try starts from what the log holds
            self.draining[held.session_id] = held
        else:
            self.draining.pop(held.session_id, None)

    def drain_due(self, now: float) -> None:
        for held in [h for h in self.draining.values() if h.due <= now]:
            self.drain(held)

    def next_drain(self) -> float:
        return min((h.due for h in self.draining.values()), default=float("inf"))

    def _after(self, sessions: list[Held], added: dict, started: float) -> None:
        now = time.monotonic()
        if any(added.values()):
            self.pacer.synced(now - started)
        for held in sessions:
            if added.get(held):
                held.progress_at = now
            if held in added and held.failing:
                self._recovered(held)
            if held.failing:
                held.due = now + RETRY
            elif held in added:
                held.due = now + held.poll
            else:
                held.due = 0.0  # rolled back with the round: again at once

    def _step(self, held: Held, world) -> int:
        if held.mirror is None:
            held.mirror = open_mirror(world, held.wrapper, held.session_id, held.native_id, None)
            if held.mirror is not None and wrappers.get(held.mirror.session.harness) is not held.wrapper:
                raise ValueError("the session is another harness's")
            self._watch_sources(held)
        elif time.monotonic() - held.located > RELOCATE:
            native = locate(held.wrapper, held.mirror.session, held.native_id)
            if native is not None:  # e.g. Claude subagent transcripts
                held.mirror.track(native)
                self._watch_sources(held)
            held.located = time.monotonic()
        return held.mirror.sync().added if held.mirror is not None else 0

    def _watch_sources(self, held: Held) -> None:
        if held.mirror is not None:
            for path in held.mirror.watched_paths():
                self.watch(held, path.parent)

    def _failed(self, held: Held, exc: BaseException) -> None:
        notice = held.failing.failed(exc, self.db)
        if notice:
            self.tell(held, wire.message(wire.NOTICE, text=notice))

    def _recovered(self, held: Held) -> None:
        try:
            notice = held.failing.recovered(self._open(), held.session_id)
        except (sqlite3.Error, LogDbError):
            self.reset()
            return  # failing still: the next round tries again
        self.tell(held, wire.message(wire.NOTICE, text=notice))

    def reset(self) -> None:
        """A failed write was rolled back: every session starts again from the log, on a
        fresh connection."""
        world, self.world = self.world, None
        try:
            if world is not None:
                world.close()
        except sqlite3.Error:
            pass
        for held in self.held:
            held.mirror = None
