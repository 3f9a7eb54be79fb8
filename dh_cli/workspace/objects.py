"""Content-addressed objects of the workspace store: blobs (a file's bytes) and trees (one
folder: its entries by name), both named by the sha256 of what they hold, like git's objects.

A tree per folder rather than one flat list per snapshot: a snapshot after a one-file change
adds that file's blob and the trees on its path only, so 100 such snapshots of a 10,000-file
checkout cost a few trees each instead of 100 full listings (bench/bench_workspace.py)."""

from __future__ import annotations

import hashlib
import json
import zlib
from dataclasses import dataclass

RAW, DEFLATE = 0, 1
BLOB, TREE = "blob", "tree"
FILE, LINK, DIR = "f", "l", "d"


@dataclass(frozen=True, slots=True)
class TreeEntry:
    name: str
    kind: str  # f | l | d
    mode: int
    hash: str | None  # None for a file whose content is not stored (see note)
    size: int
    note: str | None = None  # secret | large: listed, content not stored

    def to_list(self) -> list:
        return [self.name, self.kind, self.mode, self.hash, self.size, self.note]


def blob_hash(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def tree_bytes(entries: list[TreeEntry]) -> bytes:
    return json.dumps([e.to_list() for e in entries], separators=(",", ":")).encode()


def tree_hash(data: bytes) -> str:
    # prefixed, so a file that holds a tree's bytes never shares its name with that tree
    return hashlib.sha256(b"tree\0" + data).hexdigest()


def parse_tree(data: bytes) -> list[TreeEntry]:
    out = []
    for item in json.loads(data):
        name, kind, mode, digest, size, note = item
        out.append(TreeEntry(str(name), str(kind), int(mode), digest, int(size), note))
    return out


def encode(data: bytes) -> tuple[bytes, int]:
    """Deflated when that saves a tenth or more; source files usually shrink 3-4x."""
    if len(data) < 64:
        return data, RAW
    packed = zlib.compress(data, 6)
    return (packed, DEFLATE) if len(packed) < len(data) * 0.9 else (data, RAW)


def decode(data: bytes, codec: int) -> bytes:
    if codec == RAW:
        return bytes(data)
    if codec == DEFLATE:
        return zlib.decompress(data)
    raise ValueError(f"unknown object codec {codec}")
