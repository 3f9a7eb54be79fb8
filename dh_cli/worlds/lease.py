"""A session's lease in a shared world: one holder across machines (issue 14).

`acquire` takes the lease when nobody holds it, when its heartbeat is older than its TTL, or
when this very process already holds it; the epoch grows with each new holder (a fence for
whoever builds takeover on it). While held, a thread renews the heartbeat every third of the
TTL on its own connection; `release` deletes the row if the epoch is still ours."""

from __future__ import annotations

import os
import socket
import threading
from dataclasses import dataclass

from ..errors import SessionLocked, WorldError

TTL_S = 15  # (issue 15's default) a holder that misses renewals this long (crash, lost network) gives the lease up


def boot_id() -> str:
    try:
        with open("/proc/sys/kernel/random/boot_id") as handle:
            return handle.read().strip()
    except OSError:
        return "unknown"


@dataclass
class Holder:
    host: str
    boot_id: str
    pid: int

    @classmethod
    def me(cls) -> "Holder":
        return cls(socket.gethostname(), boot_id(), os.getpid())


_ACQUIRE = """
    INSERT INTO dh.leases AS l (session_id, holder_host, holder_boot_id, holder_pid, epoch,
                                heartbeat_at, ttl_s)
    VALUES (%(sid)s, %(host)s, %(boot)s, %(pid)s, 1, now(), %(ttl)s)
    ON CONFLICT (session_id) DO UPDATE SET holder_host = EXCLUDED.holder_host,
        holder_boot_id = EXCLUDED.holder_boot_id, holder_pid = EXCLUDED.holder_pid,
        epoch = l.epoch + 1, heartbeat_at = now(), ttl_s = EXCLUDED.ttl_s, released_at = NULL,
        refused = NULL, prev_host = l.holder_host, prev_epoch = l.epoch
    WHERE l.heartbeat_at + make_interval(secs => l.ttl_s) < now() OR l.released_at IS NOT NULL
       OR (l.holder_host, l.holder_boot_id, l.holder_pid) = (EXCLUDED.holder_host,
           EXCLUDED.holder_boot_id, EXCLUDED.holder_pid)
    RETURNING epoch"""


_ADOPT = """
    UPDATE dh.leases SET holder_pid = %(pid)s, heartbeat_at = now(), ttl_s = %(ttl)s
    WHERE session_id = %(sid)s AND epoch = %(epoch)s AND holder_host = %(host)s
      AND holder_boot_id = %(boot)s RETURNING epoch"""


def adopt(world, session_id: str, epoch: int, ttl_s: float) -> int:
    """Take over a lease a worker of this machine claimed for this process (same epoch)."""
    me = Holder.me()
    rows = world._rows(_ADOPT, {"sid": session_id, "epoch": epoch, "pid": me.pid, "host": me.host,
                                "boot": me.boot_id, "ttl": max(1, round(ttl_s))})
    if not rows:
        raise SessionLocked(f"the lease of session {session_id} at epoch {epoch} is no longer "
                            "this machine's", hint="another worker took it over")
    return epoch


class Lease:
    def __init__(self, world, session_id: str, ttl_s: int = TTL_S):
        self.world, self.session_id, self.ttl_s = world, session_id, ttl_s
        self.holder, self.epoch = Holder.me(), None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def acquire(self, adopt_epoch: int | None = None) -> "Lease":
        args = {"sid": self.session_id, "host": self.holder.host, "boot": self.holder.boot_id,
                "pid": self.holder.pid, "ttl": self.ttl_s}
        if adopt_epoch is not None:  # claimed for this process by a worker or --steal (tenure.py)
            rows = [(adopt(self.world, self.session_id, adopt_epoch, self.ttl_s),)]
        else:
            rows = self.world._rows(_ACQUIRE, args)
        if not rows:
            raise self._held_elsewhere()
        self.epoch = rows[0][0]
        self._thread = threading.Thread(target=self._renew, name="dh-lease", daemon=True)
        self._thread.start()
        return self

    def _held_elsewhere(self) -> SessionLocked:
        rows = self.world._rows("SELECT holder_host, holder_pid, ceil(extract(epoch FROM heartbeat_at"
                                " + make_interval(secs => ttl_s) - now())) FROM dh.leases WHERE"
                                " session_id = %s", [self.session_id])
        host, pid, left = rows[0] if rows else ("another machine", "?", self.ttl_s)
        return SessionLocked(f"session {self.session_id} is held in the world by dh on {host} "
                             f"(pid {pid}); its lease is live for {int(left or 0)} more s",
                             hint="wait for it to finish, or for its lease to lapse")

    def _renew(self) -> None:
        from .postgres import PostgresWorld

        try:
            mine = PostgresWorld(self.world.url, migrate=False)
        except Exception:  # the lease then lapses on its own after its TTL
            return
        try:
            while not self._stop.wait(self.ttl_s / 3):
                mine._rows("UPDATE dh.leases SET heartbeat_at = now() WHERE session_id = %s"
                           " AND epoch = %s RETURNING 1", [self.session_id, self.epoch])
        except Exception:
            pass
        finally:
            mine.close()

    def release(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        if self.epoch is not None:
            # kept, epoch and all: an older epoch's writes stay refused (fencing.py)
            self.world._rows("UPDATE dh.leases SET released_at = now() WHERE session_id = %s"
                             " AND epoch = %s RETURNING 1", [self.session_id, self.epoch])
            self.epoch = None

    def let_go(self, refused: str | None = None) -> None:
        """Stop holding without ending the session (a resume that failed before its
        supervisor ran): the lease lapses now, so the open turn stays claimable, or, with a
        reason, is kept from every worker (`refused`, shown by `dh world status`)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        epoch, self.epoch = self.epoch, None
        if epoch is None:
            return
        try:
            self.world._rows("UPDATE dh.leases SET heartbeat_at = now() - make_interval(secs =>"
                             " ttl_s + 1), refused = %s WHERE session_id = %s AND epoch = %s"
                             " RETURNING pg_notify('dh_leases', session_id)",
                             [refused, self.session_id, epoch])
        except WorldError:
            pass  # the server is gone: the lease lapses on its own after its TTL

    def release_and_close(self) -> None:
        try:
            self.release()
        finally:
            self.world.close()

    def __enter__(self) -> "Lease":
        return self if self.epoch is not None else self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()


def hold_and_pull(local, world_name: str, ref: str, url: str | None = None,
                  ttl_s: float | None = None, adopt_epoch: int | None = None):
    """`dh resume --world`: find the session in the world, take its lease (refused while
    another holder's is live), then pull it. (session id, records added or None, where from,
    the lease; release it, which also closes the world, when the resume ends)."""
    from ..resume.relocate import _moved_here
    from .sync import open_remote, pull

    remote = open_remote(world_name, url)
    try:
        found = remote.find_session(ref)
        lease = Lease(remote, found.id, round(ttl_s or TTL_S)).acquire(adopt_epoch)
    except BaseException:
        remote.close()
        raise
    try:
        added = None if _moved_here(local, found.id) else pull(remote, local, [found.id]).records
    except BaseException:
        try:
            lease.let_go()  # not ended by anyone: claimable again (issue 15)
        finally:
            remote.close()
        raise
    return found.id, added, getattr(remote, "shown", remote.name), lease
