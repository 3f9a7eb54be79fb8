"""Kill -> the harness's UI ready again, per harness, under dh (issue 13), next to the harness's
own start measured in the same run.

For each harness (the real TUIs of tests/e2e, offline against the fake model), 5 times, each a
fresh session: dh runs the TUI in a pty rendered by pyte, the prompt is typed, the model's
second reply stalls, the harness's process group is SIGKILLed, and the time is taken until
dh's notice is on screen and the relaunched TUI shows its ready mark again (the screen was
cleared at the notice, so the mark is the new frame's). Baseline, same run, same session:
the harness's own start with the same resume argv dh used, run directly in a pty (no dh), 5
times, to the same mark. Goal: dh adds <= 10 % to the harness's own start.

Run: python bench/bench_tui.py [claude-code|codex|opencode|pi ...]"""

from __future__ import annotations

import json
import os
import shutil
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ["PYTHONPATH"] = str(ROOT)

from tests.e2e import install  # noqa: E402
from tests.e2e.conftest import make_real_rig  # noqa: E402
from tests.e2e.test_tui import TUI  # noqa: E402
from tests.e2e.tui import COLS, ROWS, Tui, seed_claude_tui, trust_codex_project  # noqa: E402
from tests.rig import SCRIPT  # noqa: E402
from dh_cli.worlds.local import LocalWorld  # noqa: E402

RUNS = 5
R = SCRIPT["replies"]
STALLED = {"replies": [R[0], dict(R[1], delay_s=600, delay_times=1000), *R[2:]]}


def world_events(rig):
    world = LocalWorld(Path(rig.env["DH_HOME"]) / "dh.db")
    try:
        (session,) = world.list_sessions()
        return world.events(session["id"])
    finally:
        world.close()


def last_launch(rig) -> tuple[int, list[str]]:
    events = world_events(rig)
    pid = [e for e in events if e.type == "launched"][-1].details["pid"]
    return pid, [e for e in events if e.type == "launch"][-1].details["argv"]


def cut_turn(rig, harness: str, tui: Tui) -> None:
    ready = TUI[harness][1]
    tui.until(lambda: tui.on_screen(ready), what="the editor")
    tui.quiet()
    tui.submit("Create the files.", lambda: any(e.get("reply_index") == 0 for e in rig.server.log))
    tui.until(lambda: any(e.get("reply_index") == 1 for e in rig.server.log), what="reply #1")
    tui.idle(1.0)


# the mark of a resumed TUI, where it differs from a new one's (OpenCode's session view has
# no "Ask anything" placeholder; its footer is drawn once the composer takes keys)
RESUMED_READY = {"opencode": "ctrl+p commands"}


def kill_to_ready(rig, harness: str, tui: Tui) -> float:
    ready = RESUMED_READY.get(harness, TUI[harness][1])
    pid, _ = last_launch(rig)
    tui.at_notice = None
    tui.raw.clear()
    start = time.monotonic()
    os.killpg(pid, signal.SIGKILL)
    tui.until(lambda: tui.at_notice is not None, what="dh's notice")
    tui.until(lambda: tui.on_screen(ready), what="the relaunched editor")
    took = time.monotonic() - start
    if os.environ.get("DH_BENCH_VERBOSE"):
        wall = time.time() - took
        marks = [(e.type, round(e_at(e) - wall, 2)) for e in world_events(rig)[-8:]]
        print(f"  {took:.2f} s: {marks}", flush=True)
    tui.idle(1.0)
    return took


def e_at(event) -> float:
    from datetime import datetime

    return datetime.fromisoformat(event.at.replace("Z", "+00:00")).timestamp()


class Direct(Tui):
    """The harness alone in a pty (no dh), with the argv dh last launched."""

    def __init__(self, rig, argv: list[str]):
        import pexpect
        import pyte

        from tests.e2e.tui import AnsweringScreen

        self.rig = rig
        self.screen = AnsweringScreen(COLS, ROWS, lambda data: self.child.send(data))
        self.stream = pyte.ByteStream(self.screen)
        self.raw, self.at_notice = bytearray(), None
        self.child = pexpect.spawn(argv[0], argv[1:], cwd=str(rig.proj), env=rig.env, timeout=60,
                                   dimensions=(ROWS, COLS))


def own_start(rig, harness: str, argv: list[str]) -> float:
    start = time.monotonic()
    tui = Direct(rig, argv)
    try:
        mark = RESUMED_READY.get(harness, TUI[harness][1])
        tui.until(lambda: tui.on_screen(mark), what="the harness's editor")
        return time.monotonic() - start
    finally:
        os.killpg(tui.child.pid, signal.SIGKILL)
        tui.close()


def new_rig(harness: str, installed, tmp: Path):
    tmp.mkdir(parents=True)
    rig = make_real_rig(tmp, STALLED, installed)
    if harness == "claude-code":
        seed_claude_tui(rig, installed.versions()[harness])
    if harness == "codex":
        trust_codex_project(rig)
    return rig


def one_relaunch(harness: str, installed, tmp: Path):
    """A fresh session each time: a second kill within a minute would meet the restart
    policy's backoff (1 s, 2 s, 4 s ...), which is not start-up time."""
    rig = new_rig(harness, installed, tmp)
    tui = Tui(rig, harness, TUI[harness][0])
    try:
        cut_turn(rig, harness, tui)
        took = kill_to_ready(rig, harness, tui)
        return took, rig, last_launch(rig)[1]
    finally:
        tui.close()


def bench(harness: str, installed) -> None:
    base = Path(tempfile.mkdtemp(prefix=f"dh-bench-tui-{harness}-"))
    relaunch, rigs = [], []
    for run in range(RUNS):
        took, rig, argv = one_relaunch(harness, installed, base / str(run))
        relaunch.append(took)
        rigs.append(rig)
    own = [own_start(rigs[-1], harness, argv) for _ in range(RUNS)]
    for rig in rigs:
        rig.server.stop()
    dh_med, own_med = statistics.median(relaunch), statistics.median(own)
    print(f"{harness:12s} kill -> UI ready under dh: median {dh_med:5.2f} s "
          f"({', '.join(f'{t:.2f}' for t in relaunch)}); the harness's own start with the same "
          f"argv: median {own_med:5.2f} s; dh adds {100 * (dh_med - own_med) / own_med:+.0f} % "
          f"(goal <= +10 %)", flush=True)
    shutil.rmtree(base, ignore_errors=True)


def main(names: list[str]) -> None:
    installed = install.ensure(log=lambda msg: None)
    for harness in names or list(TUI):
        bench(harness, installed)


if __name__ == "__main__":
    main(sys.argv[1:])
