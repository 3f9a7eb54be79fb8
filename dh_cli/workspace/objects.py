"""Content-addressed objects of the workspace store: blobs (a file's bytes) and trees (one
folder: its entries by name), both named by the sha256 of what they hold, like git's objects.

A tree per folder rather than one flat list per snapshot: a snapshot after a one-file change
adds that file's blob and the trees on its path only, so 100 such snapshots of a 10,000-file
checkout cost a few trees each instead of 100 full listings (bench/bench_workspace.py)."""

from __future__ import annotations

import hashlib
import os
import struct
import zlib
from dataclasses import dataclass

RAW, DEFLATE = 0, 1
BLOB, TREE = "blob", "tree"
FILE, LINK, DIR = "f", "l", "d"
NOTES = (None, "secret", "large")  # why a listed file's content is not stored
TREE_MAGIC = b"dhtree1\n"
_FIXED = struct.Struct("!cBBIQ")  # kind, note, has hash, mode, size


@dataclass(frozen=True, slots=True)
class TreeEntry:
    name: str
    kind: str  # f | l | d
    mode: int
    hash: str | None  # None for a file whose content is not stored (see note)
    size: int
    note: str | None = None  # secret | large: listed, content not stored


def blob_hash(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def file_hash(fd: int) -> str:
    """blob_hash of an open file's bytes, read 1 MiB at a time: a restore looks at every file
    already in its folder, and reading an unrelated 2 GB one whole took 1.98 GB."""
    digest = hashlib.sha256()
    while chunk := os.read(fd, 1 << 20):
        digest.update(chunk)
    return digest.hexdigest()


def tree_bytes(entries: list[TreeEntry]) -> bytes:
    """A tree in binary: per entry kind, note, mode, size, the raw 32-byte hash (absent for a
    file not stored), then the name and a NUL. Hex hashes in JSON made trees half again as
    large after deflate, and trees are most of what a one-file snapshot adds (bench)."""
    out = [TREE_MAGIC]
    for e in entries:
        digest = bytes.fromhex(e.hash) if e.hash else b""
        out.append(_FIXED.pack(e.kind.encode(), NOTES.index(e.note), bool(digest), e.mode, e.size))
        out.append(digest + e.name.encode("utf-8", "surrogateescape") + b"\0")
    return b"".join(out)


def tree_hash(data: bytes) -> str:
    # prefixed, so a file that holds a tree's bytes never shares its name with that tree
    return hashlib.sha256(b"tree\0" + data).hexdigest()


def parse_tree(data: bytes) -> list[TreeEntry]:
    """The entries of a tree; BadObject for bytes that are no tree (a world chose them, and
    their hash can be right)."""
    if not data.startswith(TREE_MAGIC):
        raise BadObject("not a workspace tree")
    try:
        return _entries(data)
    except (struct.error, IndexError, ValueError):
        raise BadObject("not a workspace tree: its entries are cut short or malformed") from None


def _entries(data: bytes) -> list[TreeEntry]:
    out, pos = [], len(TREE_MAGIC)
    while pos < len(data):
        kind, note, has_hash, mode, size = _FIXED.unpack_from(data, pos)
        pos += _FIXED.size
        digest = data[pos:pos + 32].hex() if has_hash else None
        pos += 32 if has_hash else 0
        end = data.index(b"\0", pos)
        out.append(TreeEntry(data[pos:end].decode("utf-8", "surrogateescape"), kind.decode(),
                             mode, digest, size, NOTES[note]))
        pos = end + 1
    return out


def encode(data: bytes) -> tuple[bytes, int]:
    """Deflated when that saves a tenth or more; source files usually shrink 3-4x."""
    if len(data) < 64:
        return data, RAW
    packed = zlib.compress(data, 6)
    return (packed, DEFLATE) if len(packed) < len(data) * 0.9 else (data, RAW)


# The most one object may decode to: a world chose the bytes, and a 1 MB deflate stream
# inflates to 1 GiB. Far above a stored file (workspace.max_file_size, 10 MiB by default) and
# a tree of 100,000 entries (~6 MiB).
MAX_OBJECT = 256 * 1024 * 1024


class BadObject(ValueError):
    """An object whose bytes are not what its name says, or that decodes past the cap."""


def decode(data: bytes, codec: int, cap: int = MAX_OBJECT) -> bytes:
    if codec == RAW:
        out = bytes(data)
    elif codec == DEFLATE:
        inflater = zlib.decompressobj()
        out = inflater.decompress(data, cap + 1)
    else:
        raise BadObject(f"unknown object codec {codec}")
    if len(out) > cap:
        raise BadObject(f"it decodes to more than {cap} bytes")
    return out


def verified(digest: str, kind: str, data: bytes) -> bytes:
    """The object's bytes, refused unless their hash is its name: an object pulled under
    the hash of common contents (an empty file) must never stand for the user's files."""
    if kind not in (BLOB, TREE):
        raise BadObject(f"unknown object kind {kind!r}")
    if (tree_hash(data) if kind == TREE else blob_hash(data)) != digest:
        raise BadObject("its content does not match its hash")
    return data
