"""The shared mirror's server (dh_cli/mirror/shared_server.py) against what a peer of the
same uid may send, and against its log going away. A real server process for the messages
and the log's folder; the server's loop in a thread of the test for the timing of a silent
connection (its waits shortened)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import threading
import time
from contextlib import closing
from pathlib import Path

import pytest

from dh_cli.mirror import shared_server
from dh_cli.mirror import shared_wire as wire
from dh_cli.mirror.shared_client import ensure_server
from dh_cli.mirror.shared_wire import PROTOCOL, connect, lock_path, server_pid, socket_path
from dh_cli.worlds.local import LocalWorld
from tests.helpers.processes import alive
from tests.helpers.wait import wait_until

WAIT = 20.0


def new_log(folder: Path) -> tuple[Path, str]:
    """A log with one Pi session whose file exists: (dh.db, its session id)."""
    folder.mkdir(parents=True, exist_ok=True)
    native = folder / "pi" / "s.jsonl"
    native.parent.mkdir(exist_ok=True)
    native.write_bytes(b'{"type":"session","id":"0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b"}\n')
    with closing(LocalWorld(folder / "dh.db")) as world:
        session = world.create_session("pi", home=str(folder), cwd=str(folder), native_path=str(native))
    return folder / "dh.db", session.id


def hold(db: Path, session_id: str, **fields) -> socket.socket:
    sock = connect(socket_path(db), 5)
    message = {"op": "hold", "version": PROTOCOL, "session": session_id, "wrapper": "pi",
               "dirs": [str(db.parent / "pi")], **fields}
    sock.sendall(json.dumps(message).encode() + b"\n")
    return sock


def answer(sock: socket.socket) -> bytes:
    """The first line the server sends, or b"" once it closed the connection."""
    sock.settimeout(WAIT)
    data = b""
    while b"\n" not in data and (chunk := sock.recv(4096)):
        data += chunk
    return data.split(b"\n")[0]


def closed(sock: socket.socket) -> bool:
    """Whether the server closes the connection (whatever it says before)."""
    sock.settimeout(WAIT)
    while sock.recv(4096):
        pass
    return True


@pytest.fixture
def server(tmp_path):
    db, session_id = new_log(tmp_path / "home")
    assert ensure_server(db.resolve())
    pid = server_pid(db)
    yield db.resolve(), session_id, pid
    if alive(pid):
        os.kill(pid, signal.SIGKILL)


def test_messages_the_server_cannot_take_cost_that_connection_only(server):
    db, session_id, pid = server
    bad = [b'{"op":"native_id"}\n',  # no id
           b"[" * 100_000 + b"\n",  # deeper than json can read
           b'{"op":"native_id","id":"*"}\n']  # not an id of the harness: a file pattern
    for line in bad:
        sock = hold(db, session_id)
        assert json.loads(answer(sock)) == {"op": "held"}
        sock.sendall(line)
        wait_until(lambda: answer(sock) == b"", "the connection closed")
        sock.close()
    for fields in ({"dirs": ["\ud800"]}, {"version": PROTOCOL + 1}):  # refused before `held`
        with closing(hold(db, session_id, **fields)) as sock:
            assert answer(sock) == b""
    assert alive(pid)
    with closing(hold(db, session_id)) as sock:  # and it still holds sessions
        assert json.loads(answer(sock)) == {"op": "held"}


def test_a_server_whose_log_folder_went_exits_and_leaves_the_new_servers_socket(tmp_path):
    folder = tmp_path / "home"
    db, first = new_log(folder)
    db = db.resolve()
    assert ensure_server(db)
    old = server_pid(db)
    client = hold(db, first)  # a client it still holds: no idle exit
    assert json.loads(answer(client)) == {"op": "held"}
    os.kill(old, signal.SIGSTOP)  # so that it sees the new folder only once the new server runs
    try:
        shutil.rmtree(folder)
        db, session_id = new_log(folder)
        db = db.resolve()
        assert ensure_server(db)
        new = server_pid(db)
        assert new != old
    finally:
        os.kill(old, signal.SIGCONT)
    try:
        wait_until(lambda: not alive(old), "the old server's exit")
        assert closed(client)  # let go: the client mirrors in-process
        assert socket_path(db).exists() and alive(new)
        with closing(hold(db, session_id)) as sock:
            assert json.loads(answer(sock)) == {"op": "held"}
    finally:
        os.kill(new, signal.SIGKILL)


def test_a_connection_that_never_asks_for_a_hold_does_not_keep_the_server_up(tmp_path, monkeypatch):
    monkeypatch.setattr(shared_server, "HOLD_FIRST", 0.3)
    monkeypatch.setattr(shared_server, "IDLE_EXIT", 0.3)
    db, _ = new_log(tmp_path / "home")
    lock = os.open(lock_path(db), os.O_RDWR | os.O_CREAT, 0o600)
    server = shared_server.Server(db, lock)
    loop = threading.Thread(target=server.serve, daemon=True)
    loop.start()
    silent = connect(socket_path(db), 5)
    started = time.monotonic()
    loop.join(WAIT)
    assert not loop.is_alive(), "a silent connection kept the server up"
    assert time.monotonic() - started >= 0.3
    assert answer(silent) == b""
    silent.close()
    os.close(lock)


def messages(sock: socket.socket):
    """The server's messages as they come (json objects), until it closes."""
    sock.settimeout(WAIT)
    pending = b""
    while chunk := sock.recv(4096):
        pending += chunk
        *lines, pending = pending.split(b"\n")
        for line in lines:
            yield json.loads(line)


