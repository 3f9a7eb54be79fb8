"""The lease half of TeamWorld (protocol.py) in PostgreSQL: each call one statement on the
`dh.leases` row (m010, m016), the server's clock deciding what has lapsed; a claim is a
compare-and-set on the epoch (the UPDATE re-checks its WHERE on the row it locked, so of two
workers that saw the same orphan exactly one moves it). A mixin of PostgresWorld."""

from __future__ import annotations

from .postgres_fencing import FENCE_SETTING, fence_value
from .protocol import LEASE_CHANNEL, TAKEOVER_BUDGET, TAKEOVER_WINDOW_S, Holder, LeaseRow, over_budget, ttl_int

_EXPIRED = "heartbeat_at + make_interval(secs => ttl_s) < now()"

_TAKE = """
    INSERT INTO dh.leases AS l (session_id, holder_host, holder_boot_id, holder_pid, epoch,
                                heartbeat_at, ttl_s)
    VALUES (%(sid)s, %(host)s, %(boot)s, %(pid)s, 1, now(), %(ttl)s)
    ON CONFLICT (session_id) DO UPDATE SET holder_host = EXCLUDED.holder_host,
        holder_boot_id = EXCLUDED.holder_boot_id, holder_pid = EXCLUDED.holder_pid,
        epoch = l.epoch + 1, heartbeat_at = now(), ttl_s = EXCLUDED.ttl_s, released_at = NULL,
        refused = NULL, passed = NULL, prev_host = l.holder_host, prev_epoch = l.epoch
    WHERE l.heartbeat_at + make_interval(secs => l.ttl_s) < now() OR l.released_at IS NOT NULL
       OR (l.holder_host, l.holder_boot_id, l.holder_pid) = (EXCLUDED.holder_host,
           EXCLUDED.holder_boot_id, EXCLUDED.holder_pid)
    RETURNING epoch"""

_ADOPT = """
    UPDATE dh.leases SET holder_pid = %(pid)s, heartbeat_at = now(), ttl_s = %(ttl)s
    WHERE session_id = %(sid)s AND epoch = %(epoch)s AND holder_host = %(host)s
      AND holder_boot_id = %(boot)s RETURNING epoch"""

_MOVE = """
    UPDATE dh.leases SET prev_host = holder_host, prev_epoch = epoch, epoch = epoch + 1,
        holder_host = %(host)s, holder_boot_id = %(boot)s, holder_pid = %(pid)s,
        heartbeat_at = now(), ttl_s = %(ttl)s, released_at = NULL, refused = NULL, passed = NULL
    WHERE session_id = %(sid)s {only} RETURNING epoch"""

# locked: of two claimers of the same orphan, the second waits, then finds the epoch moved
_CLAIMABLE = f"""
    SELECT 1 FROM dh.leases WHERE session_id = %(sid)s AND epoch = %(epoch)s AND {_EXPIRED}
      AND released_at IS NULL AND refused IS NULL FOR UPDATE"""

_TAKEN = ("SELECT count(*) FROM dh.takeovers WHERE session_id = %s"
          " AND at > now() - make_interval(secs => %s)")

_FATAL = """UPDATE dh.sessions SET state = 'fatal', updated_at = to_char(now() AT TIME ZONE 'UTC',
    'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') WHERE id = %s"""

_LEASES = """
    SELECT session_id, holder_host, holder_boot_id, holder_pid, epoch,
           extract(epoch FROM now() - heartbeat_at),
           extract(epoch FROM heartbeat_at + make_interval(secs => ttl_s) - now()),
           released_at IS NOT NULL, refused, prev_host, prev_epoch, passed
    FROM dh.leases WHERE %(sid)s::text IS NULL OR session_id = %(sid)s"""


def _args(session_id: str, holder: Holder, ttl_s: float, **more) -> dict:
    return {"sid": session_id, "host": holder.host, "boot": holder.boot_id, "pid": holder.pid,
            "ttl": ttl_int(ttl_s), **more}


