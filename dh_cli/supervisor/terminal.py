"""Interactive runs: the harness gets a pseudo-terminal, and the user's terminal is passed
through — keys in, output out, window size on SIGWINCH. dh's own terminal is in raw mode
only while an attempt runs and is restored between attempts, so dh's one-line notices print
normally."""

from __future__ import annotations

import fcntl
import os
import pty
import select
import signal
import subprocess
import termios
import threading
import time
import tty

from .procs import Child, _write_all


def _window_size(fd: int) -> bytes | None:
    try:
        return fcntl.ioctl(fd, termios.TIOCGWINSZ, b"\0" * 8)
    except OSError:
        return None


def _take_terminal() -> None:
    # Runs in the child after setsid: the pty slave (fd 0) becomes its controlling terminal.
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


class PtyChild(Child):
    def __init__(self, argv, env, cwd, stdin_fd: int = 0, stdout_fd: int = 1):
        self.stdin_fd, self.stdout_fd = stdin_fd, stdout_fd
        self.master, slave = pty.openpty()
        size = _window_size(stdin_fd)
        if size:
            fcntl.ioctl(slave, termios.TIOCSWINSZ, size)
        popen = subprocess.Popen(argv, env=env, cwd=cwd, stdin=slave, stdout=slave, stderr=slave,
                                 start_new_session=True, preexec_fn=_take_terminal, close_fds=True)
        os.close(slave)
        super().__init__(popen)
        self.saved = self._raw_mode()
        self.stop = threading.Event()
        self.old_winch = signal.signal(signal.SIGWINCH, self._resize) \
            if threading.current_thread() is threading.main_thread() else None
        self.thread = threading.Thread(target=self._pump, name="dh-pty", daemon=True)
        self.thread.start()

    def _raw_mode(self):
        try:
            saved = termios.tcgetattr(self.stdin_fd)
            tty.setraw(self.stdin_fd)
            return saved
        except termios.error:
            return None

    def _resize(self, *_):
        size = _window_size(self.stdin_fd)
        if size:
            fcntl.ioctl(self.master, termios.TIOCSWINSZ, size)
            self.signal(signal.SIGWINCH)

    def _pump(self) -> None:
        watch = [self.master, self.stdin_fd]
        while not self.stop.is_set():
            try:
                ready, _, _ = select.select(watch, [], [], 0.05)
            except (OSError, ValueError):
                return
            if self.master in ready and not self._copy(self.master, self.stdout_fd, output=True):
                return
            if self.stdin_fd in ready and not self._copy(self.stdin_fd, self.master):
                watch = [self.master]  # our stdin closed: keep showing output

    def _copy(self, src: int, dst: int, output: bool = False) -> bool:
        try:
            data = os.read(src, 65536)
        except OSError:
            return False  # EIO: the harness closed its terminal
        if not data:
            return False
        if output:
            self.last_output = time.monotonic()
        _write_all(dst, data)
        return True

    def finish(self) -> None:
        """Drain what is left, then give the user's terminal back as it was."""
        self.stop.set()
        self.thread.join(timeout=2)
        try:
            while select.select([self.master], [], [], 0)[0] and self._copy(self.master, self.stdout_fd):
                pass
        except OSError:
            pass
        os.close(self.master)
        self.close_pidfd()
        if self.saved is not None:
            termios.tcsetattr(self.stdin_fd, termios.TCSADRAIN, self.saved)
        if self.old_winch is not None:
            signal.signal(signal.SIGWINCH, self.old_winch)
