"""The real processes behind the supervisor's seam (supervisor/seam.py: `Procs`, `Clock`):
the harness spawned through pipes (here) or a pseudo-terminal (supervisor/terminal.py),
signalling its process group, liveness checks, the child-subreaper flag. Only seam.Procs
builds these children; the mirror's parse workers take `die_with_parent` from here too.

The harness leads its own process group (`start_new_session`), so a signal to the group
reaches it and the tool commands that share its group; tools that start groups of their own
are found through the process tree (see supervisor/tools.py)."""

from __future__ import annotations

import ctypes
import os
import select
import signal
import subprocess
import sys
import threading
import time
from typing import Callable

import psutil

from .osthread import name_os_thread

PR_SET_CHILD_SUBREAPER = 36
PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """In a helper process of dh (the import's parse worker): SIGKILL when dh dies, even by
    SIGKILL; without it the worker waited on its queue for ever (seen: orphans left behind
    by every killed `dh import` of a large file). Linux only."""
    if not sys.platform.startswith("linux"):
        return
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        return
    if os.getppid() == 1:  # dh died before the prctl took effect
        os._exit(1)


def become_subreaper() -> bool:
    """Orphaned descendants of the harness are re-parented to dh instead of init, so dh can
    see them finish (and reap them). Linux only; elsewhere dh falls back to polling pids."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def process_alive(pid: int | None, create_time: float | None) -> bool:
    """True when pid is running and is the same process (its create time matches)."""
    if not pid:
        return False
    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE:
            return False
        return create_time is None or abs(proc.create_time() - create_time) < 0.05
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return False


def drain(fd: int) -> None:
    """Every byte waiting on a non-blocking wake pipe read and dropped, so the next wait
    sleeps until something new arrives."""
    try:
        while os.read(fd, 4096):
            pass
    except BlockingIOError:
        pass


class Child:
    """A running harness attempt."""

    def __init__(self, popen: subprocess.Popen):
        self.popen = popen
        self.pid = popen.pid
        self.pgid = popen.pid
        self.started = time.monotonic()
        self.last_output = self.started
        try:
            self.create_time = psutil.Process(self.pid).create_time()
        except psutil.Error:
            self.create_time = None
        try:  # a pidfd lets dh sleep until the exit instead of polling (Linux >= 5.3)
            self.pidfd = os.pidfd_open(self.pid)
        except (AttributeError, OSError):
            self.pidfd = None

    def poll(self) -> int | None:
        return self.popen.poll()

    def wait_exit(self, timeout: float, wake_fd: int | None = None) -> int | None:
        """Sleep until the harness exits, a signal arrives on wake_fd, or timeout."""
        if self.pidfd is None:
            return self.wait(timeout)
        fds = [self.pidfd] + ([wake_fd] if wake_fd is not None else [])
        ready, _, _ = select.select(fds, [], [], timeout)
        if wake_fd is not None and wake_fd in ready:
            drain(wake_fd)
        return self.popen.poll()

    def wait(self, timeout: float | None = None) -> int | None:
        try:
            return self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def signal(self, sig: int) -> None:
        signal_group(self.pgid, sig)

    def stderr_tail(self) -> str:
        """The last words the harness wrote on stderr ("" when dh did not see them)."""
        return ""

    def finish(self) -> None:
        """Stop pumping I/O; called once the harness has exited."""
        self.close_pidfd()

    def close_pidfd(self) -> None:
        if self.pidfd is not None:
            os.close(self.pidfd)
            self.pidfd = None


STDERR_TAIL = 2000  # bytes of the harness's stderr kept for a FATAL's error line


class PipeChild(Child):
    """Headless: stdin is the user's; stdout is read through a pipe and copied to ours at
    once, so dh can read session ids from it without delaying it; stderr is copied the same
    way, keeping its tail (why a harness that cannot start died, for the FATAL line)."""

    def __init__(self, argv, env, cwd, on_line: Callable[[bytes], None]):
        popen = subprocess.Popen(argv, env=env, cwd=cwd, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, start_new_session=True, bufsize=0)
        super().__init__(popen)
        self.on_line, self.err_tail = on_line, b""
        self.thread = threading.Thread(target=self._pump, name="dh-stdout", daemon=True)
        self.err_thread = threading.Thread(target=self._pump_stderr, name="dh-stderr", daemon=True)
        self.thread.start()
        self.err_thread.start()

    def _pump_stderr(self) -> None:
        name_os_thread("dh-stderr")
        fd = self.popen.stderr.fileno()
        while data := os.read(fd, 65536):
            _write_all(sys.stderr.fileno(), data)
            self.err_tail = (self.err_tail + data)[-STDERR_TAIL:]

    def stderr_tail(self) -> str:
        return self.err_tail.decode("utf-8", "replace")

    def _pump(self) -> None:
        name_os_thread("dh-stdout")
        fd, buffer = self.popen.stdout.fileno(), b""
        while data := os.read(fd, 65536):
            self.last_output = time.monotonic()
            _write_all(sys.stdout.fileno(), data)
            buffer += data
            *lines, buffer = buffer.split(b"\n")
            for line in lines:
                self.on_line(line)
            if len(buffer) > 1 << 20:
                buffer = b""  # no id hides in a megabyte without a newline

    def finish(self) -> None:
        self.thread.join(timeout=5)
        # a helper of the harness that outlives it may still hold stderr open: the pump goes
        # on until it closes, and never holds up the attempt's end
        self.err_thread.join(timeout=0.5)
        self.popen.stdout.close()
        if not self.err_thread.is_alive():
            self.popen.stderr.close()
        self.close_pidfd()


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        try:
            view = view[os.write(fd, view):]
        except BlockingIOError:
            time.sleep(0.001)
        except (BrokenPipeError, OSError):
            return  # our reader went away; keep draining the harness regardless
