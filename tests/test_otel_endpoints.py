"""`dh log trace` against endpoints that misbehave, each a loopback socket server of the test's
own: a redirect is not followed, an endless answer is not read whole, and an answer dripped a
byte at a time ends the send at its deadline with one clear error."""

from __future__ import annotations

import socket
import threading
import time

import pytest

from dh_cli.errors import WorldError
from dh_cli.logviews import otel_export
from dh_cli.logviews.otel_export import send_session
from dh_cli.worlds.local import LocalWorld

from .helpers.crashed import crashed  # noqa: F401 (a fixture)

MB = 1 << 20


class Endpoint:
    """Answers each connection with answer(connection) after reading its request whole;
    counts the connections and the bytes it sent."""

    def __init__(self, answer):
        self.answer, self.connections, self.sent = answer, 0, 0
        self.server = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.server.getsockname()[1]}/v1/traces"
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                connection, _ = self.server.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._one, args=(connection,), daemon=True).start()

    def _one(self, connection: socket.socket) -> None:
        with connection:
            try:
                _read_request(connection)
                self.answer(self, connection)
            except OSError:  # the client went away: what was sent is counted
                pass

    def send(self, connection: socket.socket, data: bytes) -> None:
        connection.sendall(data)
        self.sent += len(data)

    def close(self) -> None:
        self.server.close()


def _read_request(connection: socket.socket) -> None:
    data = b""
    while b"\r\n\r\n" not in data:
        data += connection.recv(65536)
    head, _, body = data.partition(b"\r\n\r\n")
    length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                   if line.lower().startswith(b"content-length:")), 0)
    while len(body) < length:
        body += connection.recv(65536)


@pytest.fixture
def session(crashed):  # noqa: F811
    world = LocalWorld()
    return world, world.get_session(crashed[0])


def test_a_redirect_is_an_answer_not_followed(session):
    elsewhere = Endpoint(lambda e, c: e.send(c, b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"))
    redirect = (f"HTTP/1.1 307 Temporary Redirect\r\nLocation: {elsewhere.url}\r\n"
                "Content-Length: 0\r\n\r\n").encode()
    endpoint = Endpoint(lambda e, c: e.send(c, redirect))
    with pytest.raises(WorldError, match="answered 307 .dh follows no redirect.: the spans were not taken"):
        send_session(*session, endpoint.url)
    assert endpoint.connections >= 1 and elsewhere.connections == 0


def test_an_endless_answer_is_not_read_whole(session):
    def endless(endpoint, connection):
        endpoint.send(connection, f"HTTP/1.1 200 OK\r\nContent-Type: application/x-protobuf\r\n"
                                  f"Content-Length: {512 * MB}\r\n\r\n".encode())
        for _ in range(512):
            endpoint.send(connection, bytes(MB))

    endpoint = Endpoint(endless)
    turns, spans = send_session(*session, endpoint.url)
    assert turns >= 1 and spans > turns
    assert endpoint.sent < 64 * MB  # what the socket buffers held, not the 512 MB answer


def test_an_answer_dripped_a_byte_at_a_time_ends_at_the_deadline(session, monkeypatch):
    def drip(endpoint, connection):
        endpoint.send(connection, b"HTTP/1.1 200 OK\r\n")
        while True:
            endpoint.send(connection, b"X")
            time.sleep(0.2)

    monkeypatch.setattr(otel_export, "SEND_DEADLINE", 2.0)
    endpoint, outcome = Endpoint(drip), []

    def send():
        try:
            send_session(*session, endpoint.url)
        except WorldError as exc:
            outcome.append(str(exc))

    sender = threading.Thread(target=send, daemon=True)
    sender.start()
    sender.join(120)  # without a deadline the send never ends: the test fails here instead
    assert not sender.is_alive()
    assert outcome == [f"the OTLP endpoint {endpoint.url} did not answer within 2 s"]
