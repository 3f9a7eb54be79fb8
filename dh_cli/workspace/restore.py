"""Reading snapshots back: a snapshot's files as a flat listing, the difference between two
listings, and writing a snapshot into a folder.

Paths come from the log or a world, which dh does not trust. They go through dh's one
confinement rule (dh_cli/pathrule.py: relative, not empty, no `..`, NUL or backslash, no
symlink on the way, nothing outside the target), plus the canonical form a snapshot writes
(a tree entry's name is one part, a path has no `.` or empty parts), so a restore writes only
under its target."""

from __future__ import annotations

import os
import stat
import struct
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from ..pathrule import Refused, checked_relpath, inside, under
from ..errors import UsageError
from .objects import DIR, FILE, LINK, TreeEntry, blob_hash, file_hash, parse_tree
from .scan import Rules, list_cwd, git_dirs
from .store import Snapshot, store_for

Flat = dict[str, TreeEntry]


class UnsafePath(Refused):
    hint = "the snapshot is damaged or was not written by dh"


@dataclass
class Change:
    status: str  # added | modified | deleted
    path: str
    note: str | None = None


@dataclass
class Restored:
    snapshot: Snapshot
    target: str
    written: list[str] = field(default_factory=list)
    unchanged: int = 0
    not_stored: list[tuple[str, str]] = field(default_factory=list)  # (path, secret|large)
    extra: list[str] = field(default_factory=list)  # in the target, not in the snapshot: kept

    def to_dict(self) -> dict:
        return {"session": self.snapshot.session_id, "seq": self.snapshot.seq,
                "turn": self.snapshot.turn, "step": self.snapshot.step, "target": self.target,
                "written": self.written, "unchanged": self.unchanged,
                "not_stored": [{"path": p, "why": w} for p, w in self.not_stored],
                "extra": self.extra}


# choosing a snapshot -------------------------------------------------------------------------
def pick(world, session_id: str, turn: int | None = None, step: str | None = None) -> Snapshot | None:
    """The last snapshot (of turn N, or the one that ended step ID); None when there is none."""
    snaps = store_for(world).snapshots(session_id)
    if turn is not None and step is not None:
        raise UsageError("give --turn or --step, not both")
    if step is not None:
        found = [s for s in snaps if s.step and (s.step == step or s.step.startswith(step))]
        if not found:
            raise UsageError(f"session {session_id} has no snapshot for step {step!r}",
                             hint="see the snapshots with: dh workspace list SESSION")
        return found[-1]
    if turn is not None:
        found = [s for s in snaps if s.turn == turn]
        if not found:
            raise UsageError(f"session {session_id} has no snapshot in turn {turn}",
                             hint="see the snapshots with: dh workspace list SESSION")
        return found[-1]
    return snaps[-1] if snaps else None


def before_turn(world, session_id: str, turn: int) -> Snapshot | None:
    earlier = [s for s in store_for(world).snapshots(session_id) if (s.turn or 0) < turn]
    return earlier[-1] if earlier else None


# listings ------------------------------------------------------------------------------------
def flat_tree(world, root: str, max_files: int | None = None) -> Flat:
    """Every file of the tree `root`, by checked relative path. A tree that holds one of its
    own ancestors is refused (it would list forever), and so is a listing past max_files
    (default: the config's workspace.max_files): a few trees each naming one subtree many
    times would expand to more files than any snapshot lists."""
    cap = max_files if max_files is not None else _settings().max_files
    store, out, stack, listed = store_for(world), {}, [("", root, frozenset())], 0
    while stack:
        prefix, digest, above = stack.pop()
        if digest in above:
            raise UnsafePath(f"refusing the workspace tree {digest[:12]}: it holds itself")
        for entry in _entries(store.get(digest), digest):
            listed += 1
            if listed > cap:
                raise UnsafePath(f"refusing the snapshot: it lists more than {cap} entries "
                                 "(workspace.max_files)")
            if "/" in entry.name:
                raise UnsafePath(f"refusing a workspace path from the log: {prefix + entry.name!r}")
            path = checked_path(f"{prefix}{entry.name}")
            if entry.kind == DIR:
                stack.append((path + "/", entry.hash, above | {digest}))
            elif entry.kind in (FILE, LINK):
                out[path] = entry
            else:
                raise UnsafePath(f"refusing a workspace entry of kind {entry.kind!r}: {path!r}")
    return out


