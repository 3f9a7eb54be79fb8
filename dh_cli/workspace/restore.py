"""Reading snapshots back: a snapshot's files as a flat listing, the difference between two
listings, and writing a snapshot into a folder.

Paths come from the log or a world, which dh does not trust. They go through dh's one
confinement rule (dh_cli/confine.py: relative, not empty, no `..`, NUL or backslash, no
symlink on the way, nothing outside the target), plus the canonical form a snapshot writes
(a tree entry's name is one part, a path has no `.` or empty parts), so a restore writes only
under its target."""

from __future__ import annotations

import os
import stat
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from ..confine import Refused, checked_relpath, inside, under
from ..errors import UsageError
from .objects import DIR, LINK, TreeEntry, blob_hash, parse_tree
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
def flat_tree(world, root: str) -> Flat:
    """Every file of the tree `root`, by checked relative path."""
    store, out, stack = store_for(world), {}, [("", root)]
    while stack:
        prefix, digest = stack.pop()
        for entry in parse_tree(store.get(digest)):
            if "/" in entry.name:
                raise UnsafePath(f"refusing a workspace path from the log: {prefix + entry.name!r}")
            path = checked_path(f"{prefix}{entry.name}")
            if entry.kind == DIR:
                stack.append((path + "/", entry.hash))
            else:
                out[path] = entry
    return out


def flat_dir(cwd: str, rules: Rules) -> Flat:
    """The folder as a snapshot would list it (same git and secret rules), hashed."""
    out = {}
    for e in list_cwd(cwd, rules, git_dirs(cwd)).entries:
        digest = None
        if not e.note:
            try:
                full = os.path.join(cwd, e.path)
                digest = blob_hash(os.fsencode(os.readlink(full)) if e.link else _read(full))
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
    """A snapshot's path, refused unless confine.py accepts it and it is in canonical form."""
    try:
        canonical = str(checked_relpath(path))
    except Refused as exc:
        raise UnsafePath(f"refusing a workspace path from the log: {path!r}") from exc
    if canonical != path:  # `a//b`, `./a`, `a/`: not a path a snapshot writes
        raise UnsafePath(f"refusing a workspace path from the log: {path!r}")
    return path


def restore_into(world, snap: Snapshot, target: str, only: set[str] | None = None) -> Restored:
    """Write the snapshot's files under `target` (created if missing); files already equal
    are left alone, files the snapshot lacks are kept and listed in `extra`."""
    os.makedirs(target, exist_ok=True)
    target = os.path.realpath(target)
    files, store = flat_tree(world, snap.root), store_for(world)
    current = flat_dir(target, Rules(max_size=1 << 62, secrets=()))
    result = Restored(snap, target, extra=sorted(p for p in current if p not in files))
    _check_folders(target, files)  # refused before anything is written
    for path, entry in sorted(files.items()):
        if entry.note or entry.hash is None:
            result.not_stored.append((path, entry.note or "unreadable"))
        elif only is not None and path not in only or _same(current.get(path), entry):
            result.unchanged += 1
        else:
            _write(target, path, entry, store.get(entry.hash))
            result.written.append(path)
    return result


def _same(have: TreeEntry | None, want: TreeEntry) -> bool:
    return have is not None and have.kind == want.kind and have.hash == want.hash and (
        want.kind == LINK or have.mode == want.mode)


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
        os.chmod(tmp, entry.mode & 0o7777)
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
    """The folder of `path` under target, created as needed: confine.py's `under` refuses a
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


def _read(path: str) -> bytes:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    with os.fdopen(fd, "rb") as handle:
        return handle.read()
