"""Taking a session over from another machine (issue 15): claims, steals and waits on the
lease rows, and how each session's holding looks (for `dh world status`, `dh log list`).

A claim is one transaction: the candidate lease rows are locked FOR UPDATE SKIP LOCKED (two
workers never pick the same row; neither waits for the other), and the chosen row moves to
the claimer with the next epoch, the previous holder kept beside it. From that commit on the
old holder's writes are refused by the server (fencing.py)."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass

from ..errors import SessionLocked
from .fencing import LEASE_CHANNEL
from .lease import Holder

OPEN_STATES = ("starting", "running")  # a turn was open when the holder went silent
_EXPIRED = "l.heartbeat_at + make_interval(secs => l.ttl_s) < now()"

_CANDIDATES = f"""
    SELECT l.session_id, s.harness, s.cwd, l.holder_host, l.epoch FROM dh.leases l
    JOIN dh.sessions s ON s.id = l.session_id
    WHERE {_EXPIRED} AND l.released_at IS NULL AND l.refused IS NULL
      AND s.state = ANY(%(open)s) AND (%(harnesses)s::text[] IS NULL OR s.harness = ANY(%(harnesses)s))
    ORDER BY l.heartbeat_at LIMIT %(limit)s FOR UPDATE OF l SKIP LOCKED"""

_MOVE = """
    UPDATE dh.leases SET prev_host = holder_host, prev_epoch = epoch, epoch = epoch + 1,
        holder_host = %(host)s, holder_boot_id = %(boot)s, holder_pid = %(pid)s,
        heartbeat_at = now(), ttl_s = %(ttl)s, released_at = NULL, refused = NULL
    WHERE session_id = %(sid)s RETURNING epoch"""


@dataclass
class Claim:
    session_id: str
    harness: str
    cwd: str | None
    from_host: str
    from_epoch: int
    epoch: int
    restore: bool = False  # its cwd is missing here: restored from its workspace snapshot first


# takeovers of one session within the window before it is FATAL for everyone (a resume
# that keeps failing was claimed again every TTL: 14 launches in 40 s)
TAKEOVER_BUDGET, TAKEOVER_WINDOW_S = 3, 600
PASS = "pass"  # accept()'s answer for a session this worker leaves to another (its own problem)


def claim(world, ttl_s: float, harnesses: list[str] | None = None, accept=None) -> Claim | None:
    """One orphaned session, now this process's (None: there is none). `accept(candidate)`
    returns None to take it, PASS to leave it to another worker, or the reason to refuse it
    (kept in the world, never claimed). A session taken over TAKEOVER_BUDGET times within the
    window is refused and FATAL instead, with the reason."""
    me = Holder.me()
    with world._errors(), world.conn.transaction():
        rows = world.conn.execute(_CANDIDATES, {"open": list(OPEN_STATES), "harnesses": harnesses,
                                                "limit": 5}).fetchall()
        for sid, harness, cwd, host, epoch in rows:
            candidate = Claim(sid, harness, cwd, host, epoch, epoch + 1)
            reason = accept(candidate) if accept else None
            if reason == PASS:
                continue
            if reason:
                world.conn.execute("UPDATE dh.leases SET refused = %s WHERE session_id = %s",
                                   [reason, sid])
                continue
            if _over_budget(world, sid, epoch):
                continue
            world.conn.execute(_MOVE, {"sid": sid, "host": me.host, "boot": me.boot_id,
                                       "pid": me.pid, "ttl": max(1, round(ttl_s))})
            world.conn.execute("INSERT INTO dh.takeovers (session_id, host) VALUES (%s, %s)",
                               [sid, me.host])
            return candidate
    return None


def _over_budget(world, sid: str, epoch: int) -> bool:
    """Taken over too often lately: the lease refused and the session FATAL, with the reason
    (the state written under the lease's current epoch, which the fence asks for)."""
    taken = world.conn.execute(
        "SELECT count(*) FROM dh.takeovers WHERE session_id = %s AND at > now() - make_interval(secs => %s)",
        [sid, TAKEOVER_WINDOW_S]).fetchone()[0]
    if taken < TAKEOVER_BUDGET:
        return False
    reason = (f"FATAL: taken over {taken} times in {TAKEOVER_WINDOW_S // 60} minutes, its resume "
              "failing each time; `dh resume` it by hand to see why")
    world.conn.execute("UPDATE dh.leases SET refused = %s WHERE session_id = %s", [reason, sid])
    world.conn.execute("SELECT set_config('dh.fence', %s, true)", [f"{sid}:{epoch}"])
    world.conn.execute("UPDATE dh.sessions SET state = 'fatal', updated_at = to_char(now() AT TIME ZONE"
                       " 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"') WHERE id = %s", [sid])
    return True


def steal(world, session_id: str, ttl_s: float, only_held: bool = False) -> int | None:
    """End whoever holds the session's lease, live or not: the epoch moves on to this process.
    only_held: leave a released lease alone (None)."""
    me = Holder.me()
    query = _MOVE.replace("RETURNING", "AND released_at IS NULL RETURNING") if only_held else _MOVE
    rows = world._rows(query, {"sid": session_id, "host": me.host, "boot": me.boot_id, "pid": me.pid,
                               "ttl": max(1, round(ttl_s))})
    if not rows and only_held:
        return None
    if not rows:
        from .tenure import acquire

        return acquire(world, session_id, ttl_s)
    return rows[0][0]


def seconds_left(world, session_id: str) -> float | None:
    """How long another holder's lease lives on (None: free, lapsed, released or mine)."""
    me = Holder.me()
    rows = world._rows("SELECT extract(epoch FROM heartbeat_at + make_interval(secs => ttl_s) - now()),"
                       " holder_host, holder_boot_id, holder_pid, released_at FROM dh.leases"
                       " WHERE session_id = %s", [session_id])
    if not rows or rows[0][4] is not None or tuple(rows[0][1:4]) == (me.host, me.boot_id, me.pid):
        return None
    left = float(rows[0][0])
    return left if left > 0 else None


def wait_free(world, session_id: str, patience: float) -> bool:
    """Wait (LISTEN, woken by any lease change, else at the lease's end) until nobody else
    holds the session or `patience` seconds passed; whether it is free."""
    deadline = time.monotonic() + patience
    _execute(world, f"LISTEN {LEASE_CHANNEL}")
    try:
        while (left := seconds_left(world, session_id)) is not None:
            budget = deadline - time.monotonic()
            if budget <= 0:
                return False
            for _ in world.conn.notifies(timeout=min(left + 0.2, budget), stop_after=1):
                pass
        return True
    finally:
        _execute(world, f"UNLISTEN {LEASE_CHANNEL}")


def _execute(world, statement: str) -> None:
    with world._errors():
        world.conn.execute(statement)


def before_resume(world_name: str, ref: str, url, steal_it: bool, wait, adopt_epoch,
                  notice) -> int | None:
    """`dh resume S --world postgres`: with --wait, wait for another holder's lease to end;
    with --steal, end it (the epoch moves on; the old holder's writes are refused from now).
    The epoch this process is to adopt (claimed by a worker, or stolen), else None."""
    if adopt_epoch is not None or not (steal_it or wait):
        return adopt_epoch
    from .sync import open_remote

    world = open_remote(world_name, url)
    try:
        found = world.find_session(ref)
        if wait and not steal_it and not wait_free(world, found.id, wait):
            raise SessionLocked(f"session {found.id} is still held by another machine after "
                                f"waiting {wait:g} s", hint="wait longer, or pass --steal")
        if steal_it and seconds_left(world, found.id) is not None:
            epoch = steal(world, found.id, 15)
            notice(f"dh: took the lease of session {found.id} from its holder (now epoch {epoch})")
            return epoch
        return None
    finally:
        world.close()


# how sessions are held, for status and list -------------------------------------------------
@dataclass
class Holding:
    session_id: str
    holder: str | None
    lease_age: float | None  # seconds since the last heartbeat
    epoch: int | None
    state: str  # running here | running on HOST | orphaned | finished | refused: … | -

    def to_dict(self) -> dict:
        return asdict(self)


def holdings(world) -> dict[str, Holding]:
    me = Holder.me()
    rows = world._rows(f"""
        SELECT s.id, s.state, l.holder_host, l.holder_boot_id, l.holder_pid, l.epoch,
               extract(epoch FROM now() - l.heartbeat_at), {_EXPIRED}, l.released_at IS NOT NULL,
               l.refused
        FROM dh.sessions s LEFT JOIN dh.leases l ON l.session_id = s.id""")
    return {row[0]: _holding(row, me) for row in rows}


def _holding(row, me: Holder) -> Holding:
    sid, state, host, boot, pid, epoch, age, expired, released, refused = row
    holder = f"{host} (pid {pid})" if host else None
    age = round(float(age), 1) if age is not None else None
    if refused:
        shown = f"refused: {refused}"
    elif state not in OPEN_STATES or released:
        shown = "finished" if state == "finished" else (state or "-")
    elif host is None:
        shown = "-"
    elif expired:
        shown = "orphaned"
    else:
        shown = "running here" if (host, boot) == (me.host, me.boot_id) else f"running on {host}"
    return Holding(sid, holder, age, epoch, shown)


def record_takeover(local, session_id: str, lease, by: str) -> None:
    """The takeover in the session's own timeline (shipped with it): from host A at epoch n
    to this host at epoch n+1. Nothing when the lease was simply free."""
    rows = lease.world._rows("SELECT prev_host, prev_epoch, holder_host, epoch FROM dh.leases"
                             " WHERE session_id = %s", [session_id])
    if rows and rows[0][1] is not None:
        prev_host, prev_epoch, host, epoch = rows[0]
        local.add_event(session_id, "takeover", {"from_host": prev_host, "from_epoch": prev_epoch,
                                                 "host": host, "epoch": epoch, "by": by})


def ship_now(local, lease, session_id: str) -> None:
    """Push the session under the lease before it is released: a resume that found nothing
    to do (the turn was complete) never started the live shipper, and the world must learn
    the session's state. Refused by the fence when the epoch moved on meanwhile."""
    from ..errors import WorldError
    from .fencing import FENCE_SETTING, fence_value
    from .sync import push

    if lease.epoch is None:
        return
    try:
        lease.world._rows("SELECT set_config(%s, %s, false)",
                          [FENCE_SETTING, fence_value(session_id, lease.epoch)])
        push(local, lease.world, [session_id])
    except WorldError:
        pass  # fenced, or the server is gone: the local log keeps it all


def end_hold(local, lease, session_id: str, failure: BaseException | None, claimed: bool) -> None:
    """The end of `dh resume --world`'s hold. A resume that ran (its supervisor decided how the
    session ended), or one the user stopped, releases the lease. One that failed before its
    supervisor started ended nothing: the session stays open. Claimed by a worker, the failure
    is this session's on this machine (no harness, bad native state…) and would repeat on the
    next claim, so the lease is refused with the reason (kept from every worker, shown by
    `dh world status`, cleared by the next holder); a lost server, or a manual resume, lets the
    lease lapse now, so the session is claimable again."""
    from ..errors import HarnessNotFound, WorldError

    ship_now(local, lease, session_id)
    try:
        if failure is None or isinstance(failure, (KeyboardInterrupt, SessionLocked)):
            lease.release()
        elif claimed and isinstance(failure, HarnessNotFound):
            lease.let_go()  # this machine's problem: another worker may have the harness
        elif claimed and not isinstance(failure, WorldError):
            lease.let_go(refused=f"dh resume on {Holder.me().host} failed before the harness "
                                 f"started: {_reason(failure)}")
        else:
            lease.let_go()
    finally:
        lease.world.close()


def _reason(failure: BaseException) -> str:
    text = str(failure).strip() or type(failure).__name__
    return text.splitlines()[0][:300]
