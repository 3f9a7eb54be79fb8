"""What a supervisor needs of a live team world (issue 15), behind four calls:
`attach` (take the lease, start shipping), `taken_over` (the epoch moved: stop the harness),
`may_relaunch` (the lease is held and fresh) and `detach` (ship the rest, release).

The supervisor knows nothing else of worlds: the lease (tenure.py) and the shipper
(shipper.py) run on their own threads and connections."""

from __future__ import annotations

import os
import signal
import threading
from dataclasses import dataclass
from pathlib import Path

from ..errors import UsageError, WorldError
from .shipper import Shipper
from .lease import adopt
from .tenure import TTL_S, Tenure, acquire

WORKFLOW_POSTGRES = "@workflow/world-postgres"  # the original design's name for this world
HAND_BACK = signal.SIGUSR1  # from `dh worker` when it stops: give the session back, open


@dataclass
class WorldLink:
    world: str  # the team world's name (team/: the registry)
    url: str
    ttl_s: float = TTL_S
    epoch: int | None = None  # a lease already taken (dh resume --world)
    adopt_epoch: int | None = None  # a lease a worker of this machine claimed for this process
    notice: object = print
    held: object = None  # the resume's own lease object (lease.py), told when it is handed back

    def attach(self, db_path: Path, session_id: str) -> None:
        self.session_id, self.handing_back, self._previous = session_id, False, None
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(HAND_BACK, self._on_hand_back)
        epoch = self._take(session_id)
        self.tenure = Tenure(self.world, self.url, session_id, self.ttl_s, epoch).start()
        self.shipper = Shipper(db_path, self.world, self.url, session_id, self._epoch,
                               self.notice).start()

    def _take(self, session_id: str) -> int | None:
        """The epoch, taken now when the server answers (refused: SessionLocked, before the
        harness starts); None when it does not, then the lease thread takes it later."""
        if self.epoch is not None:
            return self.epoch
        from . import open_world

        try:
            world = open_world(self.world, self.url, connect_timeout=5)
        except WorldError as exc:
            self.notice(f"dh: the world is unreachable ({exc}); the session runs and is logged "
                        "here, and replicates once the server answers")
            return None
        try:
            if self.adopt_epoch is not None:
                return adopt(world, session_id, self.adopt_epoch, self.ttl_s)
            return acquire(world, session_id, self.ttl_s)
        finally:
            world.close()

    def _epoch(self) -> int | None:
        return None if self.tenure.lost else self.tenure.epoch

    def _on_hand_back(self, signum, frame) -> None:
        self.handing_back = True

    def taken_over(self) -> str | None:
        if self.handing_back:
            return "handed back to the world by the stopping dh worker"
        if self.tenure.lost:
            return self.tenure.lost["reason"]
        return self.shipper.fenced

    def may_relaunch(self) -> bool:
        return not self.taken_over() and self.tenure.epoch is not None and not self.tenure.expired

    def detach(self) -> None:
        if self._previous is not None:
            signal.signal(HAND_BACK, self._previous)
        complete = self.shipper.stop()  # everything committed here reaches the world first
        lost = self.tenure.lost or self.shipper.fenced
        if self.handing_back and not lost:
            if self.held is not None:
                self.held.epoch = None  # so that the resume's lease is not released as ended
            self.tenure.stop(release=False)
            self.tenure.lapse()  # open, and claimable by another worker at once
            return
        self.tenure.stop(release=complete and not lost)
        if not complete and not lost:
            self.notice(f"dh: replication of session {self.session_id} is behind; the local log has "
                        f"it all: run `dh world push {self.world}` once the server answers")


def wanted_world(flag: str | None, settings) -> str:
    """--world, else the config (world = / DH_WORLD), else the Workflow SDK's variable."""
    from . import names

    if flag:
        if flag not in ("local", *names()):
            raise UsageError(f"unknown world {flag!r}",
                             hint=f"use --world {' or '.join(names())} (or local)")
        return flag
    if settings.world != "local":
        return settings.world
    return "postgres" if os.environ.get("WORKFLOW_TARGET_WORLD") == WORKFLOW_POSTGRES else "local"


def link_for(flag: str | None, url: str | None, ttl: float | None, settings, notice,
             epoch: int | None = None, adopt_epoch: int | None = None,
             held=None) -> WorldLink | None:
    """The link a supervised session keeps to its world; None for the local world."""
    name = wanted_world(flag, settings)
    if name == "local":
        return None
    from . import world_class

    ttl_s = ttl if ttl is not None else getattr(settings, "lease_ttl", TTL_S)
    if ttl_s <= 0:
        raise UsageError("--lease-ttl must be more than 0 seconds")
    found = url or getattr(settings, f"{name}_url", None)
    return WorldLink(name, world_class(name).resolve_url(found), ttl_s, epoch, adopt_epoch, notice,
                     held)
