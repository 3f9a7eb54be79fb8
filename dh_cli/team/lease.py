"""A session's lease in a shared world: one holder across machines (issue 14).

`acquire` takes the lease when nobody holds it, when its heartbeat is older than its TTL, or
when this very process already holds it; the epoch grows with each new holder (a fence for
whoever builds takeover on it). While held, a thread renews the heartbeat every third of the
TTL on its own connection; `release` marks it released if the epoch is still ours (the row
and its epoch stay: an older epoch's writes are still refused)."""

from __future__ import annotations

import threading

from ..errors import SessionLocked, WorldError
from ..worlds.local import LocalWorld
from .protocol import Holder, TeamWorld

TTL_S = 15  # (issue 15's default) a holder that misses renewals this long (crash, lost network) gives the lease up


def take(world: TeamWorld, session_id: str, ttl_s: float, holder: Holder | None = None) -> int:
    """Take the lease (free, lapsed, released, or already this process's); its epoch.
    Raises SessionLocked while another holder's lease is live."""
    epoch = world.lease_take(session_id, holder or Holder.me(), ttl_s)
    if epoch is None:
        raise held_elsewhere(world, session_id, ttl_s)
    return epoch


def adopt(world: TeamWorld, session_id: str, epoch: int, ttl_s: float) -> int:
    """Take over a lease a worker of this machine claimed for this process (same epoch)."""
    if not world.lease_adopt(session_id, epoch, Holder.me(), ttl_s):
        raise SessionLocked(f"the lease of session {session_id} at epoch {epoch} is no longer "
                            "this machine's", hint="another worker took it over")
    return epoch


def held_elsewhere(world: TeamWorld, session_id: str, ttl_s: float) -> SessionLocked:
    found = world.leases(session_id).get(session_id)
    host, pid, left = (found.host, found.pid, found.left) if found else ("another machine", "?", ttl_s)
    return SessionLocked(f"session {session_id} is held in the world by dh on {host} "
                         f"(pid {pid}); its lease is live for {max(0, int(-(-left // 1)))} more s",
                         hint="wait for it to finish, or for its lease to lapse")


class Lease:
    def __init__(self, world: TeamWorld, session_id: str, ttl_s: int = TTL_S):
        self.world, self.session_id, self.ttl_s = world, session_id, ttl_s
        self.holder, self.epoch = Holder.me(), None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def acquire(self, adopt_epoch: int | None = None) -> "Lease":
        if adopt_epoch is not None:  # claimed for this process by a worker or --steal (tenure.py)
            self.epoch = adopt(self.world, self.session_id, adopt_epoch, self.ttl_s)
        else:
            self.epoch = take(self.world, self.session_id, self.ttl_s, self.holder)
        self._thread = threading.Thread(target=self._renew, name="dh-lease", daemon=True)
        self._thread.start()
        return self

    def _renew(self) -> None:
        from . import open_world

        try:
            mine = open_world(self.world.name, self.world.url, migrate=False)
        except Exception:  # the lease then lapses on its own after its TTL
            return
        try:
            while not self._stop.wait(self.ttl_s / 3):
                mine.lease_renew(self.session_id, self.epoch)
        except Exception:
            pass
        finally:
            mine.close()

    def release(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        if self.epoch is not None:
            self.world.lease_release(self.session_id, self.epoch)
            self.epoch = None

    def let_go(self, refused: str | None = None, passed: str | None = None) -> None:
        """Stop holding without ending the session (a resume that failed before its
        supervisor ran): the lease lapses now, so the open turn stays claimable, or, with a
        reason, is kept from every worker (`refused`, shown by `dh world status`). `passed`:
        why this machine could not run it, noted for people, claimable by others."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        epoch, self.epoch = self.epoch, None
        if epoch is None:
            return
        try:
            self.world.lease_lapse(self.session_id, epoch, refused)
            if passed:
                self.world.lease_pass(self.session_id, epoch, f"{self.holder.host}: {passed}")
        except WorldError:
            pass  # the server is gone: the lease lapses on its own after its TTL

    def __enter__(self) -> "Lease":
        return self if self.epoch is not None else self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()


def hold_and_pull(local: LocalWorld, world_name: str, ref: str, url: str | None = None,
                  ttl_s: float | None = None, adopt_epoch: int | None = None):
    """`dh resume --world`: find the session in the world, take its lease (refused while
    another holder's is live), then pull it. (session id, records added or None, where from,
    the lease; release it, which also closes the world, when the resume ends)."""
    from . import open_world
    from .sync import moved_here, pull

    remote = open_world(world_name, url)
    try:
        found = remote.find_session(ref)
        lease = Lease(remote, found.id, round(ttl_s or TTL_S)).acquire(adopt_epoch)
    except BaseException:
        remote.close()
        raise
    try:
        added = None if moved_here(local, found.id) else pull(remote, local, [found.id]).records
    except BaseException:
        try:
            lease.let_go()  # not ended by anyone: claimable again (issue 15)
        finally:
            remote.close()
        raise
    return found.id, added, remote.shown, lease
