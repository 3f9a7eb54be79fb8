"""A real PostgreSQL server for the tests: the one at DH_TEST_POSTGRES_URL, or a private one
started here with initdb + pg_ctl (loopback, a free port, password auth, a temp data folder) and
stopped when the test run ends. Each test gets its own database, so tests never see each
other's rows. When no server can be had, the tests that need one are skipped with the reason."""

from __future__ import annotations

import atexit
import glob
import os
import pwd
import secrets
import shutil
import socket
import subprocess
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator
from urllib.parse import urlsplit, urlunsplit

import pytest

from tests.require import skip_or_fail

USER = "dh_test"
_server: "PgServer | None" = None
_failure: str | None = None


def _bin_dir() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"),
                   key=lambda p: int(Path(p).parts[4]) if Path(p).parts[4].isdigit() else 0)
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _run_as() -> list[str]:
    """PostgreSQL refuses to run as root: run its programs as the `postgres` user then."""
    if os.geteuid() != 0:
        return []
    try:
        pwd.getpwnam("postgres")
    except KeyError:
        raise RuntimeError("running as root and there is no `postgres` user to run the server as")
    return ["runuser", "-u", "postgres", "--"]


class PgServer:
    """A server reachable at `url(db)`; `controllable` when this run started it itself (the
    tests that stop it mid-push need that)."""

    def __init__(self, base_url: str, data: Path | None = None, bin_dir: Path | None = None):
        self.base_url, self.data, self.bin_dir = base_url, data, bin_dir
        self.controllable = data is not None
        self.options: list[str] = []

    @property
    def password(self) -> str:
        return urlsplit(self.base_url).password or ""

    def url(self, dbname: str) -> str:
        parts = urlsplit(self.base_url)
        return urlunsplit(parts._replace(path="/" + dbname))

    def pg_ctl(self, *args: str) -> None:
        cmd = _run_as() + [str(self.bin_dir / "pg_ctl"), "-D", str(self.data / "data"),
                           "-l", str(self.data / "server.log"), *args]
        subprocess.run(cmd, check=True, capture_output=True, timeout=60, env=_server_env())

    def start(self) -> None:
        self.pg_ctl("-w", "-o", " ".join(self.options), "start")

    def stop(self, mode: str = "fast") -> None:
        self.pg_ctl("-w", "-m", mode, "stop")

    def create_db(self) -> str:
        import psycopg

        name = "dh_t_" + secrets.token_hex(6)
        with psycopg.connect(self.url("postgres"), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return name

    def drop_db(self, name: str) -> None:
        import psycopg

        with psycopg.connect(self.url("postgres"), autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _server_env() -> dict:
    """The run's server outlives the test that started it: none of that test's settings
    (its DH_HOME under the test's folder) go with it."""
    return {k: v for k, v in os.environ.items() if not k.startswith("DH_")}


def _start_private() -> PgServer:
    bin_dir = _bin_dir()
    if bin_dir is None:
        raise RuntimeError("no initdb found (install the `postgresql` package)")
    prefix = _run_as()
    root = Path(tempfile.mkdtemp(prefix="dh-pg-"))
    password = secrets.token_urlsafe(18)
    (root / "pw").write_text(password + "\n")
    if prefix:
        shutil.chown(root, "postgres", "postgres")
        shutil.chown(root / "pw", "postgres", "postgres")
    subprocess.run(prefix + [str(bin_dir / "initdb"), "-D", str(root / "data"), "-U", USER,
                             "--pwfile", str(root / "pw"), "--auth", "scram-sha-256",
                             "--no-locale", "-E", "UTF8", "--no-sync"],
                   check=True, capture_output=True, timeout=120)
    port = _free_port()
    server = PgServer(f"postgresql://{USER}:{password}@127.0.0.1:{port}/postgres", root, bin_dir)
    # A throwaway server: durability buys nothing here, and it makes the runs slower.
    server.options = [f"-p {port}", "-c listen_addresses=127.0.0.1",
                      f"-c unix_socket_directories={root}", "-c fsync=off",
                      "-c synchronous_commit=off", "-c full_page_writes=off"]
    server.start()
    atexit.register(_shutdown, server)
    server.watchdog = _watchdog(server)
    return server


# Stops the server when this process dies in a way atexit never sees (SIGKILL, or a SIGTERM
# from `timeout`): a private server was found running an hour after such a test run. It waits
# for EOF on a pipe only this process holds open, in a session of its own (a signal to the
# test run's process group must not end it before it has done its work).
_WATCHDOG = """
import shutil, subprocess, sys
sys.stdin.buffer.read()
cmd, data = sys.argv[1:-1], sys.argv[-1]
subprocess.run(cmd, capture_output=True, timeout=60)
shutil.rmtree(data, ignore_errors=True)
"""


def _watchdog(server: PgServer) -> subprocess.Popen:
    import sys

    stop = _run_as() + [str(server.bin_dir / "pg_ctl"), "-D", str(server.data / "data"),
                        "-w", "-m", "immediate", "stop"]
    return subprocess.Popen([sys.executable, "-c", _WATCHDOG, *stop, str(server.data)],
                            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True, close_fds=True,
                            env=_server_env())


def _shutdown(server: PgServer) -> None:
    try:
        server.stop("immediate")
    except Exception:
        pass
    shutil.rmtree(server.data, ignore_errors=True)


def server() -> PgServer:
    """The run's one server, started on first use; skips the calling test when none can be."""
    global _server, _failure
    if _server is None and _failure is None:
        try:
            external = os.environ.get("DH_TEST_POSTGRES_URL")
            _server = PgServer(external) if external else _start_private()
            wait_ready(_server, timeout=10)
        except Exception as exc:  # any reason at all: report it in the skip
            detail = getattr(exc, "stderr", b"") or b""
            _failure = f"no PostgreSQL server for the tests: {exc} {detail.decode(errors='replace')[-300:]}"
            _server = None
    if _server is None:
        _skip_or_fail(_failure)
    return _server


def _skip_or_fail(reason: str) -> None:
    """A missing PostgreSQL skips the test, or fails it when real parts are required
    (tests/require.py: `.ci/run` sets that, a green run must have run it)."""
    skip_or_fail(reason)


def fresh_db() -> str:
    """The URL of a new, empty database on the run's server (skips the test if impossible)."""
    srv = server()
    try:
        return srv.url(srv.create_db())
    except Exception as exc:
        _skip_or_fail(f"cannot create a test database on the PostgreSQL server: {exc}")


@contextmanager
def database() -> Iterator[str]:
    """A fresh database, dropped afterwards."""
    url = fresh_db()
    try:
        yield url
    finally:
        try:
            server().drop_db(url.rsplit("/", 1)[1])
        except Exception:
            pass  # the server may be down after a test stopped it; the run's end removes it


@pytest.fixture
def pg_url():
    """A fresh database for one test, dropped afterwards."""
    with database() as url:
        yield url


def wait_ready(srv: PgServer, timeout: float = 30) -> None:
    import psycopg

    deadline = time.monotonic() + timeout
    while True:
        try:
            psycopg.connect(srv.url("postgres"), connect_timeout=2).close()
            return
        except psycopg.OperationalError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


# a big local log, generated inside SQLite (the tailer, or rows built in Python, would take
# much longer on a small machine) ----------------------------------------------------------------
_GENERATE = """
    WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < :count - 1)
    INSERT INTO records (session_id, source_id, generation, offset, raw, codec, kind, native_id,
                         role, tokens_in, tokens_out, tokens_cache_read, tokens_cache_write, ts)
    SELECT (SELECT session_id FROM sources WHERE id = :sid), :sid, i >= :cut,
           (i - CASE WHEN i >= :cut THEN :cut ELSE 0 END) * 140,
           printf('{"type":"user","uuid":"u-%09d","message":{"role":"user","content":"line %d"}}',
                  :first + i, :first + i) || char(10),
           0, 'user', 'u-' || (:first + i), 'user',
           CASE WHEN i % 50 = 0 THEN i END, CASE WHEN i % 50 = 0 THEN i + 1 END,
           CASE WHEN i % 50 = 0 THEN 0 END, CASE WHEN i % 50 = 0 THEN 7 END, 1790000000000 + i
    FROM n"""


def _generate(world, source_id: int, first: int, count: int) -> None:
    """`count` records, the last tenth in generation 1 (as if the file had been rewritten),
    and every 997th a large line stored deflated, as the tailer stores those."""
    from dh_cli.worlds.local import encode_raw

    cut = count - count // 10
    with world._write() as conn:
        conn.execute(_GENERATE, {"count": count, "sid": source_id, "cut": cut, "first": first})
        big = [(*encode_raw(b'{"type":"assistant","n":%d,"text":"%s"}\n' % (i, b"all work and no play " * 150)),
                source_id, int(i >= cut), (i - (cut if i >= cut else 0)) * 140)
               for i in range(0, count, 997)]
        conn.executemany("UPDATE records SET raw = NULL, packed = ?, codec = ? WHERE source_id = ?"
                         " AND generation = ? AND offset = ?", big)


def fill_log(db_path, total: int) -> dict[str, int]:
    """A local log of `total` records over three sessions and four sources (one session has
    only events); returns records per session."""
    from dh_cli.worlds.local import LocalWorld

    world = LocalWorld(db_path)
    plan = [("1bulk00000000a", "projects/p/a.jsonl", total * 6 // 10),
            ("1bulk00000000a", "projects/p/a/subagents/agent-1.jsonl", total * 2 // 10),
            ("1bulk00000000b", "projects/p/b.jsonl", total - total * 8 // 10),
            ("1bulk00000000c", None, 0)]
    per_session, first = {}, 0
    for sid, relpath, count in plan:
        if sid not in per_session:
            world.create_session("claude-code", id=sid, cwd="/home/dev/p", home="/home/dev/.claude")
            for n in range(3):
                world.add_event(sid, "attempt_started", {"n": n})
        per_session[sid] = per_session.get(sid, 0) + count
        if relpath:
            source = world.add_source(sid, "jsonl", relpath, "/home/dev/.claude/" + relpath)
            _generate(world, source.id, first, count)
            first += count
    world.close()
    return per_session


def outage(during) -> None:
    """Stop the run's server, run `during()`, start it again (tests/helpers/team_worlds.py)."""
    srv = server()
    if not srv.controllable:
        pytest.skip("the server at DH_TEST_POSTGRES_URL is not ours to stop")
    srv.stop("fast")
    try:
        during()
    finally:
        srv.start()
        wait_ready(srv)


def drop_snapshots(world, sid: str, after: int = 0) -> None:
    """Delete a session's workspace snapshots after the `after`-th (seqs start at 1) from a
    PostgreSQL world, as an operator would."""
    world._rows("DELETE FROM dh.ws_snapshots WHERE session_id = %s AND seq > %s RETURNING 1",
                [sid, after])
