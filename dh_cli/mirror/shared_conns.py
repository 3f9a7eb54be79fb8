"""The shared mirror server's connections, and every table a connection is in: by its socket
(and the poll set), by the session it holds (and the mirrors' held set), by the inotify
watches that wake it (and the watches themselves), and the dirty and reporting sets of the
loop. They must agree: a connection closed but still dirty is synced for nobody, a watch
left behind wakes a session that is gone. So only this class changes them, and `close()`
takes a connection out of all of them at once."""

from __future__ import annotations

import select
import socket
import time

from .inotify import Inotify
from .shared_sessions import Held, SessionMirrors
from .shared_wire import Lines


class Conn:
    def __init__(self, sock: socket.socket):
        self.sock, self.lines, self.held = sock, Lines(), None
        self.since = time.monotonic()


class Conns:
    def __init__(self, poller: select.poll, inotify: Inotify, mirrors: SessionMirrors):
        self.poller, self.inotify, self.mirrors = poller, inotify, mirrors
        self.by_fd: dict[int, Conn] = {}
        self.by_session: dict[str, Conn] = {}
        self.watching: dict[int, set[Conn]] = {}  # inotify watch -> the connections it wakes
        self.dirty: set[Conn] = set()  # to sync in this round
        self.reporting: set[Conn] = set()  # held connections with progress not yet reported

    def __len__(self) -> int:
        return len(self.by_fd)

    def all(self) -> list[Conn]:
        return list(self.by_fd.values())

    def held(self) -> list[Conn]:
        return [c for c in self.by_fd.values() if c.held is not None]

    def add(self, sock: socket.socket) -> Conn:
        conn = self.by_fd[sock.fileno()] = Conn(sock)
        self.poller.register(sock.fileno(), select.POLLIN)
        return conn

    def hold(self, conn: Conn, held: Held) -> None:
        conn.held = held
        self.mirrors.held.add(held)
        self.by_session[held.session_id] = conn

    def watch(self, conn: Conn, wd: int) -> None:
        self.watching.setdefault(wd, set()).add(conn)
        conn.held.wds.add(wd)

    def let_go(self, conn: Conn) -> Held:
        """The session out of every table (its watches removed once nobody uses them); the
        connection stays open."""
        held, conn.held = conn.held, None
        self.mirrors.held.discard(held)
        if self.by_session.get(held.session_id) is conn:
            del self.by_session[held.session_id]
        for wd in held.wds:
            users = self.watching.get(wd, set())
            users.discard(conn)
            if not users:
                self.watching.pop(wd, None)
                self.inotify.remove(wd)
        return held

    def close(self, conn: Conn) -> None:
        """Lets go of its session first (a closed connection is the client's sign to take the
        session back: nothing of the server may write it after), then closes it."""
        if conn.held is not None:
            self.let_go(conn)
        if self.by_fd.pop(conn.sock.fileno(), None) is not None:
            self.poller.unregister(conn.sock.fileno())
        self.dirty.discard(conn)
        self.reporting.discard(conn)
        conn.sock.close()
