"""Native stores: where one kind of a harness's native session state lives, and how dh
tails it, finds its current turn, repairs a cut tool call in it, restores it and rebuilds
it. Two kinds exist: JSONL files (jsonl.py: Claude Code, Codex, Pi, the demo) and OpenCode's
SQLite rows (opencode.py). Each wrapper names its store (`Wrapper.store`); code outside
wrappers/ and stores/ asks the store and never tests a harness name or a source kind.

Each store is imported only when one is asked for: the JSONL store's tailer and OpenCode's
are not wanted by a command that only reads the log."""

from __future__ import annotations

from .base import NativeStore

_STORES: dict[str, NativeStore] = {}


def _stores() -> dict[str, NativeStore]:
    if not _STORES:
        from .jsonl import JsonlStore
        from .opencode import OpenCodeStore

        for store in (JsonlStore(), OpenCodeStore()):
            _STORES[store.name] = store
    return _STORES


def store_of(wrapper) -> NativeStore:
    """The store the wrapper names."""
    return _stores()[wrapper.store]


def warm(wrapper) -> None:
    """Import the wrapper's store and its tailer before the harness writes. Imported when the
    session first appeared instead, they delayed its first records: OpenCode's first three
    rows reached the log 27-114 ms after they were on disk (later rows 4-20 ms), 44 ms of it
    these imports (cProfile of the live mirror's first look, this 2-core machine), against
    the 50 ms in which tests/e2e/test_mirror_lag.py wants them logged. The price table the
    log prices each model call with as it writes it loads meanwhile, in the background."""
    from ..pricing import load_table_in_background

    load_table_in_background()
    store_of(wrapper).warm()


def store_for(source) -> NativeStore:
    """The store that keeps a source of this kind (for code that holds a source, no wrapper).
    A kind no store knows (a row from a world) is read as files, as dh always did."""
    stores = _stores()
    return next((s for s in stores.values() if source.kind in s.kinds), stores["jsonl"])
