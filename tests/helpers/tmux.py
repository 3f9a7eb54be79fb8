"""A program's terminal screen read from outside through tmux (`capture-pane`), as a person
sees it: how the tests read a harness's own TUI picker, started without dh. Each screen has
a tmux server of its own (a socket in the test's folder) started with the test's
environment, and nothing of it outlives the reading."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import psutil

ROWS, COLS = 50, 160
CONFIG = "set -g remain-on-exit on\n"  # a program that exits at once leaves its last screen


def screen_of(argv: list[str], env: dict, cwd: Path, drawn: str, folder: Path,
              timeout: float = 120.0, still: float = 2.0) -> str:
    """The screen of `argv` once `drawn` is on it and nothing changed for `still` seconds
    (the list is loaded); then the program, its tmux and every process started from
    `folder` (Codex's picker leaves an app-server daemon behind) are ended."""
    socket, config = folder / "tmux.sock", folder / "tmux.conf"
    config.write_text(CONFIG)
    tmux = ["tmux", "-S", str(socket), "-f", str(config)]
    subprocess.run([*tmux, "new-session", "-d", "-x", str(COLS), "-y", str(ROWS), "-s", "seen",
                    "-c", str(cwd), "--", *argv], env=env, check=True, timeout=30)
    try:
        return _settled(tmux, drawn, timeout, still)
    finally:
        subprocess.run([*tmux, "kill-server"], capture_output=True, timeout=30)
        end_started_from(folder)


def _settled(tmux: list[str], drawn: str, timeout: float, still: float) -> str:
    deadline = time.monotonic() + timeout
    screen, since = "", time.monotonic()
    while time.monotonic() < deadline:
        now = _capture(tmux)
        if now != screen:
            screen, since = now, time.monotonic()
        elif drawn in screen and time.monotonic() - since >= still:
            return screen
        time.sleep(0.25)
    raise AssertionError(f"{drawn!r} not on a settled screen in {timeout:.0f} s:\n{screen}")


def _capture(tmux: list[str]) -> str:
    done = subprocess.run([*tmux, "capture-pane", "-p", "-t", "seen"], capture_output=True,
                          text=True, timeout=30)
    return done.stdout


def end_started_from(folder: Path) -> None:
    """Kill (by pid) the processes whose command line names the test's folder."""
    for proc in psutil.process_iter(["cmdline"]):
        try:
            if str(folder) in " ".join(proc.info["cmdline"] or []):
                proc.kill()
        except psutil.Error:
            continue
