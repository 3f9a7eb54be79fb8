"""The shared mirror: ONE process per log (dh.db) mirrors the native files of every live
session whose `dh run` handed it over, with one thread, one inotify descriptor, one database
connection and one checkpoint thread, instead of one mirror thread (and its cold wake-ups)
in each `dh run`. Measured before it was built (bench/bench_shared_mirror.py): 179-185 us
per record and 0.11-0.12 cores at 32 x 20/s and 128 x 5/s, against 604-1,294 us and 0.80
cores with one mirror per `dh run`. Sessions whose id dh must discover by cwd and time
(a Launch) stay in the `dh run` process: only sessions the log can locate are handed over.

Started on demand by the first `dh run` that needs it (shared_client.py), detached in a
session of its own: `python -m dh_cli.mirror.shared_server DB`. It holds `DB.mirror.lock`
(flock) for its whole life, so there is one server per log, and listens on `DB.mirror.sock`
(0600, every peer's uid checked with SO_PEERCRED). It exits IDLE_EXIT s after its last
client left, or once its log's folder is gone or replaced (letting every session go).

The handover (one writer per session, nothing lost, whoever dies). The log is the truth: a
source's offset is committed in the same transaction as its records (tailer.py), so whoever
mirrors next starts from what is committed, and a record is never logged twice (the log's
unique index on source, generation and offset would refuse it, as a LogConflict).
  (a) Hold. A client connects, sends `hold` (session, wrapper, folders) and waits for `held`.
      From `held` on, the server is the session's only writer and the client writes none of
      its records. One connection carries one session for one attempt.
  (b) The server dies (even SIGKILL). The kernel closes the client's socket only when the
      server's last thread is gone, so when the client reads EOF nothing of the server can
      write any more; the client then mirrors the session in-process (LiveMirror) from the
      committed offset. Any connection the server closes itself it has let go of first (the
      session is out of its tables before the close), and a session the server cannot mirror
      (an unexpected error) is let go of the same way: the client takes it back.
  (c) The client dies. The server reads EOF, lets the session go and syncs it once more
      (what the harness wrote so far), again every RETRY s while the log cannot take it. A
      later `hold` of the same session (a `dh resume`, which holds the session lock the dead
      client had) first ends the old holder the same way, then mirrors from the log.
  (d) Release. At the end of an attempt the client sends `release`; the server lets the
      session go and answers `released` with the offsets it committed, then closes. Only then
      does the client run the final drain (supervisor/watchers.py prepare_sync) itself. A
      client that gets no `held` or `released` in time kills the server (same uid, its pid
      from SO_PEERCRED) and waits for EOF, which is (b).
What the supervisor needs back: `progress` (when records were last committed: stall
detection, the workspace watcher's wake-up) at most once per PROGRESS_EVERY per session, and
`notice` lines (a full disk, the log writable again) as the in-process mirror prints them."""

from __future__ import annotations

import fcntl
import os
import resource
import select
import sys
import time
from pathlib import Path

from ..osthread import name_os_thread
from .inotify import Inotify
from .shared_conns import Conn, Conns
from .shared_sessions import Held, SessionMirrors
from . import shared_wire as wire
from .shared_wire import keep_errors, listen, lock_path, same_user, socket_path

IDLE_EXIT = 5.0  # seconds without a client before the server exits
# A client is told of progress at most this often: the supervisor looks once per TICK (1 s),
# and every message wakes a thread in the client, which is what the server is there to save
PROGRESS_EVERY = 1.0
HOLD_FIRST = 10.0  # seconds a connection may stay without a `hold` (it keeps the server up)
CHECK_LOG_EVERY = 1.0  # seconds between looks at whether the log is still there
OVERFLOW = -1  # the watch descriptor of inotify's "queue overflowed, events were lost"
LET_GO = "dh: the shared mirror let go of the session after an unexpected error"


