"""How a session's workspace snapshots read: one line each, and their marks in `dh log show`."""

from __future__ import annotations


READS = {"start": "as dh found it", "turn_end": "turn end", "attempt_end": "attempt end"}


def snapshot_line(snap, turn: int | None = None) -> str:
    """One readable line per snapshot (also what `dh log show` prints for one); `turn`, when
    given, is the turn the log's view shows it in, which wins over the stored number."""
    turn = snap.turn if turn is None else turn
    where = f"turn {turn}" if turn else "before the first turn"
    after = f"after tool call {snap.step}" if snap.step else READS.get(snap.reason, snap.reason)
    git = f", git {snap.branch or 'detached'}@{snap.head[:10]}" if snap.head else ""
    skipped = f", {snap.skipped} not stored (secret or large)" if snap.skipped else ""
    return (f"snapshot {snap.seq}: {where}, {after}: {snap.files} file(s),"
            f" {snap.bytes:,} bytes{skipped}{git}")


def with_snapshots(items, snaps: list):
    """`dh log show`'s items with a mark for each snapshot where it was taken: after the tool
    call whose result ended its step, else (a turn's end) before the next turn's prompt, and
    the rest at the end. A mark names the turn of the main conversation it stands in: the
    number stored with a snapshot was counted by the dh that took it, and one that counted
    a resumed turn twice left numbers the log's turns do not have."""
    by_step: dict[str, list] = {}
    for snap in snaps:
        if snap.step:
            by_step.setdefault(snap.step, []).append(snap)
    left, source, main, turn = list(snaps), None, None, 0
    for item in items:
        if item.get("type") == "prompt" and not item.get("resumed") and not item.get("synthetic"):
            due = [s for s in left if (s.turn or 0) < (item.get("turn") or 0)]
            yield from _marks(due, left, item.get("source", source), turn)
        source = item.get("source", source)
        main = main or source
        turn = (item.get("turn") or turn) if source == main else turn
        yield item
        if item.get("type") == "tool_call" and item.get("call_id") in by_step:
            yield from _marks(by_step.pop(item["call_id"]), left, source, turn)
    yield from _marks(list(left), left, source, turn)


def _marks(due: list, left: list, source, turn: int):
    for snap in due:
        if snap in left:
            left.remove(snap)
            yield {"type": "workspace", "source": source, "seq": snap.seq,
                   "text": snapshot_line(snap, turn)}


def snapshots_of(world, session_id: str) -> list:
    from .store import store_for

    return store_for(world).snapshots(session_id)
