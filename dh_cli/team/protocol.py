"""What a team world does beyond the World interface (base.py), so that leases, claims,
fencing, replication, takeover and workers are written once (lease.py, tenure.py,
takeover.py, shipper.py, worker.py) and each server is one implementation of it.

The server decides, never the client: every lease change is one atomic step on the server
(a PostgreSQL statement, a Redis Lua script), read with the server's clock, and a write that
does not carry the session's current epoch is refused by the server itself (`fence`)."""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from typing import Protocol

from ..errors import WorldError
from ..models import Source
from ..worlds.base import World

# takeovers of one session within the window past which a claim makes it FATAL for everyone
# (a resume that kept failing was claimed again every TTL: 14 launches in 40 s)
TAKEOVER_BUDGET, TAKEOVER_WINDOW_S = 3, 600

# The refusal of a write that does not carry the session's current epoch: the code every
# server refuses it with (PostgreSQL's SQLSTATE, the head of a Redis script's error reply),
# and the channel each server announces lease changes on (NOTIFY, PUBLISH).
FENCED = "DHF01"
LEASE_CHANNEL = "dh_leases"


def fenced_error(error: WorldError) -> WorldError:
    """`error` marked as the server's refusal of a stale epoch (is_fenced)."""
    error.fenced = True
    return error


def is_fenced(exc: BaseException | None) -> bool:
    """Whether an error (or one it was raised from) is the server refusing a stale epoch."""
    while exc is not None:
        if getattr(exc, "fenced", False):
            return True
        exc = exc.__cause__ or exc.__context__
    return False


def over_budget(taken: int = TAKEOVER_BUDGET) -> str:
    """The reason a claim past the budget leaves on the lease."""
    return (f"FATAL: taken over {taken} times in {TAKEOVER_WINDOW_S // 60} minutes, its resume "
            "failing each time; `dh resume` it by hand to see why")


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

    def key(self) -> tuple:
        return (self.host, self.boot_id, self.pid)


@dataclass
class LeaseRow:
    """A session's lease as the server holds it; ages are the server's clock."""

    session_id: str
    host: str
    boot_id: str
    pid: int
    epoch: int
    age: float  # seconds since the last heartbeat
    left: float  # seconds until it lapses (<= 0: lapsed)
    released: bool = False
    refused: str | None = None
    prev_host: str | None = None
    prev_epoch: int | None = None
    passed: str | None = None  # why the last worker that saw it as an orphan left it to others

    @property
    def live(self) -> bool:
        return self.left > 0 and not self.released

    def held_by(self, holder: Holder) -> bool:
        return (self.host, self.boot_id, self.pid) == holder.key()


class LeaseChanges(Protocol):
    """Wakes whoever waits on it when any lease changes (a NOTIFY, a Redis message)."""

    def fileno(self) -> int: ...
    def wait(self, timeout: float) -> bool: ...  # whether a change came
    def drain(self) -> None: ...
    def close(self) -> None: ...


class TeamWorld(World, Protocol):
    url: str
    shown: str  # the URL with its password masked
    url_variable: str  # the environment variable a child dh reads the URL from

    def __init__(self, url: str | None = None, migrate: bool = True,
                 connect_timeout: int = 10) -> None: ...

    # the URL to connect to: the given one, else the world's variables (url_variable first)
    @staticmethod
    def resolve_url(url: str | None) -> str: ...

    def migrate(self) -> None: ...  # its schema or key layout, brought to this dh's version
    def get_source(self, session_id: str, relpath: str) -> Source | None: ...

    # leases: each call one atomic step on the server; epochs only grow
    def lease_take(self, session_id: str, holder: Holder, ttl_s: float) -> int | None: ...
    def lease_adopt(self, session_id: str, epoch: int, holder: Holder, ttl_s: float) -> bool: ...
    def lease_renew(self, session_id: str, epoch: int, pid: int | None = None) -> bool: ...
    def lease_release(self, session_id: str, epoch: int) -> None: ...
    def lease_lapse(self, session_id: str, epoch: int, refused: str | None = None) -> None: ...
    def lease_move(self, session_id: str, holder: Holder, ttl_s: float,
                   only_held: bool = False) -> int | None: ...
    # a claim counts the session's takeovers on the server: past TAKEOVER_BUDGET within the
    # window it refuses the lease with over_budget() and sets the session `fatal` instead
    def lease_claim(self, session_id: str, epoch: int, holder: Holder, ttl_s: float) -> bool: ...
    def lease_refuse(self, session_id: str, epoch: int, reason: str) -> None: ...
    # a note for people, never for claims: why a worker left the orphan to others
    def lease_pass(self, session_id: str, epoch: int, reason: str) -> None: ...
    def leases(self, session_id: str | None = None) -> dict[str, LeaseRow]: ...
    def lease_changes(self) -> LeaseChanges: ...

    # fencing: this connection's writes carry (session, epoch) from now on
    def fence(self, session_id: str, epoch: int) -> None: ...

    # settings of the world
    @property
    def masks_records(self) -> bool: ...
    def set_records_mode(self, mode: str) -> None: ...

    # workspace objects and snapshots (rows as dh_cli/workspace/store.py lays them out)
    def ws_known(self, hashes: list[str]) -> set[str]: ...
    def ws_put(self, objects: list[tuple], snapshots: list[tuple]) -> int: ...
    def ws_snapshot_rows(self, session_id: str, after_seq: int = 0) -> list[tuple]: ...
    def ws_object_rows(self, hashes: list[str]) -> list[tuple]: ...


def only_match(matches: list, ref: str, where: str, name: str):
    """The one session a reference matched in a team world (find_session)."""
    from ..errors import AmbiguousSession, SessionNotFound

    if not matches:
        raise SessionNotFound(f"no session matches {ref!r} in the {where} world",
                              hint=f"see `dh world status {name}`")
    if len(matches) > 1:
        raise AmbiguousSession(f"{ref!r} matches {len(matches)} sessions in the {where} world",
                               hint="give more characters of the id")
    return matches[0]


def ttl_int(ttl_s: float) -> int:
    """Leases are kept in whole seconds, at least one."""
    return max(1, round(ttl_s))
