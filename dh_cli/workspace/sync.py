"""Snapshots travel with their session on push and pull: the receiver gets the snapshot rows
it lacks and, before them, every object they reach that it does not hold. Objects are keyed by
their hash alone, so a blob shared by many snapshots, sessions or machines crosses once.

Order makes it resumable: a snapshot row is written in the same transaction as the last of
its missing objects, so a receiver never has a snapshot whose files it lacks; an interrupted
copy leaves only objects, which the next run finds and skips."""

from __future__ import annotations

from dataclasses import replace

from .objects import BLOB, DIR, FILE, TREE, BadObject, blob_hash, encode, parse_tree, tree_bytes, tree_hash
from .scan import Rules
from .store import DamagedObject, checked_object, store_for

# What a masked world never receives the content of, whatever this machine's `secret_patterns`
# let it store: the built-in secret names (.env*, *.pem, *.key, id_*, .netrc, …), listed only.
_SECRET_FILE = Rules()
CHUNK_BYTES = 8 * 1024 * 1024  # objects per transaction, by stored size


def copy_workspace(src, dst, session_id: str, masking: bool = False) -> int:
    """Copy the session's snapshots `dst` lacks; the number of snapshots copied. `masking`:
    `dst` masks credentials, in files too."""
    have, give = store_for(dst), store_for(src)
    known = {s.seq for s in have.snapshots(session_id)}
    missing = [s for s in give.snapshots(session_id) if s.seq not in known]
    if masking:
        give = Masked(give)
    for snap in missing:
        if isinstance(give, Masked):
            snap = replace(snap, root=give.tree(snap.root))
        _send(give, have, _lacking(give, have, snap.root), snap)
    return len(missing)


class Masked:
    """A store whose files are masked as a masked world's records are (redact.mask_bytes):
    a file that changes gets a new blob, and each tree above it a new tree; the rest is the
    store's own. What `_lacking` and `_send` read."""

    def __init__(self, store):
        self.store, self.made, self.trees = store, {}, {}

    def tree(self, digest: str) -> str:
        """The masked copy of the tree (itself when nothing under it changes)."""
        if digest not in self.trees:
            entries = [self._entry(e) for e in _tree(self.store, digest)]
            data = tree_bytes(entries)
            new = tree_hash(data)
            if new != digest:
                self._keep(new, TREE, data)
            self.trees[digest] = new
        return self.trees[digest]

    def _entry(self, entry):
        if entry.kind == DIR:
            return replace(entry, hash=self.tree(entry.hash))
        if entry.kind != FILE or not entry.hash:
            return entry
        if _SECRET_FILE.secret(entry.name):  # kept by a narrower `secret_patterns`: never sent
            return replace(entry, hash=None, note="secret")
        from ..redact import mask_bytes

        data = self.store.get(entry.hash)
        masked = mask_bytes(data)
        if masked == data:
            return entry
        self._keep(blob_hash(masked), BLOB, masked)
        return replace(entry, hash=blob_hash(masked), size=len(masked))

    def _keep(self, digest: str, kind: str, data: bytes) -> None:
        stored, codec = encode(data)
        self.made[digest] = (digest, kind, len(data), codec, stored)

    def get(self, digest: str) -> bytes:
        if digest in self.made:
            row = self.made[digest]
            return checked_object(digest, row[1], row[3], row[4])
        return self.store.get(digest)

    def rows(self, hashes: list[str]) -> list[tuple]:
        own = [h for h in hashes if h not in self.made]
        return [self.made[h] for h in hashes if h in self.made] + (self.store.rows(own) if own else [])


def _lacking(give, have, root: str) -> list[str]:
    """Hashes reachable from `root` that the receiver lacks, children before their trees (a
    tree the receiver holds is skipped whole: its children were stored before it)."""
    out, seen, stack = [], set(), [root]
    while stack:
        level, stack = stack, []
        held = have.known(level)
        for digest in level:
            if digest in held or digest in seen:
                continue
            seen.add(digest)
            out.append(digest)
            for entry in _tree(give, digest):
                if entry.kind == DIR:
                    stack.append(entry.hash)
                elif entry.hash and entry.hash not in seen:
                    seen.add(entry.hash)
                    out.append(entry.hash)
    held = have.known(out) if out else set()
    return [h for h in reversed(out) if h not in held]


def _tree(store, digest: str) -> list:
    """The entries of a stored tree; DamagedObject when its bytes are no tree."""
    try:
        return parse_tree(store.get(digest))
    except BadObject as exc:
        raise DamagedObject(f"refusing the workspace tree {digest[:12]}: {exc}") from None


def _send(give, have, hashes: list[str], snap) -> None:
    batch, size = [], 0
    for i in range(0, len(hashes), 200):
        for row in give.rows(hashes[i:i + 200]):
            checked_object(row[0], row[1], row[3], row[4])  # a mismatch never enters the store
            batch.append(row)
            size += len(row[4])
            if size >= CHUNK_BYTES:
                have.put(batch, [])
                batch, size = [], 0
    have.put(batch, [snap])