class PgLeases:
    def lease_take(self, session_id: str, holder: Holder, ttl_s: float) -> int | None:
        rows = self._rows(_TAKE, _args(session_id, holder, ttl_s))
        return rows[0][0] if rows else None

    def lease_adopt(self, session_id: str, epoch: int, holder: Holder, ttl_s: float) -> bool:
        return bool(self._rows(_ADOPT, _args(session_id, holder, ttl_s, epoch=epoch)))

    def lease_renew(self, session_id: str, epoch: int, pid: int | None = None) -> bool:
        return bool(self._rows("UPDATE dh.leases SET heartbeat_at = now() WHERE session_id = %s"
                               " AND epoch = %s AND (%s::int IS NULL OR holder_pid = %s)"
                               " RETURNING 1", [session_id, epoch, pid, pid]))

    def lease_release(self, session_id: str, epoch: int) -> None:
        # kept, epoch and all: an older epoch's writes stay refused (postgres_fencing.py)
        self._rows("UPDATE dh.leases SET released_at = now() WHERE session_id = %s"
                   " AND epoch = %s RETURNING 1", [session_id, epoch])

    def lease_lapse(self, session_id: str, epoch: int, refused: str | None = None) -> None:
        self._rows("UPDATE dh.leases SET heartbeat_at = now() - make_interval(secs => ttl_s + 1),"
                   " refused = %s WHERE session_id = %s AND epoch = %s"
                   " RETURNING pg_notify(%s, session_id)",
                   [refused, session_id, epoch, LEASE_CHANNEL])

    def lease_move(self, session_id: str, holder: Holder, ttl_s: float,
                   only_held: bool = False) -> int | None:
        query = _MOVE.format(only="AND released_at IS NULL" if only_held else "")
        rows = self._rows(query, _args(session_id, holder, ttl_s))
        return rows[0][0] if rows else None

    def lease_claim(self, session_id: str, epoch: int, holder: Holder, ttl_s: float) -> bool:
        with self._errors(), self.conn.transaction():
            if not self.conn.execute(_CLAIMABLE, {"sid": session_id, "epoch": epoch}).fetchall():
                return False
            taken = self.conn.execute(_TAKEN, [session_id, TAKEOVER_WINDOW_S]).fetchone()[0]
            if taken >= TAKEOVER_BUDGET:
                self._make_fatal(session_id, epoch, over_budget(taken))
                return False
            self.conn.execute(_MOVE.format(only=""), _args(session_id, holder, ttl_s))
            self.conn.execute("INSERT INTO dh.takeovers (session_id, host) VALUES (%s, %s)",
                              [session_id, holder.host])
            return True

    def _make_fatal(self, session_id: str, epoch: int, reason: str) -> None:
        """Inside the claim's transaction: the lease refused, the session written FATAL under
        the lease's current epoch (the fence asks for it; set for this transaction only)."""
        self.conn.execute("UPDATE dh.leases SET refused = %s WHERE session_id = %s", [reason, session_id])
        self.conn.execute("SELECT set_config(%s, %s, true)",
                          [FENCE_SETTING, fence_value(session_id, epoch)])
        self.conn.execute(_FATAL, [session_id])

    def lease_refuse(self, session_id: str, epoch: int, reason: str) -> None:
        self._rows("UPDATE dh.leases SET refused = %s WHERE session_id = %s AND epoch = %s"
                   " RETURNING 1", [reason, session_id, epoch])

    def lease_pass(self, session_id: str, epoch: int, reason: str) -> None:
        # no NOTIFY (m016's trigger watches epoch and refused): nobody need wake for a note
        self._rows("UPDATE dh.leases SET passed = %s WHERE session_id = %s AND epoch = %s"
                   " RETURNING 1", [reason, session_id, epoch])

    def leases(self, session_id: str | None = None) -> dict[str, LeaseRow]:
        rows = self._rows(_LEASES, {"sid": session_id})
        return {r[0]: LeaseRow(r[0], r[1], r[2], r[3], r[4], float(r[5]), float(r[6]), *r[7:])
                for r in rows}

    def lease_changes(self) -> "PgLeaseChanges":
        return PgLeaseChanges(self)

    def fence(self, session_id: str, epoch: int) -> None:
        self._rows("SELECT set_config(%s, %s, false)", [FENCE_SETTING, fence_value(session_id, epoch)])


class PgLeaseChanges:
    """LISTEN on the world's own connection: a NOTIFY on every lease change (m016's trigger)."""

    def __init__(self, world):
        self.world = world
        self._execute(f"LISTEN {LEASE_CHANNEL}")

    def _execute(self, statement: str) -> None:
        with self.world._errors():
            self.world.conn.execute(statement)

    def fileno(self) -> int:
        return self.world.conn.fileno()

    def wait(self, timeout: float) -> bool:
        with self.world._errors():
            return any(True for _ in self.world.conn.notifies(timeout=timeout, stop_after=1))

    def drain(self) -> None:
        with self.world._errors():
            for _ in self.world.conn.notifies(timeout=0.01):
                pass

    def close(self) -> None:
        self._execute(f"UNLISTEN {LEASE_CHANNEL}")