def _entries(data: bytes, digest: str) -> list[TreeEntry]:
    try:
        return parse_tree(data)
    except (ValueError, struct.error, UnicodeError) as exc:
        raise UnsafePath(f"refusing the workspace tree {digest[:12]}: {exc}") from None


def _settings():
    from ..config import load

    return load().settings.workspace


def flat_dir(cwd: str, rules: Rules) -> Flat:
    """The folder as a snapshot would list it (same git and secret rules), hashed."""
    out = {}
    for e in list_cwd(cwd, rules, git_dirs(cwd)).entries:
        digest = None
        if not e.note:
            try:
                full = os.path.join(cwd, e.path)
                digest = blob_hash(os.fsencode(os.readlink(full))) if e.link else _hash(full)
            except OSError:
                pass
        out[e.path] = TreeEntry(e.path.rsplit("/", 1)[-1], LINK if e.link else "f", e.mode,
                                digest, e.size, e.note)
    return out


def diff(old: Flat, new: Flat) -> list[Change]:
    changes = [Change("added", p, new[p].note) for p in new if p not in old]
    changes += [Change("deleted", p, old[p].note) for p in old if p not in new]
    changes += [Change("modified", p, new[p].note) for p in new if p in old
                and _content(old[p]) != _content(new[p])]
    return sorted(changes, key=lambda c: c.path)


def _content(entry: TreeEntry) -> tuple:
    # a file whose content is not stored compares by size (its hash is unknown)
    return (entry.kind, entry.mode & 0o111, entry.hash if not entry.note else entry.size)


# writing -------------------------------------------------------------------------------------
def checked_path(path: str) -> str:
    """A snapshot's path, refused unless pathrule.py accepts it and it is in canonical form."""
    try:
        canonical = str(checked_relpath(path))
    except Refused as exc:
        raise UnsafePath(f"refusing a workspace path from the log: {path!r}") from exc
    if canonical != path:  # `a//b`, `./a`, `a/`: not a path a snapshot writes
        raise UnsafePath(f"refusing a workspace path from the log: {path!r}")
    return path


def restore_into(world, snap: Snapshot, target: str, only: set[str] | None = None,
                 max_bytes: int | None = None) -> Restored:
    """Write the snapshot's files under `target` (created if missing); files already equal
    are left alone, files the snapshot lacks are kept and listed in `extra`. Plain files
    only: modes without setuid, setgid or sticky bits, symlinks that stay in the target,
    every file's bytes checked against its hash and its listed size, and no more than
    max_bytes in all (default: the config's workspace.max_restore_size)."""
    os.makedirs(target, exist_ok=True)
    target = os.path.realpath(target)
    files, store = flat_tree(world, snap.root), store_for(world)
    current = flat_dir(target, Rules(max_size=1 << 62, secrets=()))
    result = Restored(snap, target, extra=sorted(p for p in current if p not in files))
    _check_folders(target, files)  # refused before anything is written
    todo = []
    for path, entry in sorted(files.items()):
        if entry.note or entry.hash is None:
            result.not_stored.append((path, entry.note or "unreadable"))
        elif only is not None and path not in only or _same(current.get(path), entry):
            result.unchanged += 1
        else:
            _check_link(store, target, path, entry)
            todo.append((path, entry))
    _check_total(todo, max_bytes if max_bytes is not None else _settings().max_restore_size)
    for path, entry in todo:
        _write(target, path, entry, _content_of(store, path, entry))
        result.written.append(path)
    return result


