"""Give the calling thread its name in the kernel too (Linux prctl PR_SET_NAME, 15 bytes), so
that `top -H`, `ps -L` and the load benchmark (bench/proc_cpu.py) can tell dh's threads apart:
Python 3.11 names threads only for itself."""

from __future__ import annotations

import ctypes
import sys

PR_SET_NAME = 15
_libc = None


def name_os_thread(name: str) -> None:
    global _libc
    if not sys.platform.startswith("linux"):
        return
    try:
        _libc = _libc or ctypes.CDLL(None, use_errno=True)
        _libc.prctl(PR_SET_NAME, name.encode()[:15], 0, 0, 0)
    except (OSError, AttributeError):
        pass  # a name for tools only: nothing depends on it
