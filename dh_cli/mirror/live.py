"""Live mirroring while an attempt runs: a thread that syncs the session's native files into
the log whenever the filesystem says they changed (inotify; watchfiles on other systems),
with a polling fallback. It has its own database connection, and finds the native session as soon
as its id is known (chosen up front, or read from the harness's output)."""

from __future__ import annotations

import os
import select
import sqlite3
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from ..errors import LogDbError
from ..osthread import name_os_thread
from ..procs import drain
from ..stores import warm as warm_store
from ..worlds.checkpoint import Checkpointer
from ..worlds.local import LocalWorld
from .failing import Failing
from .pacing import Pacer
from .session import SessionMirror

POLL = 1.0  # fallback when no file event arrives
POLL_WATCHED = 5.0  # the same when inotify wakes the mirror on every change
RELOCATE = 2.0  # how often to look for new native files of the session
RETRY = 1.0  # how often to try again while the log cannot be written (disk full, I/O error)
RETRY_FOR = 600.0  # how long one write may wait for a log other dh processes keep busy


@dataclass
class Launch:
    """What dh knew when it started a harness that could not be told its session id: when,
    where, and which sessions were there already (so the one it creates can be found
    without its stdout; see Wrapper.launched_session)."""

    since: float  # epoch seconds, just before the launch
    cwd: str
    before: dict  # native id -> Wrapper.state_mark at launch
    resuming: bool = False  # the harness picks an existing session itself (e.g. --continue)

    @classmethod
    def of(cls, wrapper, home: Path, cwd: str, resuming: bool = False) -> "Launch":
        return cls(time.time(), cwd, wrapper.snapshot(home, cwd), resuming)


def launched_native(world, wrapper, session, launch: Launch | None):
    """The native session the launched harness is writing, found by cwd and time, when
    dh knows neither its id nor its path; None until it appears."""
    if launch is None or session.harness_session_id or session.native_path:
        return None

    def claimed(native_id: str) -> bool:
        owner = world.find_by_native(wrapper.name, native_id)
        return owner is not None and owner.id != session.id

    return wrapper.launched_session(Path(session.home), session.cwd or launch.cwd, launch.since,
                                    launch.before, launch.resuming, claimed)


class Wake:
    """A wake-up the mirror thread can sleep on in the same select() as its inotify
    descriptor: set() (from any thread) writes a byte to a pipe. Writes after close() are
    dropped, never sent to whatever file reused the descriptor's number."""

    def __init__(self):
        self.read_fd, self.write_fd = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self.lock = threading.Lock()
        self.closed = False

    def set(self) -> None:
        with self.lock:
            if not self.closed:
                try:
                    os.write(self.write_fd, b"x")
                except BlockingIOError:
                    pass  # the pipe is full of wake-ups already

    def drain(self) -> None:
        drain(self.read_fd)

    def close(self) -> None:
        with self.lock:
            if not self.closed:
                self.closed = True
                os.close(self.read_fd)
                os.close(self.write_fd)


