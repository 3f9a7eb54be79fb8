"""How each session of a team world is held (issue 15), for `dh world status` and
`dh log list --world W`: holder, lease age, epoch and state (running here, running on
HOST, orphaned, finished …)."""

from __future__ import annotations

from .. import output
from .takeover import Holding, holdings

HOLD_COLUMNS = ["holder", "lease age", "epoch", "state"]


def hold_cells(found: Holding | None) -> list:
    if found is None:
        return [None, None, None, None]
    age = f"{found.lease_age:.0f} s" if found.lease_age is not None else None
    return [found.holder, age, found.epoch, found.state]


def hold_dict(found: Holding | None) -> dict:
    data = found.to_dict() if found else {}
    return {"holder": data.get("holder"), "lease_age_s": data.get("lease_age"),
            "epoch": data.get("epoch"), "hold_state": data.get("state")}


def list_world(name: str, url: str | None, harness: str | None, json_: bool) -> None:
    from . import open_world

    world = open_world(name, url)
    try:
        held = holdings(world)
        sessions = world.sessions(harness)
    finally:
        world.close()
    rows = [{"id": s.id, "harness": s.harness, "host": s.host, "updated_at": s.updated_at,
             **hold_dict(held.get(s.id))} for s in sessions]
    if json_:
        output.print_json(rows)
        return
    output.table(None, ["session", "harness", "updated", *HOLD_COLUMNS],
                 [[r["id"], r["harness"], r["updated_at"], *hold_cells(held.get(r["id"]))]
                  for r in rows])
