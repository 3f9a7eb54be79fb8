"""The `dh run` side of the shared mirror (the design and the handover are in
shared_server.py): hand the attempt's session to the server, hear its progress, take the
session back into an in-process LiveMirror when the server is gone, and release it before
the final drain. It has LiveMirror's interface (start, stop, found_id, last_progress,
committed, error), so the supervisor cannot tell the two apart.

Whatever fails before the server says `held` (no server, a server that cannot start, another
user's socket) leaves the session to the in-process mirror, exactly as without the setting."""

from __future__ import annotations

import fcntl
import math
import os
import signal
import socket
import sys
import threading
import time
from pathlib import Path

from ..errors import LogDbError
from ..osthread import name_os_thread
from .live import LiveMirror
from . import shared_wire as wire
from .shared_wire import PROTOCOL, Lines, connect, lock_path, peer, socket_path

CONNECT_WAIT = 3.0  # seconds for a server just started to listen (it starts in ~0.2 s)
# seconds for `held`; then the server is killed (see _force). A server waits for the write
# lock as long as a supervisor does, so a long write by another dh delays its answer
HOLD_WAIT = 30.0
RELEASE_WAIT = 120.0  # seconds for `released` (the server may wait on a lock another dh holds)
GONE_WAIT = 30.0  # seconds for a killed server's socket to close
TURN_SLACK = 1.0  # seconds past CONNECT_WAIT to wait for the spawn lock; then in-process


def _server_running(db: Path) -> bool:
    """Whether a server holds the log's mirror lock (a probe that lets go at once)."""
    try:
        fd = os.open(lock_path(db), os.O_RDWR | os.O_CLOEXEC)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)