class LiveMirror:
    """One thread sleeps in select() on the inotify descriptor and the wake pipe, and syncs
    when either says so. It took two threads before, a watcher waking the mirror, and each
    record woke both: the watcher's share was 2.4 of 12.8 ms CPU a second for one session
    at 20 records/s (/proc, thread by thread). With one thread, one session at 500/s costs
    4.2 % of a core instead of 5.2 % (bench_mirror.py, same pair of runs); at 32 x 20/s the
    gain is within the noise of a loaded machine (steady 604-660 us per record against
    622-692 before, three pairs, load 25-45), because the one thread left now pays the cold
    wake-up the watcher paid (a sync after 50 ms asleep costs 4x one back to back)."""

    def __init__(self, world_path: Path, wrapper, session_id: str, watch_dir,
                 notice=None, launch: Launch | None = None):
        self.world_path, self.wrapper, self.session_id = world_path, wrapper, session_id
        # one folder or several (the first must exist); source folders are added when found
        self.watch_dirs = [watch_dir] if isinstance(watch_dir, Path) else list(watch_dir or [])
        self.watch_dir = self.watch_dirs[0] if self.watch_dirs else None
        self.launch = launch
        self.inotify = None
        self.notice = notice or (lambda text: print(text, file=sys.stderr))
        self.failing = Failing()
        self.native_id: str | None = None  # set from the harness's output when discovered
        self.last_progress = time.monotonic()
        self.added = 0
        self.error: BaseException | None = None
        self.stop_event = threading.Event()
        self.committed = threading.Event()  # set by each sync that logged records (workspace/watch.py)
        self.done = threading.Event()  # the thread has let go of the log
        self.wake = Wake()
        self.poll = POLL
        self.pacer = Pacer()
        self.thread = threading.Thread(target=self._run, name="dh-mirror", daemon=True)
        self.checkpointer = Checkpointer(world_path)

    def start(self) -> "LiveMirror":
        self.checkpointer.start()
        self.thread.start()
        return self

    def _open_watch(self):
        """The inotify watch of the session's folders, or None: then a watchfiles thread
        (other systems) or the polling fallback wakes the mirror."""
        from . import inotify

        if self.watch_dir is None:
            return None
        if not inotify.available():
            threading.Thread(target=self._watch_files, name="dh-watch", daemon=True).start()
            return None
        try:
            watcher = inotify.Inotify(str(self.watch_dir))
        except OSError:
            return None  # the polling fallback keeps mirroring
        for folder in self.watch_dirs[1:]:
            watcher.add(str(folder))
        # side files (a Claude task written while the model stalls) wake no watch: a look
        # every RELOCATE s finds them (seen: a task file not logged 5 s later)
        self.poll = RELOCATE if self.wrapper.side_sources else POLL_WATCHED
        return watcher

    def _watch_files(self) -> None:
        from watchfiles import watch

        try:
            for changes in watch(self.watch_dir, watch_filter=None, debounce=20, step=1,
                                 stop_event=self.stop_event, rust_timeout=1000, yield_on_timeout=True):
                if changes:
                    self.wake.set()
        except Exception:  # noqa: BLE001 - the polling fallback keeps mirroring
            return

    def _wait(self) -> None:
        """Sleep until a file changed, someone woke the mirror, or the poll interval passed.
        While records stream in, let a few arrive before syncing (mirror/pacing.py): the
        events that come meanwhile are drained, so one sync takes all of them."""
        watcher = self.inotify
        fds = [self.wake.read_fd] + ([watcher.fd] if watcher is not None else [])
        ready, _, _ = select.select(fds, [], [], RETRY if self.failing else self.poll)
        if self.wake.read_fd in ready:
            self.wake.drain()
        if watcher is not None and watcher.fd in ready:
            watcher.drain()
            window = self.pacer.window()
            if window > 0 and not self.stop_event.wait(window):
                watcher.drain()

    def _run(self) -> None:
        name_os_thread("dh-mirror")
        try:
            self.inotify = self._open_watch()
            warm_store(self.wrapper)  # while the harness starts; the watch already queues events
            self._mirror_loop()
        except BaseException as exc:  # reported by the supervisor after the attempt
            self.error = exc
        finally:
            self.done.set()
            # closing an inotify descriptor waits for the kernel (10-20 ms here): stop()
            # waits for `done` only, so that time does not sit between a crash and the relaunch
            if self.inotify is not None:
                self.inotify.close()

    def _mirror_loop(self) -> None:
        world, mirror, located, first = None, None, time.monotonic(), True
        try:
            while not self.stop_event.is_set():
                if not first:
                    self._wait()
                first = False
                try:
                    if world is None:
                        world = LocalWorld(self.world_path, create=False)
                        world.be_patient(RETRY_FOR)  # lock waits: wait on, like the supervisor
                        world.checkpoint_elsewhere(self.checkpointer)
                    if mirror is None:
                        mirror = self._mirror(world)
                    elif time.monotonic() - located > RELOCATE:
                        self._track_new_files(world, mirror)  # e.g. Claude subagent transcripts
                        located = time.monotonic()
                    if mirror:
                        self._sync(mirror)
                    if self.failing:
                        self._recovered(world)
                except (sqlite3.Error, LogDbError) as exc:
                    # Disk full, an I/O error, a lock held too long: the harness keeps running.
                    # Start again from what the log holds (the failed batch was rolled back),
                    # on a fresh connection, until a write succeeds.
                    self._failed(exc)
                    world, mirror = _close(world), None
        finally:
            _close(world)

    def _sync(self, mirror: SessionMirror) -> None:
        started = time.monotonic()
        if mirror.sync().added:
            self.committed.set()
            self.last_progress = time.monotonic()
            self.pacer.synced(self.last_progress - started)

    def _failed(self, exc: BaseException) -> None:
        notice = self.failing.failed(exc, self.world_path)
        if notice:
            self.notice(notice)

    def _recovered(self, world) -> None:
        self.notice(self.failing.recovered(world, self.session_id))

    def _track_new_files(self, world, mirror: SessionMirror) -> None:
        native = locate(self.wrapper, mirror.session, self.native_id)
        if native is not None:
            mirror.track(native)
            self._watch_sources(mirror)

    def _watch_sources(self, mirror: SessionMirror) -> None:
        """Watch the folder of every file being mirrored: it may lie below the watched root
        (Codex's dated folders) or outside it (a Pi --session path)."""
        watcher = self.inotify
        if watcher is not None:
            for path in mirror.watched_paths():
                watcher.add(str(path.parent))

    def _mirror(self, world) -> SessionMirror | None:
        mirror = open_mirror(world, self.wrapper, self.session_id, self.native_id, self.launch)
        if mirror is not None:
            self._watch_sources(mirror)
        return mirror

    def found_id(self, native_id: str) -> None:
        """The harness printed its session id: find its file at once."""
        self.native_id = native_id
        self.wake.set()

    def stop(self) -> None:
        self.stop_event.set()
        self.wake.set()
        finished = self.done.wait(timeout=10)
        self.checkpointer.stop()
        if finished:  # else the thread may still select on the pipe: leave it open
            self.wake.close()


def locate(wrapper, session, native_id: str | None):
    return wrapper.locate(Path(session.home), native_id or session.harness_session_id,
                          Path(session.native_path) if session.native_path else None)


def open_mirror(world, wrapper, session_id: str, native_id: str | None,
                launch: Launch | None) -> SessionMirror | None:
    """The mirror of the session's native files, once they can be found (None before);
    used by the in-process mirror and by the shared one (mirror/shared_server.py)."""
    session = world.get_session(session_id)
    if native_id and not session.harness_session_id:
        # Read from the harness's output before its file can be found: keep it now, so a
        # dh killed meanwhile still lets `dh resume` find what the harness wrote.
        session = world.update_session(session.id, harness_session_id=native_id)
    native = locate(wrapper, session, native_id)
    if native is None and not native_id:
        native = launched_native(world, wrapper, session, launch)
    if native is None:
        return None
    if native.harness_session_id and native.harness_session_id != session.harness_session_id:
        session = world.update_session(session.id, harness_session_id=native.harness_session_id,
                                       native_path=str(native.sources[0].path),
                                       cwd=session.cwd or native.cwd)
    mirror = SessionMirror(world, wrapper, session)
    mirror.track(native)
    return mirror


def _close(world) -> None:
    """Close a connection that may be broken (its open transaction is rolled back)."""
    if world is not None:
        try:
            world.close()
        except sqlite3.Error:
            pass
