"""Kill -> the harness's UI ready again, per harness, under dh (issue 13), next to the harness's
own start measured in the same run.

For each harness (the real TUIs of tests/e2e, offline against the fake model), 5 times, each a
fresh session: dh runs the TUI in a pty rendered by pyte, the prompt is typed, the model's
second reply stalls, the harness's process group is SIGKILLed, and the time is taken until
dh's notice is on screen and the relaunched TUI shows its ready mark again (the screen was
cleared at the notice, so the mark is the new frame's). Baseline, same run, same session,
right after each relaunch: the harness's own restart from the same kill, with no dh. The
harness runs directly in a pty with the very argv and environment the relaunched harness got
(read from its /proc/<pid>/environ, so a variable the wrapper set for the attempt, e.g.
Claude Code's CLAUDE_CODE_RESUME_INTERRUPTED_TURN, is on both sides), goes on with the turn
to the stalled reply, is SIGKILLed with all its processes, and the time is the wait until
they are gone plus its start to the same mark (own_restart). Goal: dh adds <= 10 % to the
harness's own restart. Node's compile cache is one folder for all runs, warmed by a run that
is not counted (see bench()), as a user's is.

Codex 0.171's TUI runs its agent in an app-server daemon by default; dh launches it with the
agent in the TUI's own process (CodexWrapper.plan_launch, AGENT_IN_PROCESS), and the baseline
runs dh's very argv, so neither side has a daemon. (With the daemon, measured before that
change: the baseline killed TUI and daemon at once, 18-21 ms until both were gone; dh learnt
of the TUI's death first and only then killed the daemon, 55 + 40 ms at load 31, 9 + 6 ms at
load 2.) `daemons()` still checks that nothing of the rig is left before a start.

Run: python bench/bench_tui.py [--set pinned|newest] [claude-code|codex|opencode|pi ...]
(both version sets when --set is not given; a harness whose newest release is its pinned
one runs in the pinned set only). DH_BENCH_VERBOSE=1 prints each relaunch's event times."""

from __future__ import annotations

import os
import select
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

RUNS = int(os.environ.get("DH_BENCH_RUNS", "5"))  # 5 for the figures; fewer for a quick check
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


def environ_of(pid: int) -> dict[str, str]:
    """The environment a running process was started with."""
    data = Path(f"/proc/{pid}/environ").read_bytes()
    pairs = (item.split(b"=", 1) for item in data.split(b"\0") if b"=" in item)
    return {k.decode(errors="replace"): v.decode(errors="replace") for k, v in pairs}


def daemons(rig) -> list[int]:
    """Processes of the rig still alive (a Codex app-server daemon, say), by their home."""
    import psutil

    found = []
    for proc in psutil.process_iter(["cmdline"]):
        try:
            if str(rig.tmp) in " ".join(proc.info["cmdline"] or []):
                found.append(proc.pid)
        except psutil.Error:
            continue
    return found


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


def kill_to_ready(rig, harness: str, tui: Tui) -> tuple[float, dict[str, str]]:
    """Seconds from the SIGKILL to the relaunched TUI's ready mark, and the relaunched
    harness's environment."""
    ready = RESUMED_READY.get(harness, TUI[harness][1])
    pid, _ = last_launch(rig)
    tui.at_notice = None
    tui.raw.clear()
    start = time.monotonic()
    os.killpg(pid, signal.SIGKILL)
    tui.until(lambda: tui.at_notice is not None, what="dh's notice")
    tui.until(lambda: tui.on_screen(ready), what="the relaunched editor")
    took = time.monotonic() - start
    env = environ_of(last_launch(rig)[0])
    if os.environ.get("DH_BENCH_VERBOSE"):
        wall = time.time() - took
        marks = [(e.type, round(e_at(e) - wall, 2)) for e in world_events(rig)[-8:]]
        print(f"  {took:.2f} s: {marks}", flush=True)
    tui.idle(1.0)
    return took, env


def e_at(event) -> float:
    from datetime import datetime

    return datetime.fromisoformat(event.at.replace("Z", "+00:00")).timestamp()


class Direct(Tui):
    """The harness alone in a pty (no dh), with the argv dh last launched."""

    def __init__(self, rig, argv: list[str], env: dict[str, str]):
        import pexpect
        import pyte

        from tests.e2e.tui import AnsweringScreen

        self.rig = rig
        self.screen = AnsweringScreen(COLS, ROWS, lambda data: self.child.send(data))
        self.stream = pyte.ByteStream(self.screen)
        self.raw, self.at_notice = bytearray(), None
        self.child = pexpect.spawn(argv[0], argv[1:], cwd=str(rig.proj), env=env, timeout=60,
                                   dimensions=(ROWS, COLS))


def own_start(rig, harness: str, argv: list[str], env: dict[str, str]) -> float:
    """The harness alone, started as dh relaunched it, to the same ready mark."""
    deadline = time.monotonic() + 5  # what tui.close() killed may take a moment to go
    while (left := daemons(rig)) and time.monotonic() < deadline:
        time.sleep(0.05)
    if left:
        print(f"  warning: {len(left)} process(es) of the session still alive before the "
              f"harness's own start: it is a warm start", flush=True)
    start = time.monotonic()
    tui = Direct(rig, argv, env)
    try:
        mark = RESUMED_READY.get(harness, TUI[harness][1])
        tui.until(lambda: tui.on_screen(mark), what="the harness's editor")
        return time.monotonic() - start
    finally:
        os.killpg(tui.child.pid, signal.SIGKILL)
        tui.close()  # also ends what the start left (by the rig's home)


