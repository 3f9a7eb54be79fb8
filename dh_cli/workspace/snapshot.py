"""Taking a snapshot of a working directory into a world's workspace store.

The snapshotter keeps, between snapshots, each file's (size, mtime_ns, inode, mode) and hash:
a file whose stat facts are unchanged is not read again. It also keeps the folder trees and
rebuilds only the folders on the path of a change, so a snapshot after a one-file edit reads
one file and hashes a few trees (bench/bench_workspace.py measures it against git status).

In a git work tree, after a full listing, git finds the changes: while the index file is
unchanged, the files `git status` reports (and those it reported last time, and those read
within the racy window) are looked at again and every other tracked file keeps its entry.
git compares each file's stat facts with its index in C on several threads; doing the same
10,000 lstat calls from Python cost 2.1-2.5x a `git status` under load (1.2x this way). A full
listing is taken again when the index changes, when a file is marked assume-unchanged or
skip-worktree (git status does not look at it), and at least once a minute (FULL_EVERY), so
that a change git does not see (a clean filter mapping a file back to its index content)
waits at most that long."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, replace

from ..errors import NativeStateError
from ..util import now_iso
from .objects import BLOB, DIR, FILE, LINK, TREE, TreeEntry, blob_hash, encode, tree_bytes, tree_hash
from .scan import (GIT_STATUS, GIT_TRACKED, Entry, Rules, entry_of, finish_git, git_dirs, git_head,
                   git_paths, git_prefix, index_key, open_here, start_git, status_sets, tracked_set,
                   walk_paths)
from .store import Snapshot, store_for

Flat = dict[str, TreeEntry]  # path -> its entry (name = last part)
RACY_NS = 100_000_000  # 0.1 s: well above the coarsest mtime tick of local filesystems (ext4: 1 jiffy)
FULL_EVERY = 60.0  # seconds: the longest a snapshot trusts git status without a full listing
# a file that changed while it was read is read again, after a pause, this many times in all
SETTLE_TRIES = 4
SPILL_BYTES = 64 << 20  # new blobs a snapshot holds before it writes them ahead of its row
SETTLE_WAIT = 0.02  # seconds


@dataclass(frozen=True)
class GitState:
    """What the last listing learnt from git, valid while the index file is unchanged."""

    index: tuple | None  # the index file's stat facts when the full listing started
    tracked: frozenset
    untracked: frozenset  # as git status listed them last time
    reported: frozenset  # every path git status listed last time (untracked included)
    since: float  # time.monotonic() of the full listing


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
        self.prefix: str | None = None  # the cwd below its work tree's top (git_prefix)
        self.known: GitState | None = None  # None: the next listing is a full one
        self.racy: set[str] = set()  # files read within RACY_NS of their mtime: read again
        self.busy: frozenset = frozenset()  # files this process holds open (scan.open_here)
        self.held = 0  # bytes of the new blobs the snapshot under way holds

    def take(self, reason: str, turn: int | None = None, step: str | None = None,
             always: bool = False) -> Snapshot | None:
        """Snapshot the cwd; None when it is gone, or unchanged since the last snapshot and not
        `always` (a step's row is kept even then: it says which step the files are from)."""
        if not os.path.isdir(self.cwd):
            return None
        if self.git is False:
            self.git = git_dirs(self.cwd)
            self.prefix = git_prefix(self.cwd) if self.git else None
            self.last = self.store.last(self.session_id)
        objects: dict[str, tuple] = {}
        self.held = 0
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
        """(entries, HEAD, branch): from git status when it can be trusted, else full."""
        fast = self._from_status(objects) if self.known and self.prefix is not None else None
        return fast if fast is not None else self._full_listing(objects)

    def _from_status(self, objects: dict) -> tuple[Flat, str | None, str | None] | None:
        """The last listing with the paths git status reports looked at again; None when the
        index changed (a commit, an add, a checkout) or a full listing is due."""
        known = self.known
        if index_key(self.git) != known.index or time.monotonic() - known.since > FULL_EVERY:
            return None
        status = finish_git(start_git(self.cwd, GIT_STATUS))
        if status is None or index_key(self.git) != known.index:
            return None
        untracked, reported = status_sets(status, self.prefix)
        self._check_count(len(known.tracked) + len(untracked - known.tracked))
        look = untracked | reported | known.reported | self.racy
        fresh = self._flat([p for p in look if p in known.tracked or p in untracked], objects)
        flat = {p: e for p, e in self.flat.items() if p not in look}
        flat.update(fresh)
        self.known = replace(known, untracked=frozenset(untracked),
                             reported=frozenset(reported | untracked))
        return flat, *git_head(self.git)

    def _full_listing(self, objects: dict) -> tuple[Flat, str | None, str | None]:
        """Every file lstat'ed. In a git work tree, the files of the last snapshot are
        stat'ed while git lists the tree: a snapshot then costs about the longer of the two,
        not their sum (bench/bench_workspace.py)."""
        key = index_key(self.git) if self.git else None
        procs = (start_git(self.cwd, GIT_TRACKED), start_git(self.cwd, GIT_STATUS)) if self.git else None
        early = self._flat(list(self.flat), objects) if procs else {}
        paths = self._git_paths(procs, key)
        if paths is None:
            paths, head, branch = walk_paths(self.cwd), None, None
        else:
            head, branch = git_head(self.git)
        self._check_count(len(paths))
        new = self._flat([p for p in paths if p not in early], objects)
        return {p: early[p] if p in early else new[p] for p in paths
                if p in early or p in new}, head, branch

    def _git_paths(self, procs, key) -> list[str] | None:
        """Tracked plus untracked (not ignored) paths, and what the next snapshot may trust."""
        self.known = None
        if procs is None:
            return None
        if self.prefix is None:  # git status's paths could not be made relative to the cwd
            return git_paths(self.cwd)
        listed, status = finish_git(procs[0]), finish_git(procs[1])
        if listed is None or status is None:
            return None
        tracked, plain = tracked_set(listed)
        untracked, reported = status_sets(status, self.prefix)
        if plain and self.prefix is not None:
            self.known = GitState(key, frozenset(tracked), frozenset(untracked),
                                  frozenset(reported | untracked), time.monotonic())
        return sorted(tracked | untracked)

    def _check_count(self, count: int) -> None:
        if count > self.rules.max_files:
            raise TooManyFiles(f"{self.cwd} holds {count:,} files, more than the"
                               f" {self.rules.max_files:,} of [workspace] max_files")

    def _flat(self, paths: list[str], objects: dict) -> Flat:
        """Every listed file's entry. The loop is the hot path of a snapshot (10,000 files):
        an unchanged file costs one lstat and one tuple compare, and keeps its old entry."""
        prefix, stats, flat, lstat = self.cwd.rstrip("/") + "/", self.stats, {}, os.lstat
        # A file changed within the filesystem's timestamp granularity of this look could
        # change again with the same (size, mtime): such a file is read again next time.
        racy = time.time_ns() - RACY_NS
        self.busy = open_here()
        for path in paths:
            try:
                st = lstat(prefix + path)
            except OSError:  # listed by git but deleted from the work tree
                self.racy.discard(path)
                continue
            key = (st.st_size, st.st_mtime_ns, st.st_ino, st.st_mode)
            cached = stats.get(path)
            if cached is not None and cached[0] == key:
                entry = cached[1]
            else:
                entry, st = self._changed(path, st, objects)
                key = (st.st_size, st.st_mtime_ns, st.st_ino, st.st_mode)
                stats[path] = (key if st.st_mtime_ns < racy else None, entry)
                (self.racy.discard if st.st_mtime_ns < racy else self.racy.add)(path)
            if entry is not None:
                flat[path] = entry
        return flat

    def _changed(self, path: str, st: os.stat_result, objects: dict) -> tuple[TreeEntry | None, os.stat_result]:
        """The file's entry, its content stored, and the stat facts it was read with. A
        file that changed while it was read (a command still writing it) is read again
        once it holds still, up to SETTLE_TRIES times: what one read of a growing file gets
        is no state of it anyone made, and a file growing past the size limit would have
        its head stored (`yes | head -c 11MB > big.dat` read mid-write: seen in
        test_workspace_e2e). A file that never holds still is stored as last read."""
        tries = 1
        while True:
            e = entry_of(path, st, self.rules, self.busy)
            if e is None:
                return None, st
            if e.note:
                return self._entry(e, None), st
            data, after = self._read(e)
            if after is None or _same_file(st, after) or tries == SETTLE_TRIES:
                # the size of the bytes stored, which a restore checks them against: a file
                # that never held still has other bytes than its stat said
                e.size = len(data) if data is not None else e.size
                return self._entry(e, self._store(data, objects)), st
            tries += 1
            time.sleep(SETTLE_WAIT)
            try:
                st = os.lstat(os.path.join(self.cwd, path))
            except OSError:  # removed meanwhile
                return None, st

    @staticmethod
    def _entry(e: Entry, digest: str | None) -> TreeEntry:
        name = e.path.rsplit("/", 1)[-1]
        return TreeEntry(name, LINK if e.link else FILE, e.mode, digest, e.size, e.note)

    def _read(self, e: Entry) -> tuple[bytes | None, os.stat_result | None]:
        """(content, the file's stat facts once read); a link's target with no facts."""
        full = os.path.join(self.cwd, e.path)
        try:
            return (os.fsencode(os.readlink(full)), None) if e.link else _read_file(full)
        except OSError:
            return None, None  # gone or unreadable since it was listed: listed without content

    def _store(self, data: bytes | None, objects: dict) -> str | None:
        if data is None:
            return None
        digest = blob_hash(data)
        if digest not in objects:
            packed, codec = encode(data)
            objects[digest] = (digest, BLOB, len(data), codec, packed)
            self.held += len(packed)
            if self.held > SPILL_BYTES:
                self._spill(objects)
        return digest

    def _spill(self, objects: dict) -> None:
        """Writes the new blobs held so far ahead of the snapshot's row (an object needs no
        row to name it), keeping only their facts: the first snapshot of 80 new 9.5 MB files
        held them all until its one transaction, 832 MB at its peak."""
        blobs = {h: o for h, o in objects.items() if o[1] == BLOB and o[4] is not None}
        self.store.put([blobs[h] for h in self._unknown(blobs)], [])
        for digest, row in blobs.items():
            objects[digest] = (*row[:4], None)
        self.held = 0

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


def _read_file(path: str) -> tuple[bytes, os.stat_result]:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    try:
        with os.fdopen(fd, "rb", closefd=False) as f:
            data = f.read()
        return data, os.fstat(fd)
    finally:
        os.close(fd)


def _same_file(before: os.stat_result, after: os.stat_result) -> bool:
    return (before.st_size, before.st_mtime_ns, before.st_ino) == \
        (after.st_size, after.st_mtime_ns, after.st_ino)
