"""Mirror one OpenCode session from its database: every new or changed row becomes a record.
OpenCode updates rows in place as it streams, so a row can have several versions in the log;
the latest is the current one. The source's `offset` counts the row versions logged."""

from __future__ import annotations

import json
from pathlib import Path

from ..events import source_back, source_unreadable
from ..errors import NativeStateError
from ..models import Source
from ..util import short_hash
from .tailer import TailResult
from ..wrappers.base import Wrapper, to_record
from ..wrappers.opencode_db import session_rows
from ..wrappers.opencode_rows import row_key


class OpenCodeTailer:
    def __init__(self, world, wrapper: Wrapper, source: Source, native_id: str):
        self.world, self.wrapper, self.source, self.native_id = world, wrapper, source, native_id
        self.known: dict[str, str] | None = None
        self.since_ms: int | None = None  # newest time_updated seen: later reads are incremental

    def _load_known(self) -> dict[str, str]:
        known = {}
        for record in self.world.records(self.source.session_id, source_id=self.source.id):
            known[row_key(json.loads(record.raw))] = short_hash(record.raw)
        return known

    def sync(self) -> TailResult:
        if self.known is None:
            self.known = self._load_known()
        try:
            lines = session_rows(Path(self.source.path), self.native_id, self.since_ms)
        except NativeStateError as exc:
            if self.source.status != "unreadable":
                self.source.status = "unreadable"
                self.world.commit(self.source, [], [source_unreadable(str(exc)).pair()])
            return TailResult(missing=True)
        return TailResult(added=self._commit_changed(lines))

    def _commit_changed(self, lines: list[bytes]) -> int:
        batch, events = [], []
        if self.source.status != "live":
            self.source.status = "live"
            events.append(source_back(self.source.relpath).pair())
        for raw in lines:
            row = json.loads(raw)
            key, digest = row_key(row), short_hash(raw)
            updated = row.get("time_updated")
            if isinstance(updated, int):
                self.since_ms = max(self.since_ms or 0, updated)
            if self.known.get(key) == digest:
                continue
            parsed = self.wrapper.parse(raw)
            batch.append(to_record(parsed, self.source.id, 0, self.source.offset, raw))
            self.source.offset += 1
            self.known[key] = digest
        if not batch and not events:
            return 0
        return self.world.commit(self.source, batch, events)
