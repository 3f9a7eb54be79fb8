"""A sampler of a harness's native session state as the real program writes it: a thread
looks every few milliseconds and keeps, per record, the moment it was first seen on disk.
Used by the mirror-lag test (what was on disk 50 ms before a kill must be in the log) and
by bench/bench_mirror_lag.py (how long each record took to reach the log)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from dh_cli.wrappers.opencode_db import list_sessions, session_rows
from dh_cli.wrappers import get as get_wrapper
from dh_cli.wrappers.opencode_rows import row_key


def native_records(harness: str, home: Path) -> dict[tuple[str, int], bytes]:
    """Every complete record of every session under home: (file relpath, index) -> bytes for
    the JSONL harnesses; (row key, 0) -> the row's current version for OpenCode."""
    wrapper = get_wrapper(harness)
    if harness == "opencode":
        return _opencode_rows(wrapper.db_file(home))
    found = {}
    for session in wrapper.discover(home):
        for source in session.sources:
            if source.kind == "jsonl":
                for i, line in enumerate(_complete_lines(source.path)):
                    found[(source.relpath, i)] = line
    return found


def _complete_lines(path: Path) -> list[bytes]:
    try:
        data = path.read_bytes()
    except OSError:
        return []
    return data[:data.rfind(b"\n") + 1].splitlines(keepends=True)


def _opencode_rows(db: Path) -> dict[tuple[str, int], bytes]:
    import json

    if not db.exists():
        return {}
    try:
        rows = {}
        for sid, _ in list_sessions(db):
            for line in session_rows(db, sid):
                rows[(row_key(json.loads(line)), 0)] = line
        return rows
    except Exception:  # noqa: BLE001 - a database being created: nothing yet
        return {}


class Sampler:
    def __init__(self, harness: str, home: Path, every: float = 0.005):
        self.harness, self.home, self.every = harness, home, every
        self.first_seen: dict[tuple, tuple[float, bytes]] = {}  # (key, version) -> time
        self.history: list[tuple[float, dict]] = []  # (time, {key: bytes}) when it changed
        self.stop_event = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> "Sampler":
        self.thread.start()
        return self

    def stop(self) -> None:
        self.stop_event.set()
        self.thread.join(timeout=10)

    def _run(self) -> None:
        last = None
        while not self.stop_event.is_set():
            now = time.monotonic()
            state = native_records(self.harness, self.home)
            if state != last:
                self.history.append((now, state))
                for key, raw in state.items():
                    self.first_seen.setdefault((key, raw), now)
                last = state
            time.sleep(self.every)

    def state_at(self, moment: float) -> dict:
        """What was on disk at `moment` (the last sample taken at or before it)."""
        before = [state for when, state in self.history if when <= moment]
        return before[-1] if before else {}

    def first_record_at(self) -> float | None:
        return min(self.first_seen.values()) if self.first_seen else None
