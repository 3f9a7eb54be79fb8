"""A `dh run` to SIGKILL, over the fake harnesses and a model server whose second reply comes
late (a window to kill in), and a watch over the process table that counts the harness
processes of one rig at once (never two on a session)."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time

import psutil
import pytest

from tests.fakes.model_server import FakeModelServer
from tests.helpers.wait import wait_until
from tests.rig import HEADLESS_ARGS, SCRIPT, Rig


SLOW = {"replies": [SCRIPT["replies"][0], dict(SCRIPT["replies"][1], delay_s=3, delay_times=1),
                    *SCRIPT["replies"][2:]]}


class HarnessWatch:
    """Samples the process table every 10 ms for harness processes of one rig (the fakes run
    from the rig's own bin folder) and keeps the most seen at once."""

    def __init__(self, marker: str):
        self.marker, self.most, self.stopped = marker, 0, threading.Event()
        self.at_most: list = []  # the command lines when the most were seen
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def running(self) -> list[psutil.Process]:
        found = []
        for proc in psutil.process_iter(["cmdline", "status", "ppid"]):
            cmdline = proc.info["cmdline"] or []
            if proc.info["status"] != psutil.STATUS_ZOMBIE and len(cmdline) > 1 \
                    and cmdline[1].startswith(self.marker):
                found.append(proc)
        # a harness's own child between fork and exec still shows the harness's command line
        pids = {p.pid for p in found}
        return [p for p in found if p.info["ppid"] not in pids]

    def _run(self) -> None:
        while not self.stopped.is_set():
            found = self.running()
            if len(found) > self.most:
                self.most = len(found)
                self.at_most = [(p.pid, p.info["cmdline"]) for p in found]
            time.sleep(0.01)

    def wait_gone(self, timeout: float = 60) -> None:
        wait_until(lambda: not self.running(), "the orphaned harness to exit", timeout)

    def stop(self) -> int:
        self.stopped.set()
        self.thread.join(5)
        if self.most > 1:
            print("harness processes at once:", self.at_most)
        return self.most


@pytest.fixture
def rig(tmp_path):
    server = FakeModelServer(SLOW).start()
    yield Rig(tmp_path, server)
    server.stop()


def spawn_run(rig, harness: str, env: dict | None = None) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "dh_cli", "run", harness, "--",
                             *HEADLESS_ARGS[harness]("Create the files.")], cwd=rig.proj,
                            env={**rig.env, **(env or {})}, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def kill(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGKILL)
    assert proc.wait(10) == -signal.SIGKILL


def the_session(rig):
    world = rig.world()
    (session,) = world.list_sessions()
    return world, world.get_session(session["id"])

