"""The shared mirror's handover (dh_cli/mirror/shared_server.py), with real processes: `dh run`
over a Pi-format writer (tests/fakes/pi_writer.py, launched as `pi`), the server that the first
`dh run` starts, and SIGKILL of either side. Whoever dies, every native line ends in the log
exactly once and byte-equal. Who mirrors a session is read from the process itself: a `dh run`
that hands its session over has a `dh-shared-cl` thread and no `dh-mirror` thread; one that
mirrors in-process (from the start or after a takeover) has a `dh-mirror` thread. The waits
are generous and nothing here asserts a duration."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from contextlib import closing
from pathlib import Path

import psutil
import pytest

from dh_cli.mirror.shared_sessions import PATIENCE
from dh_cli.mirror.shared_wire import server_pid, socket_path
from dh_cli.resume.rebuild import source_bytes
from dh_cli.worlds.local import LocalWorld
from tests.helpers.processes import alive, threads
from tests.helpers.wait import wait_until

ROOT = Path(__file__).resolve().parent.parent
WRITER = ROOT / "tests" / "fakes" / "pi_writer.py"
WAIT = 60.0

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the shared mirror is Linux only")


class Home:
    def __init__(self, root: Path):
        self.root = root
        self.db = root / "dh-home" / "dh.db"
        self.env = {**os.environ, "DH_HOME": str(self.db.parent), "PI_CODING_AGENT_DIR": str(root / "pi-agent"),
                    "XDG_CONFIG_HOME": str(root / "config"), "DH_PI_BIN": f"{sys.executable} {WRITER}",
                    "DH_SHARED_MIRROR": "1", "PYTHONPATH": str(ROOT)}
        LocalWorld(self.db).close()

    def run(self, name: str, rate: float, records: int, **env) -> subprocess.Popen:
        cwd = self.root / name
        cwd.mkdir(exist_ok=True)
        return subprocess.Popen([sys.executable, "-m", "dh_cli", "run", "pi", "--", "-p", "go"], cwd=cwd,
                                env={**self.env, "DH_WRITER_RATE": str(rate), "DH_WRITER_RECORDS": str(records),
                                     **env}, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=open(self.root / f"{name}.stderr", "wb"))

    def resume(self, session_id: str, **env) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "dh_cli", "resume", session_id], cwd=self.root,
                              env={**self.env, **env}, stdin=subprocess.DEVNULL, capture_output=True,
                              timeout=WAIT * 2)

    def sessions(self) -> list[str]:
        with closing(LocalWorld(self.db)) as world:
            return [item["id"] for item in world.list_sessions()]

    def logged(self) -> int:
        with closing(LocalWorld(self.db)) as world:
            return sum(world.source_stats(s.id)[1] for item in world.list_sessions()
                       for s in world.sources(item["id"]))

    def check_exactly_once(self) -> int:
        """Every source: its logged bytes are its native file's, one generation, one record
        per line. Returns the number of lines."""
        total = 0
        with closing(LocalWorld(self.db)) as world:
            for item in world.list_sessions():
                for source in world.sources(item["id"]):
                    native = Path(source.path).read_bytes()
                    assert source_bytes(world, source) == native
                    assert source.generation == 0
                    assert world.source_stats(source.id)[1] == native.count(b"\n")
                    total += native.count(b"\n")
        return total


def wait_exit(proc: subprocess.Popen) -> int:
    return proc.wait(timeout=WAIT * 2)


@pytest.fixture
def home(tmp_path):
    home = Home(tmp_path)
    yield home
    pid = server_pid(home.db)
    if alive(pid) and Path(f"/proc/{pid}/cmdline").read_bytes().find(str(home.db).encode()) >= 0:
        os.kill(pid, signal.SIGKILL)  # it would exit by itself a few seconds later


def handed_over(proc: subprocess.Popen) -> bool:
    names = threads(proc.pid)
    return "dh-shared-cl" in names and "dh-mirror" not in names


def test_server_killed_mid_session_the_client_takes_over_and_logs_every_line_once(home):
    run = home.run("a", rate=50, records=600)
    wait_until(lambda: handed_over(run), "the session handed to the shared mirror")
    server = wait_until(lambda: server_pid(home.db), "the server's pid")
    wait_until(lambda: home.logged() > 50, "records mirrored by the server")
    assert "dh-mirror" not in threads(run.pid)  # the server held it: the client wrote nothing
    os.kill(server, signal.SIGKILL)
    wait_until(lambda: "dh-mirror" in threads(run.pid), "the client's in-process mirror after the kill")
    assert wait_exit(run) == 0
    assert not alive(server)
    assert home.check_exactly_once() == 600 + 3  # header, prompt, entries, final answer


@pytest.mark.parametrize("log_locked", [False, True])
def test_client_killed_the_server_drains_and_lets_go_and_resume_goes_on(home, log_locked):
    """log_locked: another process holds the log's write lock past the server's PATIENCE
    when the client dies; the server's drain fails, and it tries again until the log takes
    it (before, it let the session go, and the lines waited for a `dh resume`)."""
    run = home.run("a", rate=50, records=400)
    wait_until(lambda: handed_over(run), "the session handed to the shared mirror")
    server = wait_until(lambda: server_pid(home.db), "the server's pid")
    wait_until(lambda: home.logged() > 30, "records mirrored by the server")
    native = next(Path(home.root / "pi-agent").rglob("*.jsonl"))
    writer = next(p for p in psutil.Process(run.pid).children(recursive=True)
                  if str(WRITER) in " ".join(p.cmdline()))
    try:
        _kill_the_client_while_the_server_is_behind(home, run, server, writer, native, log_locked)
    finally:  # a failed wait must not leave a frozen writer or server behind
        for proc in (writer, psutil.Process(server) if alive(server) else None):
            try:
                proc and proc.resume()
            except psutil.Error:
                pass
    session_id, = home.sessions()
    done = home.resume(session_id)
    assert done.returncode == 0, done.stderr.decode()[-800:]
    assert home.check_exactly_once() == 400 + 3


def _kill_the_client_while_the_server_is_behind(home, run, server, writer, native,
                                                log_locked: bool) -> None:
    # the server, frozen, has not seen the lines written meanwhile; the writer is frozen too
    # so that what is written is known when the client dies
    locker = sqlite3.connect(home.db, isolation_level=None, timeout=WAIT)
    if log_locked:  # taken before the server is frozen: it must not be frozen holding it
        locker.execute("BEGIN IMMEDIATE")
    os.kill(server, signal.SIGSTOP)
    wait_until(lambda: native.read_bytes().count(b"\n") > home.logged() + 20,
               "lines the server has not seen")
    writer.suspend()  # SIGSTOP: stopped a moment later, maybe after one more line
    wait_until(lambda: writer.status() == psutil.STATUS_STOPPED, "the writer stopped")
    written = native.read_bytes().count(b"\n")
    os.kill(run.pid, signal.SIGKILL)
    run.wait()
    os.kill(server, signal.SIGCONT)
    if log_locked:  # the server's drain waits PATIENCE for the lock, fails, and is tried again
        time.sleep(PATIENCE + 2)
        assert home.logged() < written and alive(server)
    locker.close()
    # only the server can log these now: it drains what was written when its client died
    wait_until(lambda: home.logged() >= written, "the server's drain after its client died",
               explain=lambda: f"{home.logged()} of {written} lines logged; server alive: "
                               f"{alive(server)}, threads {sorted(threads(server))}")
    # a server still holding the session would keep its connection and never exit; the
    # writer stays frozen till then: let go on before the server was gone, it wrote lines the
    # server's last drain round took too (56 logged of 53, once, under load)
    wait_until(lambda: not alive(server), "the server exiting once it let go of its last session", WAIT)
    assert home.logged() == written
    writer.resume()  # the orphaned writer finishes its run, unmirrored
    psutil.wait_procs([writer], timeout=WAIT)


def test_two_clients_on_two_sessions_through_one_server(home):
    runs = [home.run("a", rate=40, records=300), home.run("b", rate=40, records=300)]
    for run in runs:
        wait_until(lambda run=run: handed_over(run), "both sessions handed over")
    server = server_pid(home.db)
    servers = [p for p in psutil.process_iter(["cmdline"])
               if "dh_cli.mirror.shared_server" in " ".join(p.info["cmdline"] or [])
               and str(home.db) in " ".join(p.info["cmdline"] or [])]
    assert [p.pid for p in servers] == [server]
    assert [wait_exit(run) for run in runs] == [0, 0]
    assert len(home.sessions()) == 2
    assert home.check_exactly_once() == 2 * (300 + 3)


def test_a_server_that_cannot_start_leaves_the_session_to_the_in_process_mirror(home):
    socket_path(home.db).mkdir()  # the server cannot bind its socket: it dies at start
    run = home.run("a", rate=50, records=200)
    wait_until(lambda: "dh-mirror" in threads(run.pid), "the in-process mirror")
    assert "dh-shared-cl" not in threads(run.pid)
    assert wait_exit(run) == 0
    assert home.check_exactly_once() == 200 + 3


def test_the_setting_off_mirrors_in_process_and_starts_no_server(home):
    run = home.run("a", rate=50, records=100, DH_SHARED_MIRROR="0")
    wait_until(lambda: "dh-mirror" in threads(run.pid), "the in-process mirror")
    assert wait_exit(run) == 0
    assert server_pid(home.db) is None
    assert home.check_exactly_once() == 100 + 3
