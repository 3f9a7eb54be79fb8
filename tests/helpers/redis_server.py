"""A real Redis server for the tests: a private `redis-server` (Debian's package) started here,
on loopback, a free port, a password, AOF on (appendfsync always: a restart keeps every write
acknowledged before it) in a temp folder, and stopped when the test run ends. Each test gets a
database of its own (one of the server's 16, emptied first). `restart()` stops the server the
way an operator would (SIGTERM: it finishes its AOF) and starts it again on the same port and
folder. Without redis-server the tests that need it are skipped, or fail where real parts are
required (tests/require.py)."""

from __future__ import annotations

import atexit
import itertools
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pytest

from tests.require import skip_or_fail

_server: "RedisServer | None" = None
_failure: str | None = None
_databases = itertools.cycle(range(16))


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class RedisServer:
    def __init__(self, binary: str):
        self.binary, self.root = binary, Path(tempfile.mkdtemp(prefix="dh-redis-"))
        self.port, self.password = _free_port(), secrets.token_urlsafe(18)
        self.process: subprocess.Popen | None = None
        (self.root / "redis.conf").write_text("\n".join([
            f"port {self.port}", "bind 127.0.0.1", f"dir {self.root}", f"requirepass {self.password}",
            "appendonly yes", "appendfsync always", 'save ""', "daemonize no",
            f"logfile {self.root / 'server.log'}", ""]))

    def url(self, db: int = 0) -> str:
        return f"redis://:{self.password}@127.0.0.1:{self.port}/{db}"

    def start(self) -> None:
        self.process = subprocess.Popen([self.binary, str(self.root / "redis.conf")],
                                        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL, start_new_session=True,
                                        cwd=self.root, env=_server_env())
        self.watchdog = _watchdog(self.process.pid)
        wait_ready(self)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)  # Redis flushes its AOF and exits
            self.process.wait(timeout=30)
        if self.process is not None:
            self.watchdog.kill()  # its pid is gone: nothing for it to end
            self.watchdog.wait()
        self.process = None

    def restart(self) -> None:
        self.stop()
        self.start()

    def client(self, db: int = 0):
        import redis

        return redis.Redis.from_url(self.url(db), socket_connect_timeout=2)


def wait_ready(srv: RedisServer, timeout: float = 30) -> None:
    import redis

    deadline = time.monotonic() + timeout
    while True:
        try:
            client = srv.client()
            client.ping()
            client.close()
            return
        except (redis.ConnectionError, redis.BusyLoadingError):
            if srv.process is not None and srv.process.poll() is not None:
                raise RuntimeError((srv.root / "server.log").read_text(errors="replace")[-500:])
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


# Ends the server when this process dies in a way atexit never sees (SIGKILL): it waits for
# EOF on a pipe only this process holds open, in a session of its own.
_WATCHDOG = """
import os, signal, sys
sys.stdin.buffer.read()
try:
    os.kill(int(sys.argv[1]), signal.SIGKILL)
except ProcessLookupError:
    pass
"""


def _watchdog(pid: int) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", _WATCHDOG, str(pid)], stdin=subprocess.PIPE,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True, close_fds=True, cwd="/", env=_server_env())


def _server_env() -> dict:
    """The run's server outlives the test that started it: none of that test's settings
    (its DH_HOME under the test's folder) go with it."""
    return {k: v for k, v in os.environ.items() if not k.startswith("DH_")}


def _shutdown(srv: RedisServer) -> None:
    try:
        srv.stop()
    except Exception:
        pass
    shutil.rmtree(srv.root, ignore_errors=True)


def server() -> RedisServer:
    """The run's one server, started on first use; skips (or fails) the calling test when
    none can be."""
    global _server, _failure
    if _server is None and _failure is None:
        binary = shutil.which("redis-server") or shutil.which("valkey-server")
        try:
            if binary is None:
                raise RuntimeError("redis-server is not installed (apt-get install redis-server)")
            _server = RedisServer(binary)
            _server.start()
            atexit.register(_shutdown, _server)
        except Exception as exc:  # any reason at all: report it in the skip
            _failure, _server = f"no Redis server for the tests: {exc}", None
    if _server is None:
        skip_or_fail(_failure)
    return _server


def fresh_url() -> str:
    """The URL of an emptied database on the run's server."""
    srv = server()
    db = next(_databases)
    client = srv.client(db)
    client.flushdb()
    client.close()
    return srv.url(db)


@contextmanager
def database() -> Iterator[str]:
    """An emptied database of the run's server (emptied again by its next user)."""
    yield fresh_url()


@pytest.fixture
def redis_url():
    """An empty database of the run's Redis server for one test."""
    yield fresh_url()


def outage(during) -> None:
    """Stop the run's server, run `during()`, start it again (tests/helpers/team_worlds.py)."""
    srv = server()
    srv.stop()
    try:
        during()
    finally:
        srv.start()


def drop_snapshots(world, sid: str, after: int = 0) -> None:
    """Delete a session's workspace snapshots after the `after`-th (seqs start at 1) from a
    Redis world, as an operator would."""
    key = f"dh:ws_snapshots:{sid}"
    later = [k for k in world.client.hkeys(key) if int(k) > after]
    if later:
        world.client.hdel(key, *later)
