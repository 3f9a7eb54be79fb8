"""A minimal inotify watcher (Linux) for the live mirror: the thread sleeps in select() until
the kernel says a file in a watched folder changed, so an idle session costs no CPU and an
append wakes the mirror within a millisecond. (watchfiles polls its event queue every `step`
milliseconds, which is what this avoids; it stays the fallback on other systems.)

inotify is not recursive: a folder created inside a watched one (Codex's dated
`sessions/YYYY/MM/DD/`) is watched as soon as its creation is read, with the folders already
made inside it in the meantime."""

from __future__ import annotations

import ctypes
import os
import select
import struct
import sys

IN_MODIFY, IN_CLOSE_WRITE, IN_MOVED_TO, IN_CREATE = 0x2, 0x8, 0x80, 0x100
IN_ISDIR = 0x40000000
IN_NONBLOCK, IN_CLOEXEC = 0o4000, 0o2000000
MASK = IN_MODIFY | IN_CLOSE_WRITE | IN_MOVED_TO | IN_CREATE
EVENT = struct.Struct("iIII")  # wd, mask, cookie, len; then len bytes of name
MAX_WATCHES = 4096  # a bound for one session's watches (a flood of new folders stops here)


class Inotify:
    def __init__(self, folder: str | None = None):
        self.libc = ctypes.CDLL(None, use_errno=True)
        self.fd = self.libc.inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
        if self.fd < 0:
            raise OSError(ctypes.get_errno(), "inotify_init1 failed")
        self.folders: dict[int, bytes] = {}
        if folder is not None and not self.add(folder):
            os.close(self.fd)
            raise OSError(ctypes.get_errno(), f"cannot watch {folder}")

    def add(self, folder) -> int | None:
        """Watch one more folder (again for a folder already watched: no change); its watch
        descriptor (never 0), or None. Safe from another thread: inotify_add_watch is one
        system call on the descriptor."""
        if len(self.folders) >= MAX_WATCHES:
            return None
        path = os.fsencode(folder)
        wd = self.libc.inotify_add_watch(self.fd, path, MASK)
        if wd < 0:
            return None
        self.folders[wd] = path
        return wd

    def remove(self, wd: int) -> None:
        """Stop watching one folder (the shared mirror, once no session it holds lives there)."""
        if self.folders.pop(wd, None) is not None:
            self.libc.inotify_rm_watch(self.fd, wd)

    def wait(self, timeout: float, also: int | None = None) -> bool:
        """True when something changed (events are drained); False on timeout or `also`."""
        fds = [self.fd] + ([also] if also is not None else [])
        ready, _, _ = select.select(fds, [], [], timeout)
        if self.fd not in ready:
            return False
        self.drain()
        return True

    def drain(self) -> set[int]:
        """Read the events that are there (without waiting), following new folders.
        Returns the watches that had events."""
        touched: set[int] = set()
        try:
            while data := os.read(self.fd, 65536):
                touched |= self._follow_new_folders(data)
        except BlockingIOError:
            pass
        return touched

    def _follow_new_folders(self, data: bytes) -> set[int]:
        at, touched = 0, set()
        while at + EVENT.size <= len(data):
            wd, mask, _, length = EVENT.unpack_from(data, at)
            touched.add(wd)
            name = data[at + EVENT.size:at + EVENT.size + length].rstrip(b"\0")
            at += EVENT.size + length
            parent = self.folders.get(wd)
            if mask & IN_ISDIR and mask & (IN_CREATE | IN_MOVED_TO) and parent is not None:
                self._add_tree(os.path.join(parent, name))
        return touched

    def _add_tree(self, folder: bytes) -> None:
        """The new folder and what was made inside it before its watch existed."""
        if not self.add(folder):
            return
        try:
            for entry in os.scandir(folder):
                if entry.is_dir(follow_symlinks=False):
                    self._add_tree(entry.path)
        except OSError:
            pass

    def close(self) -> None:
        os.close(self.fd)


def available() -> bool:
    return sys.platform.startswith("linux")
