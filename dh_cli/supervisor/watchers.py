"""What watches one attempt besides the process itself: the live mirror (native files into
the log as they are written), the workspace snapshots, and the final drain once the harness
has exited. The Supervisor is handed an `AttemptWatchers` (tests give it a fake)."""

from __future__ import annotations

from pathlib import Path

from ..mirror import shared_wire
from ..mirror.live import Launch, LiveMirror, launched_native
from ..mirror.shared_client import SharedMirror, ensure_server
from ..workspace import start_watcher

# how long a launch waits for a session's first snapshot (20 files: 7 ms; 10,000: 1.6 s)
START_WAIT = 2.0


class AttemptWatchers:
    def __init__(self, world, wrapper, opts, spec):
        self.world, self.wrapper, self.opts, self.spec = world, wrapper, opts, spec
        self.live = self.launch = self.workspace = None
        self.shared = shared_wire.enabled() and _started(world.path)

    def _shared(self, folders) -> bool:
        return self.shared and self.launch is None and bool(folders)

    def before_launch(self, session) -> None:
        self.launch = self._launch_info(session)
        folders = self._watch_dirs(session)
        if self._shared(folders):
            # the shared mirror (mirror/shared_server.py); a session found by cwd and time
            # (a Launch) stays in this process
            self.live = SharedMirror(self.world.path, self.wrapper, session.id, folders,
                                     notice=self.opts.notice)
        else:
            self.live = LiveMirror(self.world.path, self.wrapper, session.id, folders,
                                   notice=self.opts.notice, launch=self.launch)
        # started before the harness: a session's first snapshot (the folder as dh found it)
        # must not hold the harness's first command (the fake harnesses' model answers in ms)
        self.workspace = start_watcher(self.world.path, self.wrapper, session, self.spec.cwd,
                                       self.opts.replay, self.opts.notice,  # dh_cli/workspace
                                       committed=self.live.committed)
        self.workspace.wait_for_start(START_WAIT)

    def launched(self, session) -> None:
        self.live.start()

    @property
    def last_progress(self) -> float:
        return self.live.last_progress

    def found_id(self, native_id: str) -> None:
        """The harness printed its session id: the mirror can find its file at once."""
        if self.live.native_id is None:
            self.live.found_id(native_id)

    def knows_id(self) -> bool:
        return self.live.native_id is not None

    def ended(self, session):
        """The harness exited: stop the live mirror, then read every native file to its end.
        Returns the session as the log has it then (its native id may be new)."""
        self.live.stop()
        if self.live.error:
            # a log deleted under dh is the cause to report (the shared mirror let go of the
            # session then, and the mirror that took it back found no such session)
            getattr(self.world, "check_in_place", lambda: None)()
            raise self.live.error
        session = prepare_sync(self.world, self.wrapper, session, self.live.native_id, self.launch)
        self.workspace.stop()  # its last snapshot sees every record the drain committed
        return session

    def _launch_info(self, session) -> Launch | None:
        """Taken just before the launch when dh knows neither the session's id nor its
        file: the live mirror then finds what the harness creates (or, told to continue a
        session it picks itself, writes to) by cwd and time, not by its stdout."""
        if session.harness_session_id or session.native_path:
            return None
        home = Path(session.home)
        resuming = self.wrapper.plan_launch(list(self.spec.args), self.spec.cwd, home).resuming
        return Launch.of(self.wrapper, home, session.cwd or self.spec.cwd, resuming)

    def _watch_dirs(self, session) -> list[Path] | None:
        """The session file's folder when known, else the wrapper's folders (the first one
        created when missing, so a watch can be set before the harness writes)."""
        path = Path(session.native_path) if session.native_path else None
        folders = [path.parent] if path else self.wrapper.watch_folders(Path(session.home))
        try:
            folders[0].mkdir(parents=True, exist_ok=True)
            return folders
        except OSError:
            return None


def _started(db: Path) -> bool:
    """The shared mirror runs (started now if not), before dh becomes a subreaper: a server
    that dies later is not started again by this dh (its sessions are mirrored in-process)."""
    try:
        return ensure_server(Path(db).resolve())
    except OSError:
        return False


def prepare_sync(world, wrapper, session, native_id: str | None = None,
                 launch: Launch | None = None):
    """The final drain: read every native file to its end once the harness has exited.
    Returns the session as the log has it then."""
    from ..mirror.session import SessionMirror

    session = world.get_session(session.id)
    native = wrapper.locate(Path(session.home), native_id or session.harness_session_id,
                            Path(session.native_path) if session.native_path else None)
    if native is None and not native_id:
        native = launched_native(world, wrapper, session, launch)
    if native and native.harness_session_id != session.harness_session_id:
        session = world.update_session(session.id, harness_session_id=native.harness_session_id,
                                       native_path=str(native.sources[0].path))
    mirror = SessionMirror(world, wrapper, session)
    if native:
        mirror.track(native)
    mirror.sync()
    return session
