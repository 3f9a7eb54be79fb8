"""A shared-mirror server that misbehaves on purpose, for the client's tests
(tests/test_shared_client_*.py): `python shared_peer.py SOCKET MODE [ARG]` listens on SOCKET
with the real framing (dh_cli/mirror/shared_wire.py), prints `ready`, takes one client and
its `hold`, then:
  held        answers the hold with `held`; on `release` answers `released` and closes; on EOF closes.
  say LINE    answers `held`, then sends LINE; reads to EOF (the client hung up), waits a
              little (the last sync of a real server), creates SOCKET.let-go and closes.
  late SECS   answers `held` only after SECS seconds, then reads to EOF and closes.
Also `FakeLocal`, which stands in for the in-process LiveMirror the client takes back into."""

from __future__ import annotations

import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

from dh_cli.mirror import shared_wire as wire
from dh_cli.mirror.shared_wire import Lines, listen


@contextmanager
def ready_processes():
    """start(argv): a process that prints `ready` once it is set up; all killed at the end."""
    procs = []

    def start(argv: list[str]) -> subprocess.Popen:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
        procs.append(proc)
        assert proc.stdout.readline() == "ready\n"
        return proc

    try:
        yield start
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()


class FakeLocal:
    """Records each take-back (`made`, per subclass) and runs `hooks` inside its start()."""

    made: list = []
    hooks: list = []

    def __init__(self, world_path, wrapper, session_id, watch_dirs, notice=None):
        self.native_id = self.error = self.committed = None
        self.last_progress = time.monotonic()
        self.stopped = False

    def start(self) -> "FakeLocal":
        for hook in self.hooks:
            hook(self)
        self.made.append(self)
        return self

    def found_id(self, native_id: str) -> None:
        self.native_id = native_id

    def stop(self) -> None:
        self.stopped = True


def messages(conn, lines: Lines):
    while data := conn.recv(65536):
        yield from lines.feed(data)


def serve(conn, mode: str, arg: str, sock: Path) -> None:
    lines = Lines()
    received = messages(conn, lines)
    if next(received, None) is None:
        return conn.close()  # the client refused this server before its hold
    if mode == "late":
        time.sleep(float(arg))
    conn.sendall(wire.message(wire.HELD))
    if mode == "say":
        conn.sendall(arg.encode() + b"\n")
    for message in received:
        if mode == "held" and message.get("op") == wire.RELEASE:
            conn.sendall(wire.message(wire.RELEASED, committed={}, progress_at=None))
            break
    if mode == "say":
        time.sleep(0.2)
        Path(f"{sock}.let-go").touch()
    conn.close()


def main(argv: list[str]) -> int:
    sock = Path(argv[0])
    listener = listen(sock)
    print("ready", flush=True)
    conn, _ = listener.accept()
    serve(conn, argv[1], argv[2] if len(argv) > 2 else "", sock)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
