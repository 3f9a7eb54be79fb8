"""Live mirroring while an attempt runs: a thread that syncs the session's native files into
the log whenever the filesystem says they changed (inotify through watchfiles), with a
polling fallback. It has its own database connection, and finds the native session as soon
as its id is known (chosen up front, or read from the harness's output)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from ..mirror.session import SessionMirror
from ..worlds.local import LocalWorld

POLL = 0.25  # fallback when no file event arrives
RELOCATE = 2.0  # how often to look for new native files of the session


class LiveMirror:
    def __init__(self, world_path: Path, wrapper, session_id: str, watch_dir: Path | None):
        self.world_path, self.wrapper, self.session_id = world_path, wrapper, session_id
        self.watch_dir = watch_dir
        self.native_id: str | None = None  # set from the harness's output when discovered
        self.last_progress = time.monotonic()
        self.added = 0
        self.error: BaseException | None = None
        self.stop_event = threading.Event()
        self.wake = threading.Event()
        self.thread = threading.Thread(target=self._run, name="dh-mirror", daemon=True)

    def start(self) -> "LiveMirror":
        self.thread.start()
        if self.watch_dir is not None:
            threading.Thread(target=self._watch, name="dh-watch", daemon=True).start()
        return self

    def _watch(self) -> None:
        from watchfiles import watch

        try:
            for _ in watch(self.watch_dir, watch_filter=None, debounce=20, step=1,
                           stop_event=self.stop_event, rust_timeout=500, yield_on_timeout=True):
                self.wake.set()
        except Exception:  # noqa: BLE001 - the polling fallback keeps mirroring
            return

    def _run(self) -> None:
        world = LocalWorld(self.world_path)
        try:
            mirror, located = self._mirror(world), time.monotonic()
            while not self.stop_event.is_set():
                self.wake.wait(POLL)
                self.wake.clear()
                if mirror is None or time.monotonic() - located > RELOCATE:
                    # new side files (Claude subagents) appear while the harness runs
                    mirror, located = self._mirror(world) or mirror, time.monotonic()
                if mirror and mirror.sync().added:
                    self.last_progress = time.monotonic()
        except BaseException as exc:  # reported by the supervisor after the attempt
            self.error = exc
        finally:
            world.close()

    def _mirror(self, world) -> SessionMirror | None:
        session = world.get_session(self.session_id)
        native = self.wrapper.locate(Path(session.home), self.native_id or session.harness_session_id,
                                     Path(session.native_path) if session.native_path else None)
        if native is None:
            return None
        if native.harness_session_id and native.harness_session_id != session.harness_session_id:
            world.update_session(session.id, harness_session_id=native.harness_session_id,
                                 native_path=str(native.sources[0].path), cwd=session.cwd or native.cwd)
            session = world.get_session(self.session_id)
        mirror = SessionMirror(world, self.wrapper, session)
        mirror.track(native)
        return mirror

    def stop(self) -> None:
        self.stop_event.set()
        self.wake.set()
        self.thread.join(timeout=10)
