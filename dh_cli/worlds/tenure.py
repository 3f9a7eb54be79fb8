"""Holding a session's lease while a supervisor runs it (issue 15), on the lease row of issue 14.

A thread, on its own connection, renews the heartbeat every third of the TTL. It knows three
things the supervisor asks about:
- `lost`: the epoch moved (another machine took the session over). The supervisor stops its
  harness and this process never writes the session to the world again (the server's fence
  refuses it anyway, see fencing.py).
- `expired`: no renewal succeeded for longer than the TTL (the server is unreachable). The
  harness may run on, its log stays the truth here, but the supervisor does not relaunch it:
  another machine may be taking it over.
- `epoch`: the epoch held, None until the lease is first taken (a `dh run` started while the
  server is down takes it as soon as the server answers).
"""

from __future__ import annotations

import threading
import time

from ..errors import SessionLocked, WorldError
from .lease import _ACQUIRE, Holder, Lease, adopt  # noqa: F401 (adopt: live_world.py)

TTL_S = 15.0  # a holder silent this long is presumed dead and its session may be taken over


def _connect(url: str):
    from .postgres import PostgresWorld

    return PostgresWorld(url, migrate=False, connect_timeout=5)


def acquire(world, session_id: str, ttl_s: float, holder: Holder | None = None) -> int:
    """Take the lease (free, lapsed, or already this process's); its epoch. Raises
    SessionLocked while another holder's lease is live."""
    holder = holder or Holder.me()
    rows = world._rows(_ACQUIRE, {"sid": session_id, "host": holder.host, "boot": holder.boot_id,
                                  "pid": holder.pid, "ttl": max(1, round(ttl_s))})
    if rows:
        return rows[0][0]
    raise Lease(world, session_id)._held_elsewhere()


class Tenure:
    def __init__(self, url: str, session_id: str, ttl_s: float = TTL_S, epoch: int | None = None):
        self.url, self.session_id, self.ttl_s = url, session_id, ttl_s
        self.epoch = epoch
        self.lost: dict | None = None  # who holds it now, once the epoch moved
        self.renewed = time.monotonic()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="dh-lease", daemon=True)

    @property
    def expired(self) -> bool:
        return time.monotonic() - self.renewed > self.ttl_s

    def start(self) -> "Tenure":
        self._thread.start()
        return self

    def _run(self) -> None:
        world = None
        while not self.lost:
            try:
                world = world or _connect(self.url)
                self._beat(world)
            except (WorldError, SessionLocked, OSError) as exc:
                if isinstance(exc, SessionLocked) and self.epoch is None:
                    self.lost = {"reason": str(exc)}
                world = _close(world)
            if self._stop.wait(self.ttl_s / 3 if self.epoch else 1.0):
                break
        _close(world)

    def _beat(self, world) -> None:
        if self.epoch is None:
            self.epoch = acquire(world, self.session_id, self.ttl_s)
        elif not world._rows("UPDATE dh.leases SET heartbeat_at = now() WHERE session_id = %s"
                             " AND epoch = %s RETURNING 1", [self.session_id, self.epoch]):
            self.lost = self._holder_now(world)
            return
        self.renewed = time.monotonic()

    def _holder_now(self, world) -> dict:
        rows = world._rows("SELECT holder_host, holder_pid, epoch FROM dh.leases WHERE session_id = %s",
                           [self.session_id])
        host, pid, epoch = rows[0] if rows else (None, None, None)
        return {"host": host, "pid": pid, "epoch": epoch,
                "reason": f"session {self.session_id} was taken over by dh on {host or 'another machine'}"
                          f" (epoch {self.epoch} -> {epoch or 'released'})"}

    def lapse(self) -> None:
        """Let the lease lapse now without ending the session (a worker handing it back)."""
        world = None
        try:
            world = _connect(self.url)
            world._rows("UPDATE dh.leases SET heartbeat_at = now() - make_interval(secs => ttl_s + 1)"
                        " WHERE session_id = %s AND epoch = %s RETURNING pg_notify('dh_leases', session_id)",
                        [self.session_id, self.epoch])
        except WorldError:
            pass  # it lapses on its own after the TTL
        finally:
            _close(world)

    def stop(self, release: bool = True) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        if release and self.epoch is not None and not self.lost:
            world = None
            try:
                world = _connect(self.url)
                world._rows("UPDATE dh.leases SET released_at = now() WHERE session_id = %s"
                            " AND epoch = %s RETURNING 1", [self.session_id, self.epoch])
            except WorldError:
                pass  # it lapses on its own after the TTL
            finally:
                _close(world)


def _close(world) -> None:
    if world is not None:
        try:
            world.close()
        except Exception:  # noqa: BLE001 - a broken connection is closed as well as it can be
            pass
    return None
