"""Driving a real harness TUI under dh in a pseudo-terminal (pexpect), with the screen rendered
by a real terminal emulator (pyte): what the user would see, row by row."""

from __future__ import annotations

import json
import os
import sys
import time

import pexpect
import psutil
import pyte

ROWS, COLS = 40, 120
NOTICE = "resuming session"

# harness -> (TUI args, text on screen once its editor is ready, keys that quit it)
TUI = {
    "claude-code": (["--dangerously-skip-permissions"], "bypass permissions", ["/exit", "\r"]),
    "pi": (["--provider", "mock", "--model", "mock-claude"], "mock-claude", ["\x04", "\x04"]),
    "codex": ([], "Ask Codex to do anything", ["/quit", "\r"]),
    "opencode": ([], "Ask anything", ["/exit", "\r"]),
}


class AnsweringScreen(pyte.Screen):
    """A terminal answers what a program asks of it (device attributes, cursor position):
    Codex's TUI asks both at start, and unanswered it took the typed prompt but not Enter."""

    def __init__(self, columns: int, lines: int, answer):
        super().__init__(columns, lines)
        self.answer = answer

    def write_process_input(self, data: str) -> None:
        self.answer(data)


class Tui:
    """dh run <harness> -- <args> in a pty of ROWS x COLS; every byte is fed to a pyte screen."""

    def __init__(self, rig, harness: str, args: list[str], dh_opts: tuple[str, ...] = (),
                 command: list[str] | None = None):
        """command: dh's arguments in place of `run <harness> <dh_opts> -- <args>`."""
        self.rig = rig
        self.screen = AnsweringScreen(COLS, ROWS, lambda data: self.child.send(data))
        self.stream = pyte.ByteStream(self.screen)
        self.raw = bytearray()
        self.at_notice: list[str] | None = None  # the screen as it was right after dh's notice
        command = command or ["run", harness, *dh_opts, "--", *args]
        self.child = pexpect.spawn(sys.executable, ["-m", "dh_cli", *command],
                                   cwd=str(rig.proj), env=rig.env, timeout=60,
                                   dimensions=(ROWS, COLS))

    # reading ------------------------------------------------------------------------------
    def pump(self, wait: float = 0.05) -> bool:
        """Feed what the pty has to the screen; False at EOF."""
        try:
            data = self.child.read_nonblocking(65536, timeout=wait)
        except pexpect.TIMEOUT:
            return True
        except pexpect.EOF:
            return False
        self._feed(data)
        return True

    def _feed(self, data: bytes) -> None:
        """The screen is snapshot at the notice's last byte, before the relaunched TUI draws."""
        self.raw += data
        if self.at_notice is None and NOTICE.encode() in self.raw:
            end = self.raw.index(NOTICE.encode()) + len(NOTICE)
            end = self.raw.find(b"\n", end) + 1 or len(self.raw)
            head = len(data) - (len(self.raw) - end)
            self.stream.feed(data[:max(head, 0)])
            self.at_notice = self.rows()
            data = data[max(head, 0):]
        self.stream.feed(data)

    def rows(self) -> list[str]:
        return [line.rstrip() for line in self.screen.display]

    def text(self) -> str:
        return "\n".join(self.rows())

    def until(self, done, timeout: float = 180.0, what: str = "") -> None:
        """Keep the screen fed (a TUI blocks on a full pty) until done() holds."""
        deadline = time.monotonic() + timeout
        while not done():
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what or done}:\n{self.text()}")
            if not self.pump():
                if done():
                    return
                raise AssertionError(f"dh ended while waiting for {what or done}:\n{self.text()}")

    def on_screen(self, text: str) -> bool:
        return text in self.text()

    def quiet(self, seconds: float = 0.8, timeout: float = 30.0) -> None:
        """Wait until the TUI has drawn nothing for `seconds` (its start-up is over)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            size = len(self.raw)
            self.idle(seconds)
            if len(self.raw) == size:
                return

    def idle(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and self.pump():
            pass

    # writing ------------------------------------------------------------------------------
    def type_line(self, text: str) -> None:
        # typed as a person types: Codex's composer takes keys that come at once as a paste,
        # and then an Enter right after them did not submit the prompt
        for char in text:
            self.child.send(char)
            self.idle(0.03)
        self.until(lambda: self.on_screen(text), timeout=20, what="the typed prompt echoed")
        self.idle(0.5)
        self.child.send("\r")

    def submit(self, text: str, sent, tries: int = 3) -> None:
        """Type the prompt and Enter; Enter again (before any kill) while sent() says the
        model saw nothing: Codex's composer now and then kept the text and ignored Enter."""
        self.type_line(text)
        for _ in range(tries):
            try:
                self.until(sent, timeout=8, what="the prompt sent")
                return
            except AssertionError:
                self.child.send("\r")
        self.until(sent, timeout=30, what="the prompt sent")

    def quit(self, keys: list[str], timeout: float = 30.0, gap: float = 0.6) -> int:
        for key in keys:
            self.child.send(key)
            self.idle(gap)
        deadline = time.monotonic() + timeout
        while self.pump() and time.monotonic() < deadline:
            pass
        self.child.close(force=True)
        return self.child.exitstatus if self.child.exitstatus is not None else -(self.child.signalstatus or 0)

    def close(self) -> None:
        """End dh if it still runs; keep what the pty showed, for a failing test's reader."""
        if self.child.isalive():
            try:
                self.child.close(force=True)
            except pexpect.ExceptionPexpect:  # still dying under load: killed below
                os.kill(self.child.pid, 9)
        (self.rig.tmp / "pty-output.bin").write_bytes(bytes(self.raw))
        for proc in psutil.process_iter(["cmdline"]):  # e.g. a Codex daemon left by a failure
            try:
                if str(self.rig.tmp) in " ".join(proc.info["cmdline"] or []):
                    proc.kill()
            except psutil.Error:
                continue


def seed_claude_tui(rig, version: str) -> None:
    """First-run screens of Claude Code's TUI answered ahead: onboarding done (else it checks
    api.anthropic.com and stops), the custom API key approved, the project trusted, and the
    bypass-permissions warning skipped (offline-harnesses.md §3.5)."""
    home = rig.tmp / ".claude"
    home.mkdir(exist_ok=True)
    key = rig.env["ANTHROPIC_API_KEY"]
    (home / ".claude.json").write_text(json.dumps({
        "hasCompletedOnboarding": True, "lastOnboardingVersion": version, "theme": "dark",
        "bypassPermissionsModeAccepted": True,
        "customApiKeyResponses": {"approved": [key[-20:]], "rejected": []},
        "projects": {os.path.realpath(rig.proj): {"hasTrustDialogAccepted": True,
                                                  "hasCompletedProjectOnboarding": True,
                                                  "allowedTools": []}}}))
    (home / "settings.json").write_text(json.dumps({"skipDangerousModePermissionPrompt": True}))


def trust_codex_project(rig) -> None:
    """The Codex TUI asks whether to trust the folder unless config.toml says so (§3.5)."""
    config = rig.tmp / ".codex" / "config.toml"
    config.write_text(config.read_text() +
                      f'\n[projects."{os.path.realpath(rig.proj)}"]\ntrust_level = "trusted"\n')