def ensure_server(db: Path) -> bool:
    """Start the log's server unless one runs; True once its socket is there. Called before
    dh becomes a child subreaper (supervisor/runner.py), and double-forked, so the server is
    never a descendant of dh (never taken for a tool, never ended with dh's children). Clients
    take turns (a spawn lock), so that 32 `dh run`s started together start one server, and
    no client probes the server's lock while the server it started is taking it."""
    sock = socket_path(db)
    turn = os.open(f"{db}.mirror.spawn", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        if not _take_turn(turn):
            return False  # in-process
        if _server_running(db) and sock.exists():
            return True
        if _traced():
            # a server forked now would be traced for its whole life, and `strace -f`
            # would not return before it idle-exits, which no later `dh run` lets happen
            return False
        return _start(db, sock)
    finally:
        os.close(turn)


def _take_turn(turn: int) -> bool:
    """The spawn lock, or False past CONNECT_WAIT + TURN_SLACK: a `dh run` stopped in its
    turn (Ctrl-Z) must not hold up every other one, as a blocking flock would."""
    deadline = time.monotonic() + CONNECT_WAIT + TURN_SLACK
    while True:
        try:
            fcntl.flock(turn, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.01)


def _start(db: Path, sock: Path) -> bool:
    """Spawn a server and wait for its socket. The lock held while the socket is missing is
    an old server shutting down: the one spawned now exits at once, so once the lock is free
    spawn once more (and wait CONNECT_WAIT for that one; at most twice that in all)."""
    old = _server_running(db)
    _spawn(db)
    deadline = time.monotonic() + CONNECT_WAIT
    while not sock.exists() and time.monotonic() < deadline:
        time.sleep(0.01)
        # probed only while the old one holds the lock: a probe can make a server that is
        # taking the lock exit, and after the second spawn nothing probes any more
        if old and not _server_running(db):
            old = False
            _spawn(db)
            deadline = time.monotonic() + CONNECT_WAIT
    return sock.exists()


def _traced() -> bool:
    """Whether strace, gdb or any ptrace tracer traces this process (TracerPid)."""
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as status:
            for line in status:
                if line.startswith("TracerPid:"):
                    return int(line.split()[1]) != 0
    except (OSError, ValueError, IndexError):
        pass
    return False


def _spawn(db: Path) -> None:
    argv = [sys.executable, "-m", "dh_cli.mirror.shared_server", str(db)]
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the intermediate child: only system calls, then exec
        try:
            os.setsid()
            if os.fork() == 0:
                null = os.open(os.devnull, os.O_RDWR)
                for fd in (0, 1, 2):
                    os.dup2(null, fd)
                os.closerange(3, 65536)
                os.chdir("/")
                os.execv(argv[0], argv)
        finally:
            os._exit(0)
    os.waitpid(pid, 0)


class SharedMirror:
    def __init__(self, world_path: Path, wrapper, session_id: str, watch_dirs: list[Path],
                 notice=None):
        self.world_path, self.wrapper, self.session_id = world_path, wrapper, session_id
        self.db = Path(world_path).resolve()  # the server's name for the log (its socket's)
        self.log_was_there = self.db.exists()
        self.watch_dirs = list(watch_dirs)
        self.notice = notice or (lambda text: print(text, file=sys.stderr))
        self.native_id: str | None = None
        self.progress = time.monotonic()
        self.committed = threading.Event()  # set on each progress report (workspace/watch.py)
        self.error: BaseException | None = None
        self.local: LiveMirror | None = None  # the in-process mirror, when the server has not the session
        self.sock: socket.socket | None = None
        self.server: int | None = None  # its pid, from SO_PEERCRED
        self.held, self.released = threading.Event(), threading.Event()
        self.committed_at_release: dict | None = None  # the server's offsets in `released`
        self.lock = threading.Lock()  # the takeover against found_id and stop
        self.releasing = False
        self.reader = threading.Thread(target=self._read, name="dh-shared-cl", daemon=True)

    @property
    def last_progress(self) -> float:
        local = self.local
        return max(self.progress, local.last_progress) if local is not None else self.progress

    @property
    def shared(self) -> bool:
        """Whether the server mirrors the session now (for the tests and the bench)."""
        return self.held.is_set() and self.local is None

    def start(self) -> "SharedMirror":
        try:
            self._hold()
        except (OSError, ValueError):
            with self.lock:  # a found_id meanwhile reaches the in-process mirror too
                if self.sock is None:  # never reached a server: nothing of it holds the session
                    self._take_back()
        return self

    def _hold(self) -> None:
        sock = connect(socket_path(self.db), CONNECT_WAIT)  # no server: in-process (start)
        self.server, uid = peer(sock)
        if uid != os.getuid():
            sock.close()
            raise OSError("the shared mirror's socket belongs to another user")
        if self.server <= 0:
            # in a pid namespace this dh cannot see (a container sharing DH_HOME): _force
            # could not stop it, and it sees other paths than this dh
            sock.close()
            raise OSError("the shared mirror runs where this dh cannot see its process")
        sock.settimeout(None)
        with self.lock:  # found_id sends nothing before the hold
            self.sock = sock
            self.reader.start()
            try:
                sock.sendall(wire.message(wire.HOLD, version=PROTOCOL, session=self.session_id,
                                          wrapper=self.wrapper.name, native_id=self.native_id,
                                          dirs=[str(d) for d in self.watch_dirs]))
            except OSError:
                pass  # the reader sees the socket close and takes the session back
        if not self.held.wait(HOLD_WAIT):
            self._force()

    def _read(self) -> None:
        name_os_thread("dh-shared-cl")
        try:
            lines = Lines()
            while data := self._recv():
                for message in lines.feed(data):
                    self._heard(message)
        except Exception:  # a line this dh cannot read: another server version, or a bug
            self._hang_up()
        finally:
            self._gone()

    def _recv(self) -> bytes:
        try:
            return self.sock.recv(65536)
        except OSError:
            return b""  # a broken connection is a closed one

    def _hang_up(self) -> None:
        """After a line this dh cannot read, the server may still hold the session: taking it
        back now would make two writers. Shut this side instead (the server then takes the
        client for gone, (c): it syncs once more and lets go) and read on to its close."""
        try:
            self.sock.shutdown(socket.SHUT_WR)
        except OSError:
            pass
        while self._recv():
            pass
        try:
            self.notice("dh: the shared mirror sent what this dh cannot read (another dh "
                        "version?); dh takes the session back")
        except Exception:
            pass  # the notice is the lesser loss: the take-back must still run

    def _heard(self, message) -> None:
        """One message; a message of another shape raises (ValueError, KeyError...)."""
        if not isinstance(message, dict):
            raise ValueError(f"not a message: {message!r}")
        op = message.get("op")
        if op == wire.HELD:
            self.held.set()
        elif op == wire.PROGRESS:
            self._progressed(message["at"])
        elif op == wire.NOTICE:
            self.notice(_text(message["text"]))
        elif op == wire.RELEASED:
            self._released(message)

    def _released(self, message: dict) -> None:
        committed = message.get("committed") or {}
        if not isinstance(committed, dict):
            raise ValueError(f"committed offsets that are not a mapping: {committed!r}")
        self.committed_at_release = committed
        if message.get("progress_at") is not None:
            self._progressed(message["progress_at"])

    def _progressed(self, at) -> None:
        self.progress = max(self.progress, _seconds(at))
        self.committed.set()

    def _gone(self) -> None:
        """The socket closed: the server let go of the session or died, all its threads
        with it (b). Unless the attempt is ending, mirror in-process from the committed offset."""
        try:
            with self.lock:
                if not self.releasing:
                    self._take_back()
        finally:  # whatever happened, nobody waits for an answer that cannot come
            self.held.set()
            self.released.set()

    def _take_back(self) -> None:
        """Under self.lock: a found_id then sees no mirror here, or one that has the id."""
        if self.local is not None:
            return  # taken back already: one in-process mirror per attempt
        if self.log_was_there and not self.db.exists():
            # the server let go because the log was deleted: a mirror would make an empty
            # one (the supervisor then reports the deletion: watchers.py)
            self.error = LogDbError(f"the log {self.db} is gone")
            return
        local = LiveMirror(self.world_path, self.wrapper, self.session_id, self.watch_dirs,
                           notice=self.notice)
        local.committed = self.committed
        local.native_id = self.native_id
        self.local = local.start()

    def found_id(self, native_id: str) -> None:
        with self.lock:
            self.native_id = native_id
            if self.local is not None:
                self.local.found_id(native_id)
            elif self.sock is not None:
                try:
                    self.sock.sendall(wire.message(wire.NATIVE_ID, id=native_id))
                except OSError:
                    pass  # closed: the takeover passes the id on

    def stop(self) -> None:
        """(d): the server lets go of the session (or is gone) before this returns; the
        caller then drains the native files itself."""
        with self.lock:
            self.releasing = True
        if self.sock is not None and self.reader.is_alive():
            try:
                self.sock.sendall(wire.message(wire.RELEASE))
            except OSError:
                pass
            if not self.released.wait(RELEASE_WAIT):
                self._force()
            self.reader.join(GONE_WAIT)
        if self.local is not None:
            self.local.stop()
            self.error = self.local.error
        if self.sock is not None:
            self.sock.close()

    def _force(self) -> None:
        """A server that does not answer may still write: kill it (it is ours, same uid) and
        wait for its socket to close, which it does only once its last thread is gone."""
        self.notice("dh: the shared mirror did not answer; dh stops it and mirrors in-process")
        if self.server is not None and self.server > 0:  # pid 0 or -1 would be a group or all
            try:
                os.kill(self.server, signal.SIGKILL)
            except OSError:
                pass
        self.reader.join(GONE_WAIT)


def _seconds(value) -> float:
    """A server's monotonic time, refused unless a finite number (bool and str are not)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"not a time: {value!r}")
    return float(value)


def _text(value) -> str:
    if not isinstance(value, str):
        raise ValueError(f"not a text: {value!r}")
    return value
