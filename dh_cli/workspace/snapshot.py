"""Taking a snapshot of a working directory into a world's workspace store.

The snapshotter keeps, between snapshots, each file's (size, mtime_ns, inode, mode) and hash:
a file whose stat facts are unchanged is not read again. It also keeps the folder trees and
rebuilds only the folders on the path of a change, so a snapshot after a one-file edit reads
one file and hashes a few trees (bench/bench_workspace.py measures it against git status)."""

from __future__ import annotations

import os
import time

from ..errors import NativeStateError
from ..util import now_iso
from .objects import BLOB, DIR, FILE, LINK, TREE, TreeEntry, blob_hash, encode, tree_bytes, tree_hash
from .scan import (Entry, Rules, entry_of, finish_git_paths, git_dirs, git_head, start_git_paths,
                   walk_paths)
from .store import Snapshot, store_for

Flat = dict[str, TreeEntry]  # path -> its entry (name = last part)
RACY_NS = 100_000_000  # 0.1 s: well above the coarsest mtime tick of local filesystems (ext4: 1 jiffy)


class TooManyFiles(NativeStateError):
    pass


class Snapshotter:
    def __init__(self, world, session_id: str, cwd: str, rules: Rules | None = None):
        self.world, self.session_id, self.cwd = world, session_id, cwd
        self.rules = rules or Rules()
        self.store = store_for(world)
        self.stats: dict[str, tuple] = {}  # path -> ((size, mtime_ns, inode, mode), hash)
        self.flat: Flat = {}
        self.dirs: dict[str, dict[str, TreeEntry]] = {"": {}}
        self.dir_hash: dict[str, str] = {}
        self.last: tuple | None = None  # (root, head) of the last snapshot stored
        self.git: tuple | None | bool = False  # git dirs, None when not a work tree (asked once)

    def take(self, reason: str, turn: int | None = None, step: str | None = None,
             always: bool = False) -> Snapshot | None:
        """Snapshot the cwd; None when it is gone, or unchanged since the last snapshot and not
        `always` (a step's row is kept even then: it says which step the files are from)."""
        if not os.path.isdir(self.cwd):
            return None
        if self.git is False:
            self.git = git_dirs(self.cwd)
            self.last = self.store.last(self.session_id)
        objects: dict[str, tuple] = {}
        flat, head, branch = self._listing(objects)
        root = self._update_trees(flat, objects)
        used = {e.hash for e in flat.values()}
        objects = {h: o for h, o in objects.items() if o[1] == TREE or h in used}
        if self.last == (root, head) and not always:
            return None
        snap = self._snapshot(flat, root, head, branch, reason, turn, step)
        fresh = self._unknown(objects)
        self.store.put([objects[h] for h in fresh], [snap])
        self.last = (root, head)
        return snap

    def _snapshot(self, flat: Flat, root: str, head, branch, reason, turn, step) -> Snapshot:
        entries = flat.values()
        return Snapshot(self.session_id, self.store.next_seq(self.session_id), now_iso(), turn,
                        step, reason, root, head, branch, len(flat),
                        sum(e.size for e in entries), sum(1 for e in entries if e.note))

    def _unknown(self, objects: dict[str, tuple]) -> list[str]:
        known = self.store.known(list(objects)) if objects else set()
        return [h for h in objects if h not in known]

    # files ------------------------------------------------------------------------------------
    def _listing(self, objects: dict) -> tuple[Flat, str | None, str | None]:
        """(entries, HEAD, branch). In a git work tree, the files of the last snapshot are
        stat'ed while `git ls-files` walks the tree: a snapshot then costs about the longer
        of the two, not their sum (bench/bench_workspace.py)."""
        proc = start_git_paths(self.cwd) if self.git else None
        early = self._flat(list(self.flat), objects) if proc else {}
        paths = finish_git_paths(proc)
        if paths is None:
            paths, head, branch = walk_paths(self.cwd), None, None
        else:
            head, branch = git_head(self.git)
        if len(paths) > self.rules.max_files:
            raise TooManyFiles(f"{self.cwd} holds {len(paths):,} files, more than the"
                               f" {self.rules.max_files:,} of [workspace] max_files")
        new = self._flat([p for p in paths if p not in early], objects)
        return {p: early[p] if p in early else new[p] for p in paths
                if p in early or p in new}, head, branch

    def _flat(self, paths: list[str], objects: dict) -> Flat:
        """Every listed file's entry. The loop is the hot path of a snapshot (10,000 files):
        an unchanged file costs one lstat and one tuple compare, and keeps its old entry."""
        prefix, stats, flat, lstat = self.cwd.rstrip("/") + "/", self.stats, {}, os.lstat
        # A file changed within the filesystem's timestamp granularity of this look could
        # change again with the same (size, mtime): such a file is read again next time.
        racy = time.time_ns() - RACY_NS
        for path in paths:
            try:
                st = lstat(prefix + path)
            except OSError:  # listed by git but deleted from the work tree
                continue
            key = (st.st_size, st.st_mtime_ns, st.st_ino, st.st_mode)
            cached = stats.get(path)
            if cached is not None and cached[0] == key:
                entry = cached[1]
            else:
                entry = self._changed(path, st, objects)
                stats[path] = (key if st.st_mtime_ns < racy else None, entry)
            if entry is not None:
                flat[path] = entry
        return flat

    def _changed(self, path: str, st: os.stat_result, objects: dict) -> TreeEntry | None:
        e = entry_of(path, st, self.rules)
        if e is None:
            return None
        digest = None if e.note else self._read(e, objects)
        name = e.path.rsplit("/", 1)[-1]
        return TreeEntry(name, LINK if e.link else FILE, e.mode, digest, e.size, e.note)

    def _read(self, e: Entry, objects: dict) -> str | None:
        full = os.path.join(self.cwd, e.path)
        try:
            data = os.fsencode(os.readlink(full)) if e.link else _read_file(full)
        except OSError:
            return None  # gone or unreadable since it was listed: listed without content
        digest = blob_hash(data)
        if digest not in objects:
            packed, codec = encode(data)
            objects[digest] = (digest, BLOB, len(data), codec, packed)
        return digest

    # trees ------------------------------------------------------------------------------------
    def _update_trees(self, flat: Flat, objects: dict) -> str:
        old = self.flat
        changed = [p for p, e in flat.items() if old.get(p) is not e]
        removed = [p for p in old if p not in flat]
        dirty = {""} if not self.dir_hash else set()
        for path in changed:
            self._folder(_parent(path), dirty)[flat[path].name] = flat[path]
        for path in removed:
            self._folder(_parent(path), dirty).pop(path.rsplit("/", 1)[-1], None)
        self.flat = flat
        for folder in sorted(dirty, key=lambda d: d.count("/") + bool(d), reverse=True):
            self._hash_folder(folder, objects)
        return self.dir_hash[""]

    def _folder(self, folder: str, dirty: set) -> dict[str, TreeEntry]:
        """The folder's entries, marking it and its ancestors for rehashing."""
        node = folder
        while True:
            dirty.add(node)
            self.dirs.setdefault(node, {})
            if node == "":
                break
            node = _parent(node)
        return self.dirs[folder]

    def _hash_folder(self, folder: str, objects: dict) -> None:
        entries = self.dirs.get(folder, {})
        parent = _parent(folder) if folder else None
        if not entries and folder:
            self.dirs.pop(folder, None)
            self.dir_hash.pop(folder, None)
            self.dirs.get(parent, {}).pop(folder.rsplit("/", 1)[-1], None)
            return
        data = tree_bytes([entries[n] for n in sorted(entries)])
        digest = tree_hash(data)
        self.dir_hash[folder] = digest
        if digest not in objects:
            packed, codec = encode(data)
            objects[digest] = (digest, TREE, len(data), codec, packed)
        if parent is not None:
            name = folder.rsplit("/", 1)[-1]
            self.dirs[parent][name] = TreeEntry(name, DIR, 0o755, digest, 0)


def _parent(path: str) -> str:
    return path.rsplit("/", 1)[0] if "/" in path else ""


def _read_file(path: str) -> bytes:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    try:
        with os.fdopen(fd, "rb", closefd=False) as f:
            return f.read()
    finally:
        os.close(fd)
