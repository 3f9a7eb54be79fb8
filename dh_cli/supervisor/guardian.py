"""What outlives a SIGKILLed dh to clean up after it, since no handler of dh's runs then.

The harness in a terminal dies with dh (its pty hangs up); a headless one runs on until it
writes to dh's closed pipe or ends its turn (`dh resume` refuses while it lives). What it
started in sessions of its own does not die: Codex's TUI runs its agent in an app-server
daemon, which, with dh and the TUI killed mid-turn, went on alone (seen with 0.171.0: it ran
the shell command, asked the model for the three remaining replies and wrote them to the
rollout, while no dh mirrored it and a `dh resume` would have repaired that rollout under
it). dh ends such parts when the harness
dies (tools.py); the guardian does the same when dh dies. And a killed dh leaves the user's
terminal raw, cursor hidden: the guardian puts it back.

The guardian is double-forked before dh becomes a subreaper, so it is never dh's child
(never taken for a tool), in a session of its own (a Ctrl-C or hang-up to dh's group does not
reach it). It reads a pipe: `part <pid> <create time>` for each part dh finds, `bye` when dh exits on
its own; EOF with no `bye` means dh died."""

from __future__ import annotations

import os
import signal
import termios

from ..procs import process_alive
from .terminal import RESET

BYE = b"bye\n"


def start_guardian(fd_in: int = 0, fd_out: int = 1) -> int | None:
    """The pipe's write end, or None when no guardian could start (no process left to fork:
    dh runs on without one). The terminal is put back only when dh's stdin and stdout are one."""
    saved = termios.tcgetattr(fd_in) if os.isatty(fd_in) and os.isatty(fd_out) else None
    read_end, write_end = os.pipe()
    try:
        pid = os.fork()
    except OSError:
        os.close(read_end)
        os.close(write_end)
        return None
    if pid == 0:  # pragma: no cover - runs in the forked guardian
        _guard(read_end, write_end, fd_in, fd_out, saved)
    os.close(read_end)
    os.waitpid(pid, 0)  # the intermediate child exits at once
    os.set_inheritable(write_end, False)
    return write_end


def _guard(read_end: int, write_end: int, fd_in: int, fd_out: int, saved) -> None:  # pragma: no cover
    try:
        os.close(write_end)
        os.setsid()
        if os.fork():
            os._exit(0)
        os.closerange(3, read_end)
        os.closerange(read_end + 1, 65536)
        heard = _read_all(read_end)
        if not heard.endswith(BYE):  # dh died without a word
            _end_parts(heard)
            if saved is not None:
                termios.tcsetattr(fd_in, termios.TCSADRAIN, saved)
                os.write(fd_out, RESET)
    except BaseException:  # noqa: BLE001 - a guardian never raises into a fork of dh
        pass
    os._exit(0)


def _read_all(fd: int) -> bytes:
    heard = b""
    while chunk := os.read(fd, 4096):
        heard += chunk
    return heard


def _end_parts(heard: bytes) -> None:
    """SIGKILL, as dh ends them, each part that is still the process dh named (and its group)."""
    for line in heard.splitlines():
        words = line.split()
        if len(words) != 3 or words[0] != b"part" or not words[1].isdigit():
            continue
        pid = int(words[1])
        try:
            created = float(words[2])
        except ValueError:
            continue
        if pid > 1 and process_alive(pid, created):  # not a reused pid
            _kill_part(pid)


def _kill_part(pid: int) -> None:
    try:
        group = os.getpgid(pid)
        if group > 1:
            os.killpg(group, signal.SIGKILL)  # a part leads its own group (its commands' too)
        os.kill(pid, signal.SIGKILL)
    except OSError:
        pass


def guard_part(write_end: int | None, pid: int, created: float) -> None:
    """Tell the guardian of a part of the harness (its pid and create time, as the tool
    tracker read them), to end should dh die."""
    if write_end is not None:
        _say(write_end, f"part {pid} {created!r}\n".encode())


def dismiss_guardian(write_end: int | None) -> None:
    """dh exits on its own: the terminal is already put back, the parts ended; the guardian
    leaves quietly."""
    if write_end is not None:
        _say(write_end, BYE)
        try:
            os.close(write_end)
        except OSError:
            pass


def _say(write_end: int, line: bytes) -> None:
    try:
        os.write(write_end, line)  # a line under PIPE_BUF: written whole
    except OSError:
        pass
