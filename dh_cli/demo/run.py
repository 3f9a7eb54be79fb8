"""DEMO ONLY: `dh demo` as a library call. A temporary folder holds everything (the log, the
demo harness's home, its work folder); the scripted model runs in this process; the session
goes through `start_run` — the Supervisor, the live mirror, repair and resume that
`dh run` uses. The model kills the harness in the middle of its second reply; dh resumes it.
What the demo shows at the end is counted from what the model actually served."""

from __future__ import annotations

import base64
import os
import shutil
import signal
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from .model import DemoModel
from ..wrappers.demo import BINARY, HOME_VAR, NAME

PROMPT = "Write notes.txt with one line about dh."
STALL_SHOWN = 0.8  # seconds the cut reply is seen in flight before the kill
LAUNCHER = """#!{python} -I
# DEMO ONLY: runs dh's demo harness (written by `dh demo`, removed with its folder)
import sys
sys.path.insert(0, {root!r})
from dh_cli.demo.harness import main
sys.exit(main())
"""


@dataclass
class DemoResult:
    code: int  # what `dh run` would have exited with
    folder: Path
    session_id: str
    view: object  # the session as `dh log show` has it (logview.SessionView)
    finished: dict[int, int]  # reply index -> times the model sent it in full
    cut: dict[int, int]  # reply index -> times it was cut off by the kill
    kept_before_kill: list[int]  # replies finished before the kill
    killed_pid: int | None
    dropped_bytes: int  # the half-written record dh's repair dropped
    tool_runs: int  # lines the demo's one tool call wrote: 1 = it ran once
    seconds: float
    kept: bool = False
    events: list = field(default_factory=list)

    @property
    def saved(self) -> list[int]:
        """Replies finished before the kill and never asked for again."""
        return [i for i in self.kept_before_kill if self.finished.get(i) == 1]

    @property
    def paid_twice(self) -> list[int]:
        return [i for i, n in self.finished.items() if n > 1]


def _launcher(folder: Path) -> Path:
    path = folder / "bin" / BINARY
    path.parent.mkdir()
    root = str(Path(__file__).resolve().parents[2])
    path.write_text(LAUNCHER.format(python=sys.executable, root=root))
    path.chmod(0o700)
    return path


def _kill_harness(pid: int, say) -> int | None:
    """SIGKILL the demo harness, and only if it is our own child (a pid from a header)."""
    try:
        if psutil.Process(pid).ppid() != os.getpid():
            return None
    except psutil.Error:
        return None
    say("kill", f"reply 2 is streaming in: the demo kills the harness (pid {pid}) with SIGKILL, mid-call")
    os.kill(pid, signal.SIGKILL)
    return pid


def run_demo(say, keep: bool = False) -> DemoResult:
    """say(kind, text) narrates: kind is model | kill | dh."""
    started = time.monotonic()
    folder = Path(tempfile.mkdtemp(prefix="dh-demo-"))
    # one session, gone with its folder: the shared mirror's server would be a process of the
    # demo that outlives it (mirror/shared_server.py), so the demo mirrors in its own process
    demo_env = {"DH_HOME": str(folder / "dh-home"), "DH_SHARED_MIRROR": "0"}
    old_env = {name: os.environ.get(name) for name in demo_env}
    try:
        os.environ.update(demo_env)
        result = _run_in(folder, say)
        result.seconds, result.kept = time.monotonic() - started, keep
        return result
    finally:
        for name, value in old_env.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        if not keep:
            shutil.rmtree(folder, ignore_errors=True)


def _run_in(folder: Path, say) -> DemoResult:
    from ..resume.plan import start_run
    from ..supervisor.spec import RunOptions
    from ..worlds.local import LocalWorld

    killed: list[int] = []

    def on_stall(index: int, pid: int) -> None:
        time.sleep(STALL_SHOWN)
        model.snapshot()
        if (pid := _kill_harness(pid, say)) is not None:
            killed.append(pid)
        model.release.set()

    model = DemoModel(on_stall, lambda i: say("model", f"streaming reply {i + 1}")).start()
    work = folder / "work"
    work.mkdir()
    env = {**os.environ, HOME_VAR: str(folder / "harness-home"), "DH_DEMO_MODEL_URL": model.url,
           "DH_DH_DEMO_BIN": str(_launcher(folder))}
    world = LocalWorld(folder / "dh-home" / "dh.db")
    opts = RunOptions(cwd=str(work), env=env,
                      notice=lambda text: say("dh", text))
    try:
        code = start_run(world, NAME, ["-p", PROMPT], opts)
    finally:
        model.stop()
    return _result(world, folder, model, code, killed[0] if killed else None)


def _result(world, folder: Path, model: DemoModel, code: int, pid: int | None) -> DemoResult:
    from .. import events, liveness
    from ..logviews.logview import build_view

    (row,) = world.list_sessions()
    session = world.get_session(row["id"])
    view = build_view(world, session)
    liveness.mark([view.session], world.path)
    dropped = sum(len(base64.b64decode(e.details.get("dropped_torn_tail_b64", "")))
                  for e in world.events(session.id) if e.type == events.REBUILT)
    notes = folder / "work" / "notes.txt"
    runs = len(notes.read_text().splitlines()) if notes.exists() else 0
    world.close()
    return DemoResult(code, folder, session.id, view, dict(model.finished), dict(model.cut),
                      sorted(model.finished_before_cut), pid, dropped, runs, 0.0)
