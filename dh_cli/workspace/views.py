"""How a session's workspace snapshots read: one line each, and their marks in `dh log show`."""

from __future__ import annotations


def snapshot_line(snap) -> str:
    """One readable line per snapshot (also what `dh log show` prints for one)."""
    where = f"turn {snap.turn}" if snap.turn else "before the first turn"
    after = f"after tool call {snap.step}" if snap.step else snap.reason.replace("_", " ")
    git = f", git {snap.branch or 'detached'}@{snap.head[:10]}" if snap.head else ""
    skipped = f", {snap.skipped} not stored (secret or large)" if snap.skipped else ""
    return (f"snapshot {snap.seq}: {where}, {after}: {snap.files} file(s),"
            f" {snap.bytes:,} bytes{skipped}{git}")


def with_snapshots(items, snaps: list):
    """`dh log show`'s items with a mark for each snapshot where it was taken: after the tool
    call whose result ended its step, else (a turn's end) before the next turn's prompt, and
    the rest at the end."""
    by_step: dict[str, list] = {}
    for snap in snaps:
        if snap.step:
            by_step.setdefault(snap.step, []).append(snap)
    left, source = list(snaps), None
    for item in items:
        if item.get("type") == "prompt" and not item.get("resumed") and not item.get("synthetic"):
            due = [s for s in left if (s.turn or 0) < (item.get("turn") or 0)]
            yield from _marks(due, left, item.get("source", source))
        source = item.get("source", source)
        yield item
        if item.get("type") == "tool_call" and item.get("call_id") in by_step:
            yield from _marks(by_step.pop(item["call_id"]), left, source)
    yield from _marks(list(left), left, source)


def _marks(due: list, left: list, source):
    for snap in due:
        if snap in left:
            left.remove(snap)
            yield {"type": "workspace", "source": source, "seq": snap.seq,
                   "text": snapshot_line(snap)}


def snapshots_of(world, session_id: str) -> list:
    from .store import store_for

    return store_for(world).snapshots(session_id)
