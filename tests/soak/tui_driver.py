"""A soak case's TUI: the harness's own interface under `dh run` in a pty (tests/e2e/tui.py),
seeded as a person's first run would leave it, the prompt typed once; after dh is killed, a
new pty runs `dh resume S`, which goes on with the cut turn with no keystroke."""

from __future__ import annotations

import time

from tests.e2e.tui import TUI, Tui, seed_claude_tui, trust_codex_project
from tests.helpers.real_runs import RUN_TIMEOUT

from . import checks

# dh's line when a prompt typed before a kill reached none of the harness's files (Pi 0.73.1
# writes nothing before its first answer): a person types it again
LOST_LINE = b"type it again"


class TuiSession:
    def __init__(self, rig, harness: str, version_set: str, command: list[str] | None = None,
                 prompt: str | None = None):
        self.rig, self.harness, self.version_set = rig, harness, version_set
        self.prompt, self.retyped = prompt, 0
        if command is None:
            self._seed()
        self.tui = Tui(rig, harness, TUI[harness][0], command=command)

    def _seed(self) -> None:
        if self.harness == "claude-code":
            from tests.e2e import install

            seed_claude_tui(self.rig, install.VERSION_SETS[self.version_set][self.harness][1])
        if self.harness == "codex":
            trust_codex_project(self.rig)

    @property
    def pid(self) -> int:
        return self.tui.child.pid

    def alive(self) -> bool:
        return self.tui.child.isalive()

    def idle(self, seconds: float) -> None:
        self.tui.idle(seconds)
        self.retype_if_lost()

    def retype_if_lost(self) -> bool:
        """Type the prompt again once for each time dh said it was lost; False (so it can
        sit in a wait's condition)."""
        if self.prompt and self.tui.raw.count(LOST_LINE) > self.retyped:
            self.retyped += 1
            asked = len(self.rig.server.main_requests())
            self.tui.until(lambda: self.tui.on_screen(TUI[self.harness][1]), what="the editor")
            self.tui.quiet()
            self.tui.submit(self.prompt, lambda: len(self.rig.server.main_requests()) > asked)
        return False

    def final_shown(self, final: str) -> bool:
        return self.tui.on_screen(final)

    def start_and_type(self, prompt: str) -> None:
        """Type once the editor is ready and the screen still, and until the model saw it."""
        self.prompt = prompt
        self.tui.until(lambda: self.tui.on_screen(TUI[self.harness][1]), what="the editor")
        self.tui.quiet()
        self.tui.submit(prompt, lambda: bool(self.rig.server.main_requests()))

    def reap(self, timeout: float = 30) -> None:
        """dh was killed: read the pty to its end (the harness dies with dh's guardian)."""
        deadline = time.monotonic() + timeout
        while self.tui.pump(0.1) and time.monotonic() < deadline:
            pass
        self.tui.close()

    def resume(self, session: str) -> "TuiSession":
        """At a terminal dh asks whether to restore the folder to the session's last
        snapshot; the files are as the cut turn's tools left them, so the answer is keep."""
        return TuiSession(self.rig, self.harness, self.version_set,
                          command=["resume", session, "--workspace", "keep"], prompt=self.prompt)

    def finish(self, final: str) -> list[str]:
        """Wait for the final answer on screen and in the log, then quit the TUI its own way."""
        try:
            self.tui.until(lambda: self.retype_if_lost() or
                           (self.final_shown(final) and _final_logged(self.rig, final)),
                           timeout=RUN_TIMEOUT, what="the final answer")
        except AssertionError as exc:
            return [f"tui: {str(exc)[-600:]}"]
        code = self.tui.quit(TUI[self.harness][2])
        return [] if code == 0 else [f"tui: dh exited {code}: {self.tui.text()[-600:]}"]

    def close(self) -> None:
        self.tui.close()


def _final_logged(rig, final: str) -> bool:
    world = rig.world()
    try:
        return any(final.encode() in (r.raw or b"") for r in world.records(checks.session_id(rig)))
    except Exception:  # noqa: BLE001 - the log may be busy or not there yet
        return False
    finally:
        world.close()