def test_the_client_hears_of_each_commit_at_most_once_a_second(server):
    """`progress`: what the supervisor's stall check and the workspace snapshots wait for."""
    db, session_id, _ = server
    native = db.parent / "pi" / "s.jsonl"
    sock = hold(db, session_id)
    heard = messages(sock)
    assert next(heard) == {"op": "held"}
    times = []
    for n in range(2):
        with native.open("ab") as out:
            out.write(b'{"type":"custom","customType":"load","data":{"n":%d}}\n' % n)
        assert next(heard)["op"] == "progress"
        times.append(time.monotonic())
    assert times[1] - times[0] >= shared_server.PROGRESS_EVERY * 0.9
    sock.close()


def test_a_message_to_a_client_that_is_gone_leaves_its_session_to_the_drain(tmp_path):
    """The server's loop driven by hand, so that a progress report goes to a client killed
    before the server read its EOF (seen: the report's failed send let the session go, and
    the lines its harness wrote last were never logged). The EOF is read next, and the
    session is synced before it is let go."""
    db, session_id = new_log(tmp_path / "home")
    lock = os.open(lock_path(db), os.O_RDWR | os.O_CREAT, 0o600)
    server = shared_server.Server(db, lock)
    server.mirrors.start()
    try:
        client = hold(db, session_id)
        while session_id not in server.conns.by_session:
            server._once()
        assert json.loads(answer(client)) == {"op": "held"}
        with (db.parent / "pi" / "s.jsonl").open("ab") as out:
            out.write(b'{"type":"custom","customType":"load","data":{"n":1}}\n')
        client.close()
        progress = wire.message(wire.PROGRESS, at=0.0)
        assert not server._send(server.conns.by_session[session_id], progress)
        deadline = time.monotonic() + WAIT
        while session_id in server.conns.by_session and time.monotonic() < deadline:
            server._once()
        with closing(LocalWorld(db)) as world:
            assert world.record_count(session_id) == 2
    finally:
        server._shut()
        os.close(lock)


def test_the_socket_appears_only_once_the_server_listens(tmp_path, monkeypatch):
    """Clients take the socket's path for a server ready (ensure_server waits for it to
    exist): one that connected between the server's bind and its listen was refused, in a
    full test run (test_a_server_whose_log_folder_went_... failed on ECONNREFUSED)."""
    from dh_cli.mirror import shared_wire

    path = tmp_path / "dh.db.mirror.sock"
    there_at_listen = []

    class Watched(socket.socket):
        def listen(self, *args):
            there_at_listen.append(path.exists())
            return super().listen(*args)

    monkeypatch.setattr(shared_wire.socket, "socket", Watched)
    with closing(shared_wire.listen(path)):
        assert there_at_listen == [False]
        assert path.stat().st_mode & 0o777 == 0o600
        assert [p.name for p in tmp_path.iterdir()] == [path.name]  # nothing of the staging left
        monkeypatch.undo()
        with closing(connect(path, 5)):
            pass
