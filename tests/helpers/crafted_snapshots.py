"""Workspace snapshots crafted row by row, as a hostile world could send them, and the files
a restore of one wrote."""

from __future__ import annotations

from pathlib import Path

import pytest

from dh_cli.workspace.objects import BLOB, DIR, FILE, TREE, TreeEntry, blob_hash, tree_bytes, tree_hash
from dh_cli.workspace.store import Snapshot, store_for
from dh_cli.worlds.local import LocalWorld

PAYLOAD = b"written by a crafted snapshot\n"


def crafted(world, sid: str, tree: list[TreeEntry], subtrees: dict[str, list[TreeEntry]] = {}) -> None:
    """Store `tree` as the root of a snapshot of session sid; `subtrees` name -> entries, each
    stored and referenced by a DIR entry of that name."""
    objects = [(blob_hash(PAYLOAD), BLOB, len(PAYLOAD), 0, PAYLOAD)]
    entries = list(tree)
    for name, children in subtrees.items():
        data = tree_bytes(children)
        objects.append((tree_hash(data), TREE, len(data), 0, data))
        entries.append(TreeEntry(name, DIR, 0o755, tree_hash(data), 0))
    data = tree_bytes(sorted(entries, key=lambda e: e.name))
    objects.append((tree_hash(data), TREE, len(data), 0, data))
    store = store_for(world)
    store.put(objects, [Snapshot(sid, store.next_seq(sid), "2026-12-01T00:00:00Z", 1, "call-x", "tool",
                                 tree_hash(data), files=len(entries))])


def file(name: str) -> TreeEntry:
    return TreeEntry(name, FILE, 0o644, blob_hash(PAYLOAD), len(PAYLOAD))


@pytest.fixture
def session():
    world = LocalWorld()
    sid = world.create_session("claude-code", cwd="/nowhere", state="exited").id
    yield world, sid
    world.close()


def written_files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if not p.is_dir() or p.is_symlink())
