"""Interactive runs: the harness gets a pseudo-terminal, and the user's terminal is passed
through — keys in, output out, window size on SIGWINCH. dh's own terminal is in raw mode
only while an attempt runs and is restored between attempts, so dh's one-line notices print
normally.

A killed TUI leaves the terminal as it had set it: in the alternate screen, cursor hidden,
mouse and bracketed-paste reporting on, keypad in application mode, its frame on screen.
When an attempt ends dh puts every such mode back (RESET); before a relaunch it also clears
the screen (CLEAR), so the new TUI does not draw over rows of the old frame."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import signal
import subprocess
import termios
import threading
import time
import tty

from ..osthread import name_os_thread
from ..procs import Child, _write_all


RESET = (
    b"\x1b[?1049l"  # leave the alternate screen (restores the main one)
    b"\x1b[?1000l\x1b[?1002l\x1b[?1003l\x1b[?1005l\x1b[?1006l\x1b[?1015l"  # mouse reports off
    b"\x1b[?2004l"  # bracketed paste off
    b"\x1b[?1004l"  # focus reports off
    b"\x1b[?2026l"  # end a synchronized update cut short (or the terminal stops drawing)
    b"\x1b[?1l\x1b>"  # cursor keys and keypad back to normal mode
    b"\x1b[>4m"  # modifyOtherKeys back to the default
    b"\x1b[r\x1b[?7h"  # whole-screen scroll region, line wrap on
    b"\x1b[0m\x1b[?25h"  # plain colours, cursor shown
)
CLEAR = b"\x1b[H\x1b[2J"  # cursor home, screen erased (the scrollback is the user's: kept)


KITTY_PUSH = re.compile(rb"\x1b\[>\d*u")
KITTY_POP = re.compile(rb"\x1b\[<\d*u")


def restore_screen(fd: int, clear: bool = False, kitty_pushed: int = 0) -> None:
    """Put back the modes a TUI may have set; with clear, erase its frame too. The kitty
    keyboard modes are a stack: only the entries the TUI pushed and did not pop are popped."""
    if os.isatty(fd):
        _write_all(fd, RESET + b"\x1b[<u" * kitty_pushed + (CLEAR if clear else b""))


def _window_size(fd: int) -> bytes | None:
    try:
        return fcntl.ioctl(fd, termios.TIOCGWINSZ, b"\0" * 8)
    except OSError:
        return None


def _take_terminal() -> None:
    # Runs in the child after setsid: the pty slave (fd 0) becomes its controlling terminal.
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


SETTLE = 3.0  # after its ready mark, a TUI gets this long (or 1 s of quiet) to load its session
QUIET = 1.0
TYPE_WAIT = 120.0  # how long dh waits for the ready mark (OpenCode took 28 s on a busy machine)


class PtyChild(Child):
    def __init__(self, argv, env, cwd, stdin_fd: int = 0, stdout_fd: int = 1,
                 typed: str | None = None, ready: bytes | None = None):
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
        self.kitty_pushed = 0  # kitty keyboard modes the harness pushed and has not popped
        self.stop = threading.Event()
        self.old_winch = signal.signal(signal.SIGWINCH, self._resize) \
            if threading.current_thread() is threading.main_thread() else None
        self.paste_mode = False  # the TUI asked for bracketed paste
        self.ready_mark, self.ready_at, self.tail = ready, None, b""
        self.thread = threading.Thread(target=self._pump, name="dh-pty", daemon=True)
        self.thread.start()
        if typed:
            threading.Thread(target=self._type, args=(typed,), name="dh-typist", daemon=True).start()

    def _type(self, text: str) -> None:
        """Type text into the TUI once it is ready (its ready mark was drawn, then it went
        quiet or SETTLE passed), then Enter: as a paste when the TUI takes bracketed paste
        (lines kept, no key read as a shortcut), else as one line. Enter waits half a second,
        or a TUI that tells pastes by their speed (Codex) takes it as a new line. Keys typed
        before the TUI is ready are lost, so with no ready mark seen nothing is typed."""
        if not self._wait_ready():
            return
        body = text.encode()
        body = b"\x1b[200~" + body + b"\x1b[201~" if self.paste_mode else \
            b" ".join(body.split())
        _write_all(self.master, body)
        if not self.stop.wait(0.5):
            _write_all(self.master, b"\r")

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
        name_os_thread("dh-pty")
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
            if b"\x1b[>" in data or b"\x1b[<" in data:  # cheap: rare in output
                self._count_kitty(data)
            self._see_ready(data)
            if b"\x1b[?2004" in data:
                self.paste_mode = data.rfind(b"\x1b[?2004h") > data.rfind(b"\x1b[?2004l")
        _write_all(dst, data)
        return True

    def _wait_ready(self) -> bool:
        deadline = time.monotonic() + TYPE_WAIT
        while not self.stop.is_set() and time.monotonic() < deadline:
            now = time.monotonic()
            if self.ready_at is not None and (now - self.ready_at >= SETTLE or
                                              now - self.last_output >= QUIET):
                return True
            self.stop.wait(0.1)
        return False

    def _see_ready(self, data: bytes) -> None:
        if self.ready_mark and self.ready_at is None:
            window = self.tail + data
            if self.ready_mark in window:
                self.ready_at = time.monotonic()
            self.tail = window[-len(self.ready_mark):]

    def _count_kitty(self, data: bytes) -> None:
        pushed = len(KITTY_PUSH.findall(data)) - len(KITTY_POP.findall(data))
        self.kitty_pushed = max(0, self.kitty_pushed + pushed)

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
        self.restore()

    def restore(self) -> None:
        """The user's terminal as it was before the attempt: cooked mode, every mode the TUI
        set put back, dh's SIGWINCH handler gone. Safe to call twice."""
        if self.saved is not None:
            termios.tcsetattr(self.stdin_fd, termios.TCSADRAIN, self.saved)
            self.saved = None
            restore_screen(self.stdout_fd, kitty_pushed=self.kitty_pushed)
            self.kitty_pushed = 0
        if self.old_winch is not None:
            signal.signal(signal.SIGWINCH, self.old_winch)
            self.old_winch = None

    def clear(self) -> None:
        """Erase the old frame before a relaunch (the notice then prints on a clean screen)."""
        restore_screen(self.stdout_fd, clear=True)
