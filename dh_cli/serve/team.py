"""The team page's one door to a team world (as `--world NAME` opens it): which machine
holds which session and since when (the leases, through team/takeover.py's
`holdings`), the takeovers in the sessions' journals, how long ago the world last received a
record of each machine's sessions, and, for this machine, how many of its records the world
does not have yet. Read-only: nothing here writes to the world."""

from __future__ import annotations

import socket

from ..errors import DamagedRow, LogDbError
from ..redact import clean, one_line
from .reads import waiting_on

def open_world(name: str, url: str | None):
    from ..team import open_world as open_team_world

    return open_team_world(name, url)


def holdings_of(world) -> dict:
    from ..team.takeover import holdings

    return holdings(world)


def team(world, local) -> dict:
    """{"machines", "sessions", "takeovers"} of the world, as plain masked data. A session
    whose rows the page reads are damaged (its row, a source, an event, the record it holds
    last) is `damaged`, with why in one line; the others are shown as they stand."""
    import time

    held = holdings_of(world)
    sessions = {s.id: s for s in world.sessions()}
    marks = world.marks()
    damage = {sid: m.damaged for sid, m in marks.items() if m.damaged}
    takeovers = _takeovers(world, sessions, damage)
    last = _last_records(world, marks, damage)
    rows = [_row(world, local, sid, s, held.get(sid), damage.get(sid)) for sid, s in sessions.items()]
    machines = _machines(rows, takeovers, last, time.time() * 1000)
    _add_behind(machines, marks, local)
    return clean({"machines": machines, "sessions": sorted(rows, key=lambda r: r["lease_age"] or 1e18),
                  "takeovers": takeovers})


def _row(world, local, sid: str, session, holding, damaged: str | None) -> dict:
    state = getattr(holding, "state", None) or session.state
    return {"id": sid, "harness": session.harness, "host": _host(holding, session),
            "holder": getattr(holding, "holder", None), "epoch": getattr(holding, "epoch", None),
            "lease_age": getattr(holding, "lease_age", None),
            "state": "damaged" if damaged else state, "damaged": one_line(damaged) if damaged else None,
            "limit": waiting_on(world, sid, local) if session.state == "waiting" and not damaged else None}


def _takeovers(world, sessions: dict, damage: dict) -> list[dict]:
    """The newest 200 takeovers in the sessions' journals (a damaged journal noted in
    `damage`, the others read on)."""
    from ..events import TAKEOVER

    found = []
    for sid in sessions:
        if sid in damage:
            continue
        try:
            found += [{"session_id": e.session_id, "at": e.at, **e.details}
                      for e in world.events(sid) if e.type == TAKEOVER]
        except DamagedRow as exc:
            damage[sid] = str(exc)
    return sorted(found, key=lambda t: t["at"], reverse=True)[:200]


def _last_records(world, marks: dict, damage: dict) -> dict:
    """The time of the newest record the world holds of each session (ms since the epoch, the
    records' own time): the last record of each of its sources (a damaged one noted in
    `damage`)."""
    out = {}
    for sid, found in marks.items():
        for relpath, mark in found.sources.items():
            if mark.last is None or sid in damage:
                continue
            try:
                tip = world.read_records(sid, relpath, after=(mark.last[0], mark.last[1] - 1), limit=1)
            except (DamagedRow, LogDbError) as exc:  # LogDbError: its bytes do not decode
                damage[sid] = f"{relpath}: record {mark.last[0]}:{mark.last[1]}: {exc}"
                continue
            if tip and tip[0].ts is not None:
                out[sid] = max(out.get(sid, 0), tip[0].ts)
    return out


def _host(holding, session) -> str:
    holder = getattr(holding, "holder", None)
    return holder.split(" (pid")[0] if holder else (session.host or "-")


def _machines(rows: list[dict], takeovers: list[dict], last: dict, now_ms: float) -> list[dict]:
    by_host: dict[str, dict] = {}
    for row in rows:
        m = by_host.setdefault(row["host"], {"host": row["host"], "held": 0, "running": 0, "orphaned": 0,
                                             "freshest_lease_s": None, "takeovers": 0, "lag_s": None})
        m["held"] += 1
        m["running"] += (row["state"] or "").startswith("running")
        m["orphaned"] += (row["state"] or "").startswith("orphaned")  # also ", left by …"
        if row["lease_age"] is not None:
            m["freshest_lease_s"] = min(row["lease_age"], m["freshest_lease_s"] or 1e18)
        if last.get(row["id"]) is not None:
            age = max(0.0, (now_ms - last[row["id"]]) / 1000)
            m["lag_s"] = min(age, m["lag_s"] if m["lag_s"] is not None else 1e18)
    for t in takeovers:
        if t.get("host") in by_host:
            by_host[t["host"]]["takeovers"] += 1
    return sorted(by_host.values(), key=lambda m: m["host"])


def _add_behind(machines: list[dict], theirs: dict, local) -> None:
    """This machine's records the world does not hold yet (for the sessions both know; not
    those damaged in the world, whose count there is unknown)."""
    if local is None:
        return
    here = socket.gethostname()
    ours = local.marks()
    behind = sum(max(0, ours[sid].records - theirs[sid].records) for sid in ours
                 if sid in theirs and not theirs[sid].damaged)
    for m in machines:
        if m["host"] == here:
            m["behind"] = behind