def _check_total(todo: list, cap: int) -> None:
    total = sum(entry.size for _, entry in todo)  # each size is checked against its bytes
    if total > cap:
        raise UnsafePath(f"refusing the snapshot: it would write {total} bytes, more than "
                         f"{cap} (workspace.max_restore_size)")


def _content_of(store, path: str, entry: TreeEntry) -> bytes:
    data = store.get(entry.hash)  # its hash checked (store.py)
    if len(data) != entry.size:
        raise UnsafePath(f"refusing {path!r}: the snapshot lists {entry.size} bytes, its "
                         f"content has {len(data)}")
    return data


def _check_link(store, target: str, path: str, entry: TreeEntry) -> None:
    """A symlink is restored only when its text, read from the folder it sits in, stays in
    target: never absolute, never out through `..`."""
    if entry.kind != LINK:
        return
    text = os.fsdecode(_content_of(store, path, entry))
    folder = os.path.dirname(os.path.join(target, path))
    if "\0" in text or os.path.isabs(text) or not _within(os.path.join(folder, text), target):
        raise UnsafePath(f"refusing the symlink {path!r} -> {text!r}: it leaves {target}")


def _within(path: str, root: str) -> bool:
    normal = os.path.normpath(path)
    return normal == root or normal.startswith(root.rstrip(os.sep) + os.sep)


def _same(have: TreeEntry | None, want: TreeEntry) -> bool:
    return have is not None and have.kind == want.kind and have.hash == want.hash and (
        want.kind == LINK or have.mode == want.mode & 0o777)


def _write(target: str, path: str, entry: TreeEntry, data: bytes) -> None:
    folder = _safe_folder(target, checked_path(path))
    name = path.rsplit("/", 1)[-1]
    if entry.kind == LINK:
        tmp = os.path.join(folder, f".dh-restore-{os.getpid()}-{name}")
        os.symlink(os.fsdecode(data), tmp)
    else:
        fd, tmp = tempfile.mkstemp(prefix=".dh-restore-", dir=folder)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.chmod(tmp, entry.mode & 0o777)  # never setuid, setgid or sticky
    final = os.path.join(folder, name)
    if os.path.isdir(final) and not os.path.islink(final):
        os.unlink(tmp)
        raise UnsafePath(f"cannot restore {path}: {final} is a folder",
                         hint="restore into an empty folder with: dh workspace restore --to DIR")
    os.replace(tmp, final)


def _check_folders(target: str, files: Flat) -> None:
    for parent in sorted({p.rsplit("/", 1)[0] for p in files if "/" in p}):
        try:
            under(Path(target), parent)
        except Refused as exc:
            raise UnsafePath(f"cannot restore into {target}: {exc}") from exc


def _safe_folder(target: str, path: str) -> str:
    """The folder of `path` under target, created as needed: pathrule.py's `under` refuses a
    symlink on the way or a step leaving target; a step that is a file is refused too."""
    parent = path.rsplit("/", 1)[0] if "/" in path else ""
    if not parent:
        return target
    try:
        folder = str(under(Path(target), parent))
    except Refused as exc:
        raise UnsafePath(f"cannot restore {path}: {exc}") from exc
    step = target
    for part in parent.split("/"):
        step = os.path.join(step, part)
        try:
            os.mkdir(step)
        except FileExistsError:
            if not stat.S_ISDIR(os.lstat(step).st_mode):
                raise UnsafePath(f"cannot restore {path}: {step} is not a folder (or is a symlink)",
                                 hint="restore into an empty folder with: dh workspace restore"
                                 " --to DIR") from None
    if not inside(folder, target):  # a step swapped for a symlink while it was made
        raise UnsafePath(f"cannot restore {path}: {folder} leaves {target}")
    return folder


def _hash(path: str) -> str:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    try:
        return file_hash(fd)
    finally:
        os.close(fd)
