"""Finding the session a launched harness created when it cannot be told its id and prints
none (Codex's and OpenCode's terminal UIs; any harness killed before it printed one): by
the folder it runs in, the time it was launched, and what was there before. Pure helpers
for the wrappers; the live mirror calls Wrapper.launched_session."""

from __future__ import annotations

import os


def same_dir(a: str | None, b: str | None) -> bool:
    return bool(a and b) and os.path.realpath(a) == os.path.realpath(b)


def modified_since(path, since: float) -> bool:
    """The file was written at or after `since` (one second of slack for coarse clocks)."""
    try:
        return os.stat(path).st_mtime >= since - 1.0
    except OSError:
        return False


def file_mark(path):
    """What changes when a harness appends to its session file: mtime and size."""
    try:
        info = os.stat(path)
    except OSError:
        return None
    return (info.st_mtime_ns, info.st_size)


def pick_launched(candidates, before: dict, resuming: bool, mark, claimed):
    """The first of candidates (oldest first) that was not there at launch, or — when the
    harness was told to continue a session it picks itself — whose mark moved since; never
    one another dh session owns. A second harness started later in the same folder made the
    others."""
    for session in candidates:
        sid = session.harness_session_id
        changed = resuming and sid in before and before[sid] != mark(session)
        if (sid not in before or changed) and not claimed(sid):
            return session
    return None
