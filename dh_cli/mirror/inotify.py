"""A minimal inotify watcher (Linux) for the live mirror: the thread sleeps in select() until
the kernel says a file in the folder changed, so an idle session costs no CPU and an append
wakes the mirror within a millisecond. (watchfiles polls its event queue every `step`
milliseconds, which is what this avoids; it stays the fallback on other systems.)"""

from __future__ import annotations

import ctypes
import os
import select
import sys

IN_MODIFY, IN_CLOSE_WRITE, IN_MOVED_TO, IN_CREATE = 0x2, 0x8, 0x80, 0x100
IN_NONBLOCK, IN_CLOEXEC = 0o4000, 0o2000000
MASK = IN_MODIFY | IN_CLOSE_WRITE | IN_MOVED_TO | IN_CREATE


class Inotify:
    def __init__(self, folder: str):
        libc = ctypes.CDLL(None, use_errno=True)
        self.fd = libc.inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
        if self.fd < 0:
            raise OSError(ctypes.get_errno(), "inotify_init1 failed")
        if libc.inotify_add_watch(self.fd, os.fsencode(folder), MASK) < 0:
            os.close(self.fd)
            raise OSError(ctypes.get_errno(), f"cannot watch {folder}")

    def wait(self, timeout: float, also: int | None = None) -> bool:
        """True when something changed (events are drained); False on timeout or `also`."""
        fds = [self.fd] + ([also] if also is not None else [])
        ready, _, _ = select.select(fds, [], [], timeout)
        if self.fd not in ready:
            return False
        try:
            while os.read(self.fd, 65536):
                pass
        except BlockingIOError:
            pass
        return True

    def close(self) -> None:
        os.close(self.fd)


def available() -> bool:
    return sys.platform.startswith("linux")
