"""Native stores: where one kind of a harness's native session state lives, and how dh
tails it, finds its current turn, repairs a cut tool call in it, restores it and rebuilds
it. Two kinds exist: JSONL files (jsonl.py: Claude Code, Codex, Pi, the demo) and OpenCode's
SQLite rows (opencode.py). Each wrapper names its store (`Wrapper.store`); code outside
wrappers/ and stores/ asks the store and never tests a harness name or a source kind.

Kept light on purpose: wrappers import stores.opencode_db / opencode_rows, so this package
imports its stores only when one is asked for."""

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


def store_for(source) -> NativeStore:
    """The store that keeps a source of this kind (for code that holds a source, no wrapper).
    A kind no store knows (a row from a world) is read as files, as dh always did."""
    stores = _stores()
    return next((s for s in stores.values() if source.kind in s.kinds), stores["jsonl"])
