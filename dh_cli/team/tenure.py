"""Holding a session's lease while a supervisor runs it (issue 15), on the lease row of issue 14.

A thread, on its own connection, renews the heartbeat every third of the TTL. It knows three
things the supervisor asks about:
- `lost`: the epoch moved (another machine took the session over). The supervisor stops its
  harness and this process never writes the session to the world again (the server's fence
  refuses it anyway, see postgres_fencing.py).
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
from .lease import take
from .protocol import TeamWorld

TTL_S = 15.0  # a holder silent this long is presumed dead and its session may be taken over


def _connect(name: str, url: str):
    from . import open_world

    return open_world(name, url, migrate=False, connect_timeout=5)


acquire = take  # take the lease (free, lapsed, or already this process's): lease.py

class Tenure:
    def __init__(self, world: str, url: str, session_id: str, ttl_s: float = TTL_S,
                 epoch: int | None = None):
        self.world, self.url, self.session_id, self.ttl_s = world, url, session_id, ttl_s
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
                world = world or _connect(self.world, self.url)
                self._beat(world)
            except (WorldError, SessionLocked, OSError) as exc:
                if isinstance(exc, SessionLocked) and self.epoch is None:
                    self.lost = {"reason": str(exc)}
                world = _close(world)
            if self._stop.wait(self.ttl_s / 3 if self.epoch else 1.0):
                break
        _close(world)

    def _beat(self, world: TeamWorld) -> None:
        if self.epoch is None:
            self.epoch = acquire(world, self.session_id, self.ttl_s)
        elif not world.lease_renew(self.session_id, self.epoch):
            self.lost = self._holder_now(world)
            return
        self.renewed = time.monotonic()

    def _holder_now(self, world: TeamWorld) -> dict:
        found = world.leases(self.session_id).get(self.session_id)
        host, pid, epoch = (found.host, found.pid, found.epoch) if found else (None, None, None)
        return {"host": host, "pid": pid, "epoch": epoch,
                "reason": f"session {self.session_id} was taken over by dh on {host or 'another machine'}"
                          f" (epoch {self.epoch} -> {epoch or 'released'})"}

    def lapse(self) -> None:
        """Let the lease lapse now without ending the session (a worker handing it back)."""
        self._once(lambda world: world.lease_lapse(self.session_id, self.epoch))

    def stop(self, release: bool = True) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        if release and self.epoch is not None and not self.lost:
            self._once(lambda world: world.lease_release(self.session_id, self.epoch))

    def _once(self, call) -> None:
        """call(world) on a connection of its own; a server that is gone lets the lease lapse
        on its own after the TTL."""
        world = None
        try:
            world = _connect(self.world, self.url)
            call(world)
        except WorldError:
            pass
        finally:
            _close(world)


def _close(world: TeamWorld) -> None:
    if world is not None:
        try:
            world.close()
        except Exception:  # noqa: BLE001 - a broken connection is closed as well as it can be
            pass
    return None
