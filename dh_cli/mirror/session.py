"""Mirror every native source of one dh session: the harness's main file plus side files
(Claude subagents) that appear while it runs."""

from __future__ import annotations

from pathlib import Path

from ..confine import confined_source
from ..models import Session
from ..wrappers.base import NativeSession, Wrapper
from ..stores import store_of
from ..worlds.log import Log
from ..stores.tailer import TailResult


class SessionMirror:
    def __init__(self, world: Log, wrapper: Wrapper, session: Session):
        self.world, self.wrapper, self.session = world, wrapper, session
        self.tailers: dict[str, object] = {}
        for source in world.sources(session.id):
            self._add_tailer(source)

    def _add_tailer(self, source) -> None:
        # dh reads only the file confine.py allows for the source on this machine, never a
        # path a pulled row names
        source = confined_source(self.world, self.wrapper, self.session, source)
        store = store_of(self.wrapper)
        self.tailers[source.relpath] = store.tailer(self.world, self.wrapper, source,
                                                    self.session.harness_session_id)

    def track(self, native: NativeSession) -> None:
        """Start tracking the native session's sources that the log does not know yet."""
        for item in native.sources:
            if item.relpath not in self.tailers:
                source = self.world.add_source(self.session.id, item.kind, item.relpath, str(item.path))
                self._add_tailer(source)

    def watched_paths(self) -> list[Path]:
        return [Path(t.source.path) for t in self.tailers.values() if t.source.path]

    def sync(self) -> TailResult:
        total = TailResult()
        for tailer in list(self.tailers.values()):
            result = tailer.sync()
            total.added += result.added
            total.pending += result.pending
            total.rewritten |= result.rewritten
            total.missing |= result.missing
        return total
