"""Listing a working directory for a snapshot: which files, their stat facts, and which are
kept out of the log (secret-looking names, files over the size limit).

In a git work tree git itself says which files count (`git ls-files -co --exclude-standard`:
tracked plus untracked, minus .gitignore, .git/info/exclude and the user's global excludes);
elsewhere a plain walk (skipping `.git`) with the same secret and size rules."""

from __future__ import annotations

import fnmatch
import os
import re
import stat
import subprocess
from dataclasses import dataclass, field

from ..config import DEFAULT_SECRETS

DEFAULT_MAX_SIZE = 10 * 1024 * 1024  # 10 MiB
DEFAULT_MAX_FILES = 100_000  # a cwd with more (a home folder, not a checkout) is not snapshotted


@dataclass(frozen=True)
class Rules:
    max_size: int = DEFAULT_MAX_SIZE
    secrets: tuple[str, ...] = DEFAULT_SECRETS
    max_files: int = DEFAULT_MAX_FILES

    def __post_init__(self):
        # one regex for all patterns: matching 18 fnmatch patterns one by one took 40 ms of a
        # 10,000-file snapshot, the one regex takes 3 ms
        joined = "|".join(fnmatch.translate(p) for p in self.secrets) or r"(?!)"
        object.__setattr__(self, "_secret", re.compile(joined).match)

    def secret(self, path: str) -> bool:
        return self._secret(path.rsplit("/", 1)[-1]) is not None


@dataclass(slots=True)
class Entry:
    """One file of the listing. `note` says why its content is not stored: secret | large."""

    path: str  # relative, '/'-separated
    mode: int
    size: int
    mtime_ns: int
    inode: int
    link: bool = False
    note: str | None = None
    hash: str | None = None  # filled by the snapshotter


@dataclass
class Listing:
    entries: list[Entry] = field(default_factory=list)
    head: str | None = None
    branch: str | None = None
    git: bool = False


GIT_LS = ["ls-files", "-co", "--exclude-standard", "-z"]


def git_paths(cwd: str) -> list[str] | None:
    """Paths git counts in cwd (relative to it), or None when cwd is not in a work tree."""
    return finish_git(start_git(cwd, GIT_LS))


# `git status` as the change detector of a snapshot after the first (snapshot.py): git compares
# every tracked file's stat facts with its index in C, on several threads, and lists untracked
# files by the same ignore rules as `ls-files -co --exclude-standard`. --no-optional-locks:
# a snapshot never rewrites the user's index.
# Its paths are relative to the work tree's top, whatever the cwd: `-- .` keeps those under
# the cwd, and status_sets cuts the cwd's prefix off (git_prefix).
GIT_STATUS = ["--no-optional-locks", "status", "--porcelain", "-z", "--untracked-files=all",
              "--no-renames", "--ignore-submodules=none", "--", "."]
GIT_TRACKED = ["ls-files", "-c", "-v", "-z"]


