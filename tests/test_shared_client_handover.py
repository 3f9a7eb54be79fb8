"""The shared mirror's client (dh_cli/mirror/shared_client.py) against a server that
misbehaves (tests/fakes/shared_peer.py, a real process on a real unix socket): whatever the
server sends, the client takes the session back exactly once, and only once the server can no
longer write it. The in-process mirror it takes back into is a FakeLocal that records it."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest

from dh_cli.mirror import shared_client
from dh_cli.mirror.shared_client import SharedMirror
from dh_cli.mirror.shared_wire import socket_path
from tests.fakes.shared_peer import FakeLocal, ready_processes
from tests.helpers.wait import wait_until

ROOT = Path(__file__).resolve().parent.parent
PEER = ROOT / "tests" / "fakes" / "shared_peer.py"
WAIT = 10.0

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the shared mirror is Linux only")


@pytest.fixture
def local(monkeypatch):
    """The class the client takes the session back into; `local.made` lists each take-back."""
    cls = type("Local", (FakeLocal,), {"made": [], "hooks": []})
    monkeypatch.setattr(shared_client, "LiveMirror", cls)
    return cls


@pytest.fixture
def db(tmp_path):
    return tmp_path / "dh.db"


@pytest.fixture
def peer(db):
    """peer(mode, arg): the fake server, listening once this returns; killed at the end."""
    with ready_processes() as start:
        yield lambda mode, arg="": start([sys.executable, str(PEER), str(socket_path(db)), mode, arg])


def mirror(db: Path) -> SharedMirror:
    return SharedMirror(db, SimpleNamespace(name="pi"), "s1", [db.parent], notice=lambda text: None)


@pytest.mark.parametrize("line", ["not json", "[1]", "null", '{"op":"progress"}',
                                  '{"op":"progress","at":"x"}', '{"op":"progress","at":null}',
                                  '{"op":"notice","text":7}'])
def test_a_line_the_client_cannot_read_hands_back_only_once_the_server_let_go(line, db, peer, local):
    """Finding 1: such a line killed the reader (no take-back ever) or took back while the
    server still held the session (two writers)."""
    server = peer("say", line)
    let_go = Path(f"{socket_path(db)}.let-go")
    local.hooks.append(lambda taken: setattr(taken, "server_let_go", let_go.exists()))
    shared = mirror(db).start()
    wait_until(lambda: local.made, "the take-back")
    assert [taken.server_let_go for taken in local.made] == [True]
    shared.stop()
    assert local.made[0].stopped and not shared.reader.is_alive()
    assert server.wait(WAIT) == 0


def test_a_late_held_stops_the_server_and_takes_back_once(db, peer, local, monkeypatch):
    """A server answering after HOLD_WAIT may still write: it is killed before the take-back."""
    monkeypatch.setattr(shared_client, "HOLD_WAIT", 0.3)
    server = peer("late", "5")
    shared = mirror(db).start()
    assert server.wait(WAIT) == -9 and len(local.made) == 1
    shared.stop()
    assert len(local.made) == 1 and local.made[0].stopped


def test_a_found_id_during_the_take_back_in_start_reaches_the_in_process_mirror(db, local):
    """Finding 13: start()'s take-back ran without the lock; a found_id between set the id
    only on the SharedMirror, and the in-process mirror never learned it."""
    shared = mirror(db)  # no server: start() takes the session back at once
    finding = threading.Thread(target=shared.found_id, args=("native-1",))
    local.hooks.append(lambda taken: (finding.start(), finding.join(0.3)))
    shared.start()
    finding.join(WAIT)
    assert [taken.native_id for taken in local.made] == ["native-1"]


def test_force_never_signals_pid_zero_or_below(db, local, monkeypatch):
    """Finding 12: os.kill(0, SIGKILL) would kill dh's own process group."""
    killed = []
    monkeypatch.setattr(shared_client.os, "kill", lambda pid, sig: killed.append(pid))
    shared = mirror(db)
    shared.reader = threading.Thread(target=lambda: None)  # a reader that has ended
    shared.reader.start()
    for pid in (0, -1):
        shared.server = pid
        shared._force()
    assert killed == []


IN_A_PID_NAMESPACE = textwrap.dedent("""
    import sys
    from pathlib import Path
    from types import SimpleNamespace
    from dh_cli.mirror import shared_client
    from tests.fakes.shared_peer import FakeLocal
    shared_client.LiveMirror = FakeLocal
    shared = shared_client.SharedMirror(Path(sys.argv[1]), SimpleNamespace(name="pi"), "s1", [],
                                        notice=lambda text: None).start()
    print(shared.server, "in-process" if shared.local else "shared")
    shared.stop()
""")


def test_a_server_whose_pid_the_client_cannot_see_is_refused(db, peer):
    """Finding 12: from a pid namespace below the server's, SO_PEERCRED gives pid 0; such a
    server cannot be stopped (_force) and sees other paths: mirror in-process."""
    if subprocess.run(["unshare", "-Upfr", "true"], capture_output=True).returncode != 0:
        pytest.skip("no unshare, or no user and pid namespaces here")
    server = peer("held")
    client = subprocess.run(["unshare", "-Upfr", sys.executable, "-c", IN_A_PID_NAMESPACE, str(db)],
                            capture_output=True, text=True, timeout=WAIT, start_new_session=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert client.stdout.split() == ["0", "in-process"], client.stderr[-800:]
    server.wait(WAIT)