def own_restart(rig, harness: str, argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """The harness's own restart from the same kill, with no dh: started as dh relaunched
    it, it carries the turn on (the continuation in argv) until the stalled reply, as under
    dh; then its process group and every process of its home (Codex's app-server daemon)
    are SIGKILLed at once, and the time is taken until all of them have exited, then the
    start as in own_start. Returns (teardown, start). Under dh the same teardown is inside
    the kill -> ready time: dh must see the harness gone, and Codex's daemon too (a live
    one takes the resumed TUI's turn), before it relaunches."""
    tui = Direct(rig, argv, env)
    try:
        mark = RESUMED_READY.get(harness, TUI[harness][1])
        tui.until(lambda: tui.on_screen(mark), what="the harness's editor")
        tui.idle(1.5)  # its turn goes on: Codex starts its daemon at the submit
        pids = [tui.child.pid, *daemons(rig)]
        fds = [os.pidfd_open(pid) for pid in pids]
        start = time.monotonic()
        os.killpg(tui.child.pid, signal.SIGKILL)
        for pid in pids[1:]:
            os.kill(pid, signal.SIGKILL)
        waiting = list(fds)
        while waiting:
            done, _, _ = select.select(waiting, [], [], 10)
            waiting = [fd for fd in waiting if fd not in done]
        teardown = time.monotonic() - start
        for fd in fds:
            os.close(fd)
    finally:
        tui.close()
    return teardown, own_start(rig, harness, argv, env)


def new_rig(harness: str, installed, tmp: Path, compile_cache: Path):
    tmp.mkdir(parents=True)
    rig = make_real_rig(tmp, STALLED, installed)
    rig.env["NODE_COMPILE_CACHE"] = str(compile_cache)
    if harness == "claude-code":
        seed_claude_tui(rig, installed.versions()[harness])
    if harness == "codex":
        trust_codex_project(rig)
    return rig


def one_relaunch(harness: str, installed, tmp: Path, compile_cache: Path) -> tuple[float, float, float]:
    """A fresh session each time: a second kill within a minute would meet the restart
    policy's backoff (1 s, 2 s, 4 s ...), which is not start-up time. Then, on the same
    session, the harness's own start as dh relaunched it: the two sides alternate, so a
    change in the machine's load falls on both."""
    rig = new_rig(harness, installed, tmp, compile_cache)
    tui = Tui(rig, harness, TUI[harness][0])
    try:
        cut_turn(rig, harness, tui)
        took, env = kill_to_ready(rig, harness, tui)
        argv = last_launch(rig)[1]
    finally:
        tui.close()
    try:
        return (took, *own_restart(rig, harness, argv, env))
    finally:
        rig.server.stop()


def bench(harness: str, installed) -> None:
    base = Path(tempfile.mkdtemp(prefix=f"dh-bench-tui-{harness}-"))
    # Pi 1.x compiles its bundle through Node's compile cache, which a user keeps from run
    # to run (one folder) but each test rig had fresh (its own TMPDIR): the relaunch under
    # dh was then the first resumed start and paid for compiling the resume path, which the
    # baseline right after it found cached. That was most of Pi 1.6.0's "+24 %" (median of
    # 5; with the cache off on both sides, +4 %). So every run shares one cache, warmed by a
    # first run that is not counted, and both sides start from a warm one.
    cache = base / "node-compile-cache"
    one_relaunch(harness, installed, base / "warm-up", cache)
    runs = [one_relaunch(harness, installed, base / str(run), cache) for run in range(RUNS)]
    relaunch = [r[0] for r in runs]
    own = [teardown + start for _, teardown, start in runs]  # kill -> ready, no dh
    dh_med, own_med = statistics.median(relaunch), statistics.median(own)
    paired = statistics.median(r[0] - o for r, o in zip(runs, own))
    version = installed.versions()[harness]
    print(f"{harness} {version} ({installed.version_set}): kill -> UI ready under dh: median "
          f"{dh_med:5.2f} s ({series(relaunch)}); the harness's own restart from the same "
          f"kill: median {own_med:5.2f} s ({series(own)}) = its processes gone (median "
          f"{statistics.median(r[1] for r in runs) * 1000:.0f} ms) + its start with dh's argv "
          f"and environment (median {statistics.median(r[2] for r in runs):.2f} s); dh adds "
          f"{100 * (dh_med - own_med) / own_med:+.0f} % (goal <= +10 %; median of the paired "
          f"differences {1000 * paired:+.0f} ms = {100 * paired / own_med:+.0f} %); load "
          f"average {os.getloadavg()[0]:.1f}", flush=True)
    shutil.rmtree(base, ignore_errors=True)


def series(values: list[float]) -> str:
    return ", ".join(f"{v:.2f}" for v in values)


def main(argv: list[str]) -> None:
    sets = list(install.VERSION_SETS)
    if argv[:1] == ["--set"]:
        sets, argv = [argv[1]], argv[2:]
    for version_set in sets:
        installed = install.ensure(log=lambda msg: None, version_set=version_set)
        for harness in argv or list(TUI):
            newest_is_pinned = install.NEWEST[harness] == install.PACKAGES[harness]
            if version_set == "newest" and newest_is_pinned and len(sets) > 1:
                continue  # measured in the pinned set: the same release
            bench(harness, installed)


if __name__ == "__main__":
    main(sys.argv[1:])
