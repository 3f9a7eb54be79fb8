"""Per-session locks on this machine: one writer (one supervising dh) per session. A file lock
dies with its process, so a dh killed with SIGKILL never leaves a session locked."""

from __future__ import annotations

import fcntl
import hashlib
import os
from pathlib import Path

from ..errors import NativeStateError, SessionLocked
from ..paths import SAFE_ID


class SessionLock:
    def __init__(self, folder: Path, session_id: str):
        if not SAFE_ID.fullmatch(session_id or ""):  # an id from a pulled log names a file here
            raise NativeStateError(f"refusing session id {session_id!r} from the log",
                                   hint="a dh session id is letters and digits")
        self.path = folder / "locks" / f"{session_id}.lock"
        self.what = f"session {session_id}"
        self.fd: int | None = None

    def acquire(self) -> "SessionLock":
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "another dh"
            os.close(fd)
            raise SessionLocked(f"{self.what} is in use by dh (pid {holder})",
                                hint="wait for that dh to finish, or stop it") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        self.fd = fd
        return self

    def release(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def __enter__(self) -> "SessionLock":
        return self if self.fd is not None else self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()


class NativeLock(SessionLock):
    """A lock on the harness's own session (its id, or its file): two dh sessions that name
    one native session (e.g. `dh run pi -- --session FILE` beside `dh resume`) never run
    two harnesses on it. The file is named by a hash, so any id or path is safe here."""

    def __init__(self, folder: Path, harness: str, key: str):
        digest = hashlib.sha256(f"{harness}\0{key}".encode("utf-8", "surrogateescape")).hexdigest()[:32]
        self.path = folder / "locks" / f"native-{digest}.lock"
        self.what = f"the {harness} session {key[:200]}"
        self.fd = None


def native_keys(native_id: str | None, native_path: str | None) -> list[str]:
    """What names a native session: its id and its file (resolved), as either is known."""
    keys = [f"id:{native_id}"] if native_id else []
    if native_path:
        keys.append(f"path:{os.path.realpath(native_path)}")
    return sorted(keys)