def start_git(cwd: str, args: list[str]) -> subprocess.Popen | None:
    """git started, so the caller can do other work while git walks the tree."""
    try:
        return subprocess.Popen(["git", "-C", cwd, *args], stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    except OSError:
        return None


def finish_git(proc: subprocess.Popen | None) -> list[str] | None:
    """The NUL-separated items git printed, or None when it failed."""
    if proc is None:
        return None
    try:
        out, _ = proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        return None
    return [p for p in os.fsdecode(out).split("\0") if p] if proc.returncode == 0 else None


def status_sets(items: list[str], prefix: str = "") -> tuple[set[str], set[str]]:
    """(untracked paths, other reported paths) of `git status --porcelain -z --no-renames`,
    relative to the cwd (`prefix`: the cwd's path below the work tree's top, with a slash)."""
    untracked, reported, cut = set(), set(), len(prefix)
    for item in items:
        path = item[3:]
        if path.startswith(prefix):
            (untracked if item[:2] == "??" else reported).add(path[cut:])
    return untracked, reported


def git_prefix(cwd: str) -> str | None:
    """The cwd's path below its work tree's top ('' at the top, else ending in '/')."""
    try:
        out = subprocess.run(["git", "-C", cwd, "rev-parse", "--show-prefix"], capture_output=True,
                             timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return os.fsdecode(out.stdout).rstrip("\n") if out.returncode == 0 else None


def tracked_set(items: list[str]) -> tuple[set[str], bool]:
    """(tracked paths, all plainly cached) of `git ls-files -c -v -z`: a file marked
    assume-unchanged (lower-case tag) or skip-worktree (S) is one git status does not look at."""
    paths, plain = set(), True
    for item in items:
        paths.add(item[2:])
        plain = plain and item[0] == "H"
    return paths, plain


def index_key(dirs: tuple[str, str]) -> tuple | None:
    """The index file's stat facts: unchanged, the tracked set and its contents are too."""
    try:
        st = os.stat(os.path.join(dirs[0], "index"))
    except OSError:
        return None
    return st.st_size, st.st_mtime_ns, st.st_ino


def git_dirs(cwd: str) -> tuple[str, str] | None:
    """(git dir, common dir) of the work tree holding cwd (they differ in a linked worktree)."""
    try:
        out = subprocess.run(["git", "-C", cwd, "rev-parse", "--absolute-git-dir",
                              "--git-common-dir"], capture_output=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = os.fsdecode(out.stdout).splitlines()
    if out.returncode != 0 or len(lines) != 2:
        return None
    return lines[0], os.path.normpath(os.path.join(cwd, lines[1]))  # relative to cwd


def git_head(dirs: tuple[str, str]) -> tuple[str | None, str | None]:
    """(HEAD commit, branch), read from the git dir's files: a `git rev-parse` per snapshot
    cost 5-10 ms of process start, reading HEAD and its ref costs microseconds."""
    gitdir, common = dirs
    head = _read_text(os.path.join(gitdir, "HEAD"))
    if not head.startswith("ref: "):
        return (head or None), None
    ref = head[5:]
    branch = ref[11:] if ref.startswith("refs/heads/") else ref
    commit = _read_text(os.path.join(common, ref)) or _packed_ref(common, ref)
    return commit, branch


def _read_text(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read().strip()
    except OSError:
        return ""


def _packed_ref(common: str, ref: str) -> str | None:
    for line in _read_text(os.path.join(common, "packed-refs")).splitlines():
        commit, _, name = line.partition(" ")
        if name == ref:
            return commit
    return None  # a branch with no commit yet


def walk_paths(cwd: str) -> list[str]:
    out: list[str] = []
    stack = [""]
    while stack:
        rel = stack.pop()
        try:
            items = list(os.scandir(os.path.join(cwd, rel) if rel else cwd))
        except OSError:
            continue
        for item in items:
            path = f"{rel}/{item.name}" if rel else item.name
            if item.is_dir(follow_symlinks=False):
                if item.name != ".git":
                    stack.append(path)
            else:
                out.append(path)
    return out


def list_paths(cwd: str, dirs: tuple[str, str] | None) -> tuple[list[str], str | None, str | None]:
    """(paths, HEAD, branch); `dirs`: the git dirs (see git_dirs) when cwd is in a work tree."""
    paths = git_paths(cwd) if dirs else None
    if paths is None:
        return walk_paths(cwd), None, None
    return paths, *git_head(dirs)


def open_here() -> frozenset:
    """(device, inode) of every regular file this process holds open. Opening and closing
    one of them drops every POSIX lock the process holds on it, SQLite's included: with
    DH_HOME inside the cwd, a snapshot's read of the log's own files let another dh
    process reset the WAL index under this one's map (dh died of SIGBUS, 2 runs in 14 of
    tests/test_security.py's pulled-path case). So a snapshot never opens them."""
    try:
        fds = os.listdir("/proc/self/fd")
    except OSError:
        return frozenset()
    out = set()
    for fd in fds:
        try:
            st = os.stat(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode):
            out.add((st.st_dev, st.st_ino))
    return frozenset(out)


def list_cwd(cwd: str, rules: Rules, dirs: tuple[str, str] | None = None) -> Listing:
    paths, head, branch = list_paths(cwd, dirs)
    listing = Listing(git=head is not None or dirs is not None, head=head, branch=branch)
    busy = open_here()
    for path in paths:
        entry = _entry(cwd, path, rules, busy)
        if entry is not None:
            listing.entries.append(entry)
    listing.entries.sort(key=lambda e: e.path)
    return listing


def _entry(cwd: str, path: str, rules: Rules, busy: frozenset = frozenset()) -> Entry | None:
    try:
        st = os.lstat(os.path.join(cwd, path))
    except OSError:  # listed by git but deleted from the work tree
        return None
    link = stat.S_ISLNK(st.st_mode)
    if not link and not stat.S_ISREG(st.st_mode):
        return None  # a submodule, a socket, a fifo: nothing to store
    return entry_of(path, st, rules, busy)


def entry_of(path: str, st: os.stat_result, rules: Rules, busy: frozenset = frozenset()) -> Entry | None:
    link = stat.S_ISLNK(st.st_mode)
    if not link and not stat.S_ISREG(st.st_mode):
        return None  # a submodule, a socket, a fifo: nothing to store
    if (st.st_dev, st.st_ino) in busy:
        return None  # a file dh itself holds open (see open_here): never opened by a snapshot
    entry = Entry(path, stat.S_IMODE(st.st_mode), st.st_size, st.st_mtime_ns, st.st_ino, link)
    if rules.secret(path):
        entry.note = "secret"
    elif st.st_size > rules.max_size:
        entry.note = "large"
    return entry
