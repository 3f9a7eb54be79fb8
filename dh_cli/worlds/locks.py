"""Per-session locks on this machine: one writer (one supervising dh) per session. A file lock
dies with its process, so a dh killed with SIGKILL never leaves a session locked."""

from __future__ import annotations

import fcntl
import os
import re
from pathlib import Path

from ..errors import NativeStateError, SessionLocked


SAFE_ID = re.compile(r"[0-9A-Za-z][0-9A-Za-z_-]{0,127}")


class SessionLock:
    def __init__(self, folder: Path, session_id: str):
        if not SAFE_ID.fullmatch(session_id or ""):  # an id from a pulled log names a file here
            raise NativeStateError(f"refusing session id {session_id!r} from the log",
                                   hint="a dh session id is letters and digits")
        self.path = folder / "locks" / f"{session_id}.lock"
        self.fd: int | None = None

    def acquire(self) -> "SessionLock":
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "another dh"
            os.close(fd)
            raise SessionLocked(f"session {self.path.stem} is in use by dh (pid {holder})",
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