class Server:
    def __init__(self, db: Path, lock: int):
        self.db, self.lock = db, lock
        self.listener = listen(socket_path(db))
        self.listener.setblocking(False)
        self.bound = _identity(socket_path(db))  # only this socket is ours to unlink
        self.log = _identity(db)  # the log this server writes (see _log_is_there)
        self.inotify = Inotify()
        # one poll set, changed as connections come and go: rebuilding it at each wake-up
        # cost a register per client, many times a second
        self.poller = select.poll()
        for fd in (self.listener.fileno(), self.inotify.fd):
            self.poller.register(fd, select.POLLIN)
        self.next_due = 0.0  # no held session is due a sync without an event before this
        self.mirrors = SessionMirrors(db, lambda held, folder: self._watch(held.owner, folder),
                                      lambda held, data: self._send(held.owner, data))
        self.conns = Conns(self.poller, self.inotify, self.mirrors)
        self.idle_since: float | None = time.monotonic()
        self.log_checked = time.monotonic()

    # the loop ---------------------------------------------------------------------------
    def serve(self) -> None:
        self.mirrors.start()
        try:
            while not self._idle_too_long() and self._log_is_there():
                self._once()
        finally:
            self._shut()

    def _idle_too_long(self) -> bool:
        now = time.monotonic()
        if self.conns or self.mirrors.draining:
            self.idle_since = None
        elif self.idle_since is None:
            self.idle_since = now
        return self.idle_since is not None and now - self.idle_since > IDLE_EXIT

    def _log_is_there(self) -> bool:
        """False once the log's folder was removed or replaced (its lock file is not the one
        this server holds): the server then lets every session go, and exits. Checked once
        a second; writing on would go into a deleted file, or make the folder again."""
        now = time.monotonic()
        if now - self.log_checked < CHECK_LOG_EVERY:
            return True
        self.log_checked = now
        held = os.fstat(self.lock)
        return _identity(lock_path(self.db)) == (held.st_dev, held.st_ino) \
            and _identity(self.db) == self.log

    def _once(self) -> None:
        # poll, not select(): a server of 1,000 sessions has descriptors past 1023
        ready = [fd for fd, _ in self.poller.poll(self._timeout() * 1000)]
        for fd in ready:
            if fd == self.listener.fileno():
                self._accept()
            elif fd == self.inotify.fd:
                self._changed()
            elif fd in self.conns.by_fd:
                self._read(self.conns.by_fd[fd])
        now = time.monotonic()
        scan = now >= self.next_due  # the held sessions are looked over only then
        due = {c for c in self.conns.held() if c.held.due <= now} if scan else set()
        self._sync([c.held for c in self.conns.dirty | due if c.held is not None])
        self.conns.dirty.clear()
        if scan:
            self.next_due = min((c.held.due for c in self.conns.held()), default=float("inf"))
        self._report()
        self.mirrors.drain_due(now)
        if len(self.conns) > len(self.conns.by_session):
            self._close_silent(now)

    def _close_silent(self, now: float) -> None:
        """A connection that never asked for a hold (a hung or stopped client, a probe) would
        keep the server from its idle exit."""
        for conn in [c for c in self.conns.all() if c.held is None and now - c.since > HOLD_FIRST]:
            self.conns.close(conn)

    def _timeout(self) -> float:
        """Until the next poll of a session or the next progress report (or the idle exit)."""
        now = time.monotonic()
        deadlines = [now + min(IDLE_EXIT, CHECK_LOG_EVERY), self.next_due, self.mirrors.next_drain()]
        deadlines += [c.held.reported + PROGRESS_EVERY for c in self.conns.reporting
                      if c.held is not None]
        return max(0.0, min(deadlines) - now)

    def _changed(self) -> None:
        """Files changed: the sessions watching those folders sync. While records stream in,
        let a few more arrive first (mirror/pacing.py), as the in-process mirror does."""
        touched = self.inotify.drain()
        window = self.mirrors.pacer.window()
        started = time.monotonic()
        self.mirrors.fold_wal()  # in the time the appends gather in, when there is one
        if window > 0:
            time.sleep(max(0.0, window - (time.monotonic() - started)))
            touched |= self.inotify.drain()
        if OVERFLOW in touched:  # events were lost: any session may have news
            self.conns.dirty |= set(self.conns.held())
        for wd in touched:
            self.conns.dirty |= self.conns.watching.get(wd) or self._adopt(wd)

    def _adopt(self, wd: int) -> set[Conn]:
        """A folder the inotify watcher followed by itself (created inside a watched one,
        e.g. Codex's dated folders) wakes the sessions watching a folder above it."""
        path = self.inotify.folders.get(wd)
        if path is None:
            return set()
        folder = os.fsdecode(path)
        conns = {c for c in self.conns.held()
                 if any(folder.startswith(f"{d}{os.sep}") for d in c.held.dirs)}
        for conn in conns:
            self.conns.watch(conn, wd)
        return conns

    # clients ----------------------------------------------------------------------------
    def _accept(self) -> None:
        try:
            sock, _ = self.listener.accept()
        except OSError:
            return
        if not same_user(sock):
            sock.close()  # only the log's owner may hand it sessions
            return
        sock.setblocking(False)
        self.conns.add(sock)

    def _read(self, conn: Conn) -> None:
        try:
            data = conn.sock.recv(65536)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self._client_gone(conn)
            return
        try:
            messages = conn.lines.feed(data)
        except ValueError:
            messages = [None]  # no message: the client broke the protocol (_handle drops it)
        for message in messages:
            try:
                self._handle(conn, message)
            except Exception:  # noqa: BLE001 - a message it cannot take: the client takes its session back
                self.conns.close(conn)
            if conn.sock.fileno() < 0:
                return

    def _handle(self, conn: Conn, message: dict) -> None:
        op = message.get("op") if isinstance(message, dict) else None
        if op == wire.HOLD and conn.held is None:
            self._hold(conn, message)
        elif op == wire.NATIVE_ID and conn.held is not None:
            conn.held.set_native_id(message["id"])
            self.conns.dirty.add(conn)
        elif op == wire.RELEASE and conn.held is not None:
            held = self.conns.let_go(conn)
            self._send(conn, wire.message(wire.RELEASED, committed=held.positions(),
                                          progress_at=held.progress_at))
            self.conns.close(conn)
        else:
            self.conns.close(conn)  # a client that breaks the protocol gets its session back

    def _hold(self, conn: Conn, message: dict) -> None:
        try:
            held = Held(message, conn)
        except Exception:  # noqa: BLE001 - a bad hold (e.g. an unknown harness): the client mirrors in-process
            self.conns.close(conn)
            return
        old = self.conns.by_session.get(held.session_id)
        if old is not None:  # its client died (the new one holds the session lock): (c)
            self._client_gone(old)
        self.mirrors.draining.pop(held.session_id, None)  # the new holder starts from the log
        self.conns.hold(conn, held)
        for folder in held.dirs:
            self._watch(conn, folder)
        if self._send(conn, wire.message(wire.HELD)):
            self.conns.dirty.add(conn)

    def _client_gone(self, conn: Conn) -> None:
        """(c): the client died or hung up: let the session go, and log what was written."""
        held = conn.held
        self.conns.close(conn)
        if held is not None:
            self.mirrors.drain(held)

    def _send(self, conn: Conn, data: bytes) -> bool:
        """Never blocks the loop; a client that cannot take a whole message gets its session
        back (the connection is closed once the session is out of the tables). A client that
        is gone is left to its EOF, which the next poll reads: _client_gone drains the session
        (dropped here, a progress report to a client just killed let its session go unsynced:
        the server exited with 23 of its 55 lines unlogged, tests/test_shared_mirror.py)."""
        try:
            sent = conn.sock.send(data)
        except (BrokenPipeError, ConnectionResetError):
            return False
        except OSError:
            sent = -1
        if sent != len(data):
            self.conns.close(conn)
            return False
        return True

    def _watch(self, conn: Conn, folder: Path) -> None:
        if conn.held is None:  # its client is gone: the drain is tried again on a timer
            return
        wd = self.inotify.add(str(folder))
        if wd is not None:
            self.conns.watch(conn, wd)

    # mirroring --------------------------------------------------------------------------
    def _sync(self, sessions: list[Held]) -> None:
        if not sessions:
            return
        broken = self.mirrors.sync(sessions)
        # what the round did is looked at here, for these sessions only: a loop over every
        # session at each wake-up cost ~10 us per record with 32 sessions at 20 records/s
        self.next_due = min(self.next_due, *(held.due for held in sessions))
        self.conns.reporting.update(held.owner for held in sessions if held.progress_at is not None)
        for held in broken:  # the client takes the session back: (b)
            if held.owner.held is held:
                self._send(held.owner, wire.message(wire.NOTICE, text=LET_GO))
                self.conns.close(held.owner)

    def _report(self) -> None:
        now = time.monotonic()
        for conn in list(self.conns.reporting):
            held = conn.held
            if held is None or held.progress_at is None:
                self.conns.reporting.discard(conn)
            elif now - held.reported >= PROGRESS_EVERY:
                at, held.progress_at, held.reported = held.progress_at, None, now
                self.conns.reporting.discard(conn)
                self._send(conn, wire.message(wire.PROGRESS, at=at))

    def _shut(self) -> None:
        """Only the lock's holder unlinks the socket, and only its own (a server whose log
        folder was made anew must not take the new server's); a client still in the listen
        queue reads EOF before any `held` and mirrors in-process, and so does every client
        still held when the log went away."""
        if _identity(socket_path(self.db)) == self.bound:
            try:
                os.unlink(socket_path(self.db))
            except OSError:
                pass
        self.listener.close()
        for conn in self.conns.all():
            self.conns.close(conn)
        self.mirrors.stop()


def _identity(path: Path) -> tuple[int, int] | None:
    try:
        info = os.stat(path)
    except OSError:
        return None
    return info.st_dev, info.st_ino


def _more_files() -> None:
    """Up to the hard limit of open files: each session holds a socket and a file or two,
    and the soft limit is often 1,024."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or hard > soft:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        except (ValueError, OSError):
            pass


def main(argv: list[str]) -> int:
    db = Path(argv[0]).resolve()
    keep_errors(db)
    name_os_thread("dh-shared")
    os.chdir("/")  # hold no folder of the session that started it
    lock = os.open(lock_path(db), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return 0  # another server mirrors this log
    os.ftruncate(lock, 0)
    os.write(lock, str(os.getpid()).encode())
    socket_path(db).unlink(missing_ok=True)  # a dead server's
    _more_files()
    Server(db, lock).serve()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
