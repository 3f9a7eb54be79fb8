"""A team world's URL pointing at a listener that accepts and never answers (a hung server, a
wrong port behind a proxy) fails as the connect timeout says, with one `Error:` line: a Redis
client waited for its 30 s read timeout on the first reply, so `dh run` with a Redis world
started 30 s late. Shown with the read timeout made an hour: the open must still end, at the
connect timeout (1 s here), long before the test's bound on a hang (120 s)."""

from __future__ import annotations

import socket
import threading
from typing import Iterator

import pytest

from dh_cli import team
from dh_cli.errors import WorldError
from dh_cli.team import redis_world

from .helpers.cli import dh, one_error

URLS = {"redis": "redis://127.0.0.1:{port}", "postgres": "postgresql://dh:pw@127.0.0.1:{port}/dh"}


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A port whose listener accepts every connection and never sends a byte."""
    server = socket.create_server(("127.0.0.1", 0))
    held, stop = [], threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield server.getsockname()[1]
    stop.set()
    thread.join()
    for conn in held:
        conn.close()
    server.close()


@pytest.mark.parametrize("name", sorted(URLS))
def test_a_world_that_never_answers_fails_at_the_connect_timeout(name, silent_port, monkeypatch):
    monkeypatch.setattr(redis_world, "OP_TIMEOUT_S", 3600)
    outcome: list = []

    def open_it() -> None:
        try:
            team.open_world(name, URLS[name].format(port=silent_port), connect_timeout=1)
        except WorldError as exc:
            outcome.append(str(exc))

    opener = threading.Thread(target=open_it, daemon=True)
    opener.start()
    opener.join(120)  # a hang, not a speed: the read timeout is an hour
    assert not opener.is_alive() and outcome and "cannot connect" in outcome[0], outcome


def test_world_status_on_a_silent_redis_is_one_error_line(silent_port):
    done = dh("world", "status", "redis", "--url", URLS["redis"].format(port=silent_port))
    one_error(done, 5, "cannot connect to Redis")
