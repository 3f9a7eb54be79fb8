"""The lease half of TeamWorld (protocol.py) in Redis: each call one Lua script
(redis_scripts.py) on the session's lease hash, with the server's clock. A mixin of
RedisWorld. Lease changes are published on a channel; `lease_changes` listens on a
connection of its own and wakes a pipe, so the worker sleeps in one select() on it and on its
own signal pipe, as it does on PostgreSQL's LISTEN connection."""

from __future__ import annotations

import os
import select
import threading

from ..errors import WorldError
from ..procs import drain
from .protocol import LEASE_CHANNEL, TAKEOVER_BUDGET, TAKEOVER_WINDOW_S, Holder, LeaseRow, over_budget, ttl_int


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _lease_row(sid: str, fields: list, now_ms: int) -> LeaseRow:
    got = {_text(fields[i]): _text(fields[i + 1]) for i in range(0, len(fields), 2)}
    try:
        return _parsed_row(sid, got, now_ms)
    except (KeyError, ValueError):
        # anyone who can write the server can write a hash: one that is not a lease must not
        # stop every worker and `dh world status`; shown refused, so no worker claims it
        return LeaseRow(sid, "?", "?", 0, 0, 0.0, 0.0,
                        refused=f"damaged lease in the world (fields: {', '.join(sorted(got))[:200]})")


def _parsed_row(sid: str, got: dict, now_ms: int) -> LeaseRow:
    heartbeat, ttl = int(got["hb"]), int(got["ttl"])
    prev_epoch = got.get("prev_epoch")
    return LeaseRow(sid, got["host"], got["boot"], int(got["pid"]), int(got["epoch"]),
                    (now_ms - heartbeat) / 1000, (heartbeat + ttl * 1000 - now_ms) / 1000,
                    got.get("released") == "1", got.get("refused"), got.get("prev_host"),
                    int(prev_epoch) if prev_epoch else None, got.get("passed"))


class RedisLeases:
    def _holder(self, holder: Holder, ttl_s: float) -> list:
        return [holder.host, holder.boot_id, holder.pid, ttl_int(ttl_s)]

    def lease_take(self, session_id: str, holder: Holder, ttl_s: float) -> int | None:
        return self._script("TAKE", session_id, *self._holder(holder, ttl_s))

    def lease_adopt(self, session_id: str, epoch: int, holder: Holder, ttl_s: float) -> bool:
        return bool(self._script("ADOPT", session_id, epoch, *self._holder(holder, ttl_s)))

    def lease_renew(self, session_id: str, epoch: int, pid: int | None = None) -> bool:
        return bool(self._script("RENEW", session_id, epoch, "" if pid is None else pid))

    def lease_release(self, session_id: str, epoch: int) -> None:
        self._script("RELEASE", session_id, epoch)

    def lease_lapse(self, session_id: str, epoch: int, refused: str | None = None) -> None:
        self._script("LAPSE", session_id, epoch, refused or "")

    def lease_move(self, session_id: str, holder: Holder, ttl_s: float,
                   only_held: bool = False) -> int | None:
        return self._script("MOVE", session_id, *self._holder(holder, ttl_s), int(only_held))

    def lease_claim(self, session_id: str, epoch: int, holder: Holder, ttl_s: float) -> bool:
        fatal, at = self._fatal_row(session_id)
        return bool(self._script("CLAIM", session_id, epoch, *self._holder(holder, ttl_s),
                                 TAKEOVER_BUDGET, TAKEOVER_WINDOW_S, over_budget(), fatal, at))

    def lease_refuse(self, session_id: str, epoch: int, reason: str) -> None:
        self._script("REFUSE", session_id, epoch, reason)

    def lease_pass(self, session_id: str, epoch: int, reason: str) -> None:
        self._script("PASS", session_id, epoch, reason)

    def leases(self, session_id: str | None = None) -> dict[str, LeaseRow]:
        now, found = self._script("LEASES", *([session_id] if session_id else []))
        return {_text(sid): _lease_row(_text(sid), fields, int(now)) for sid, fields in found}

    def lease_changes(self) -> "RedisLeaseChanges":
        return RedisLeaseChanges(self)

    def fence(self, session_id: str, epoch: int) -> None:
        self._fence = f"{session_id}:{epoch}"


class RedisLeaseChanges:
    """A subscriber thread on a connection of its own; each message (or a lost connection)
    writes a byte to a pipe, which is what select() waits on."""

    def __init__(self, world):
        self.world, self.failed = world, None
        with world._errors():
            self.pubsub = world.client.pubsub(ignore_subscribe_messages=True)
            self.pubsub.subscribe(LEASE_CHANNEL)
        self._read, self._write = os.pipe()
        os.set_blocking(self._read, False)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._listen, name="dh-lease-changes", daemon=True)
        self._thread.start()

    def _listen(self) -> None:
        while not self._stop.is_set():
            try:
                message = self.pubsub.get_message(timeout=1.0)
            except Exception as exc:  # noqa: BLE001 - any loss of the connection is reported
                self.failed = exc
                self._poke()
                return
            if message is not None:
                self._poke()

    def _poke(self) -> None:
        try:
            os.write(self._write, b"x")
        except OSError:  # closed, or full (a wake-up is pending anyway)
            pass

    def fileno(self) -> int:
        return self._read

    def wait(self, timeout: float) -> bool:
        ready, _, _ = select.select([self._read], [], [], timeout)
        self.drain()
        return bool(ready)

    def drain(self) -> None:
        drain(self._read)
        if self.failed is not None:
            raise WorldError(f"lost the connection to Redis at {self.world.shown}: "
                             f"{self.world._reason(self.failed)}")

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=3)
        try:
            self.pubsub.close()
        except Exception:  # noqa: BLE001 - a broken connection closes as well as it can
            pass
        os.close(self._read)
        os.close(self._write)
