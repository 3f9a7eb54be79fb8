"""ensure_server (dh_cli/mirror/shared_client.py) with real processes: the real server it
spawns, other processes holding its locks, and strace. Whatever holds a lock, it returns
within a bounded time, and it never forks a server that a tracer would trace."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
import time
from contextlib import closing
from pathlib import Path

import pytest

from dh_cli.mirror import shared_client
from dh_cli.mirror.shared_client import ensure_server
from tests.fakes.shared_peer import ready_processes
from dh_cli.mirror.shared_wire import ERRORS_KEPT, errors_path, lock_path, server_pid, socket_path
from dh_cli.worlds.local import LocalWorld

WAIT = 30.0
HOLDER = textwrap.dedent("""
    import fcntl, os, sys, time
    fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    print("ready", flush=True)
    time.sleep(float(sys.argv[2]))
""")

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the shared mirror is Linux only")


@pytest.fixture
def db(tmp_path):
    db = tmp_path / "dh.db"
    with closing(LocalWorld(db)):
        pass
    yield db
    pid = server_pid(db)
    if pid and str(db).encode() in _cmdline(pid):
        os.kill(pid, signal.SIGKILL)  # it would idle-exit a few seconds later


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


@pytest.fixture
def holder():
    """holder(path, seconds): a process that holds an flock on path for that long."""
    with ready_processes() as start:
        yield lambda path, seconds: start([sys.executable, "-c", HOLDER, str(path), str(seconds)])


def test_a_dh_stopped_in_its_spawn_turn_holds_up_no_other(db, holder, monkeypatch):
    """Finding 10: the spawn lock was a blocking flock; a `dh run` stopped (Ctrl-Z) in its
    turn blocked every other one for as long as it stayed stopped."""
    monkeypatch.setattr(shared_client, "CONNECT_WAIT", 0.2)
    holder(Path(f"{db}.mirror.spawn"), 60)
    result = []
    waiting = threading.Thread(target=lambda: result.append(ensure_server(db)), daemon=True)
    waiting.start()
    waiting.join(WAIT)
    assert result == [False]  # in-process
    assert not socket_path(db).exists()


def test_a_server_shutting_down_is_waited_out_and_a_new_one_started(db, holder):
    """Finding 10: an old server that has unlinked its socket but still holds the lock makes
    the one spawned exit at once; the client waited CONNECT_WAIT for nothing and went in-process."""
    holder(lock_path(db), 0.5)  # the old server's last half second
    assert ensure_server(db) is True
    assert socket_path(db).exists() and server_pid(db) is not None


TRACED = "import sys; from pathlib import Path; from dh_cli.mirror.shared_client import ensure_server; " \
         "print(ensure_server(Path(sys.argv[1])))"


def traced_ensure_server(db: Path) -> str:
    done = subprocess.run(["strace", "-f", "-qq", "-o", "/dev/null", sys.executable, "-c", TRACED, str(db)],
                          capture_output=True, text=True, timeout=WAIT)
    assert done.returncode == 0, done.stderr[-800:]
    return done.stdout.strip()


@pytest.mark.skipif(shutil.which("strace") is None, reason="no strace")
def test_under_strace_no_server_is_spawned_but_a_running_one_is_used(db):
    """Finding 11: a server spawned by a traced dh was traced for its whole life, and
    `strace -f` did not return before it idle-exited."""
    if subprocess.run(["strace", "-o", "/dev/null", "true"], capture_output=True).returncode != 0:
        pytest.skip("ptrace is not allowed here")
    assert traced_ensure_server(db) == "False"
    assert not shared_client._server_running(db) and not socket_path(db).exists()
    assert ensure_server(db) is True  # untraced: spawned
    assert traced_ensure_server(db) == "True"


def _wait_for_text(path: Path, text: str) -> str:
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        if path.exists() and text in (shown := path.read_text(errors="replace")):
            return shown
        time.sleep(0.05)
    raise AssertionError(f"{text!r} never reached {path}: {path.read_text() if path.exists() else 'no file'}")


def test_a_server_that_crashes_leaves_its_traceback(db):
    """The server runs detached with stderr on /dev/null: its crash left no trace (a change
    to the code was needed to see why one exited). Its stderr now goes to DB.mirror.err."""
    lock_path(db).mkdir()  # the server cannot open its lock: an uncaught error
    shared_client._spawn(db)  # as ensure_server starts it: double-forked, on /dev/null
    shown = _wait_for_text(errors_path(db), "IsADirectoryError")
    assert "Traceback" in shown and "shared_server.py" in shown
    assert errors_path(db).stat().st_mode & 0o777 == 0o600


def test_a_server_killed_by_a_fatal_signal_leaves_every_thread_s_stack(db):
    assert ensure_server(db) is True
    os.kill(server_pid(db), signal.SIGSEGV)
    shown = _wait_for_text(errors_path(db), " in <module>")  # the main thread's, shown last
    assert "Fatal Python error: Segmentation fault" in shown and "shared_server.py" in shown
    assert "\nThread 0x" in shown and "Current thread 0x" in shown  # every thread's, not one


def test_a_large_error_file_is_started_afresh(db):
    errors_path(db).write_bytes(b"x" * (ERRORS_KEPT + 1))
    errors_path(db).chmod(0o600)
    assert ensure_server(db) is True
    assert errors_path(db).stat().st_size == 0  # a healthy server writes nothing
