"""`dh log show --follow`: a session's timeline as it grows, read from the log alone.

The follower never talks to the harness or the supervisor, only to the log, so it keeps going
while the harness crashes, is resumed, or dh itself is restarted. Each poll first compares a
cheap stamp (record count, source positions, new events); only when that changed does it
rebuild the view and hand out what it had not handed out before:

- `item`: a new timeline entry (prompt, answer, model call, tool call…), per source in order;
- `result`: a tool call shown earlier as dangling that now has its result;
- `event`: a new row of dh's journal (launch, exited, repair, resume…).

A follower started late, or restarted after Ctrl-C, first catches up with everything logged."""

from __future__ import annotations

import time
from typing import Callable, Iterator

from .logview import build_view

POLL_SECONDS = 0.5


class Follower:
    def __init__(self, world, session_id: str):
        self.world, self.session_id = world, session_id
        self.shown: dict[str, int] = {}  # source label -> items already handed out
        self.pending: dict[str, dict] = {}  # call id -> a tool call handed out as dangling
        self.last_seq = 0  # events already handed out
        self.stamp: tuple | None = None  # what the log looked like at the last rebuild

    def poll(self) -> list[dict]:
        """Everything new since the last poll (nothing when the log has not changed)."""
        stamp = self._stamp()
        if stamp == self.stamp:
            return []
        self.stamp = stamp
        view = build_view(self.world, self.world.get_session(self.session_id))
        return self._new_items(view.items) + self._new_events(view.events)

    def _stamp(self) -> tuple:
        sources = tuple((s.id, s.generation, s.offset, s.pending, s.status)
                        for s in self.world.sources(self.session_id))
        newest = self.world.events(self.session_id, self.last_seq)
        return (self.world.record_count(self.session_id), sources, newest[-1].seq if newest else 0)

    def _new_items(self, items: list[dict]) -> list[dict]:
        by_source: dict[str, list[dict]] = {}
        for item in items:
            by_source.setdefault(item["source"], []).append(item)
        out = self._settled(items)
        for label, entries in by_source.items():
            # A rewritten source can come back shorter; start counting from there.
            start = min(self.shown.get(label, 0), len(entries))
            for item in entries[start:]:
                out.append({"kind": "item", **item})
                if item["type"] == "tool_call" and item["status"] == "dangling":
                    self.pending[item["call_id"]] = item
            self.shown[label] = len(entries)
        return out

    def _settled(self, items: list[dict]) -> list[dict]:
        """Results that arrived for calls handed out earlier as dangling."""
        calls = {i["call_id"]: i for i in items if i["type"] == "tool_call"}
        out = []
        for call_id in list(self.pending):
            call = calls.get(call_id)
            if call and call["status"] != "dangling":
                out.append({"kind": "result", **call})
                del self.pending[call_id]
        return out

    def _new_events(self, events: list[dict]) -> list[dict]:
        fresh = [e for e in events if e["seq"] > self.last_seq]
        if fresh:
            self.last_seq = fresh[-1]["seq"]
        return [{"kind": "event", **e} for e in fresh]


def follow(world, session_id: str, interval: float = POLL_SECONDS,
           stop: Callable[[], bool] = lambda: False,
           sleep: Callable[[float], None] = time.sleep) -> Iterator[dict]:
    """Yield updates until `stop()` is true (the CLI stops on Ctrl-C instead)."""
    follower = Follower(world, session_id)
    while True:
        yield from follower.poll()
        if stop():
            return
        sleep(interval)
