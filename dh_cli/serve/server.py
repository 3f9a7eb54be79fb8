"""Starting `dh serve`: the socket is bound here so that `--port 0` names the port it got in
the URL printed, and uvicorn serves the app on it until Ctrl-C or SIGTERM. Nothing is
written but `--open`'s one-time page (a 0600 file in a 0700 folder, removed at exit), so
stopping it loses nothing.

Left open for days, it must not be taken down by what connects to it: at most
MAX_CONNECTIONS at once (uvicorn answers 503 past that), a request's headers complete within
HEADER_SECONDS of its connection (or of the previous response) or the connection is closed,
an idle keep-alive connection closed after IDLE_SECONDS, and at most app.MAX_STREAMS event
streams (the rest 503)."""

from __future__ import annotations

import html
import os
import shutil
import socket
import tempfile
import threading
from pathlib import Path
from typing import Callable

from ..errors import DhError, LogDbError
from .guard import Guard, new_token

MAX_CONNECTIONS = 64
HEADER_SECONDS = 10.0
IDLE_SECONDS = 5


def bound_socket(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise DhError(f"cannot listen on {host}:{port} ({exc.strerror or exc})",
                      hint="pick another --port, or --port 0 for any free one") from None
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


def page_url(host: str, port: int, query: str = "") -> str:
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}/" + (f"?{query}" if query else "")


def serve(log: Path, host: str, port: int, world: str | None, url: str | None,
          say: Callable[[str], None], open_browser: bool = False) -> None:
    from .app import Options, create_app
    from .reads import warm

    if not log.exists():
        raise LogDbError(f"there is no log at {log} yet", hint="run a harness under dh first (dh run …)")
    if world is not None:
        from .team import open_world

        open_world(world, url).close()  # an unknown world or a bad URL: one Error: line now
    sock = bound_socket(host, port)
    port = sock.getsockname()[1]
    guard = Guard(host, port, new_token())
    app = create_app(Options(log, guard, world, url))
    threading.Thread(target=warm, name="dh-serve-warm", daemon=True).start()
    say(f"dh serve: {page_url(host, port, 'token=' + guard.token)}  (the token is printed this once)")
    folder = _open_in_browser(page_url(host, port, "code=" + guard.one_time_code())) if open_browser else None
    try:
        run(app, sock)
    finally:
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)


def _open_in_browser(address: str) -> Path:
    """The browser opens a 0600 file that sends it on to `address` (a one-time code), so
    the code is never on a command line; the file's folder, for removal at exit."""
    import webbrowser

    folder = Path(tempfile.mkdtemp(prefix="dh-serve-"))  # 0700
    page = folder / "open.html"
    fd = os.open(page, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(f'<!DOCTYPE html><meta http-equiv="refresh" content="0;url={html.escape(address)}">\n')
    webbrowser.open(page.as_uri())
    return folder


def config(app, header_seconds: float = HEADER_SECONDS):
    import uvicorn

    return uvicorn.Config(app, log_level="error", access_log=False, server_header=False,
                          date_header=False, lifespan="off", timeout_graceful_shutdown=1,
                          limit_concurrency=MAX_CONNECTIONS, timeout_keep_alive=IDLE_SECONDS,
                          http=_header_timed(header_seconds))


def run(app, sock: socket.socket) -> None:
    import uvicorn

    uvicorn.Server(config(app)).run(sockets=[sock])


def _header_timed(seconds: float):
    """uvicorn's HTTP/1.1 protocol with a deadline for each request's headers: uvicorn has
    none, so a client sending a byte now and then held its connection for ever."""
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class HeaderTimed(H11Protocol):
        deadline = None

        def connection_made(self, transport):
            super().connection_made(transport)
            self._arm()

        def on_response_complete(self):
            super().on_response_complete()
            self._arm()

        def handle_events(self):
            super().handle_events()
            if self.cycle is not None and not self.cycle.response_complete and self.deadline is not None:
                self.deadline.cancel()  # the headers are in
                self.deadline = None

        def connection_lost(self, exc):
            if self.deadline is not None:
                self.deadline.cancel()
            super().connection_lost(exc)

        def _arm(self):
            if self.deadline is not None:
                self.deadline.cancel()
            self.deadline = self.loop.call_later(seconds, self._too_slow)

        def _too_slow(self):
            if not self.transport.is_closing() and (self.cycle is None or self.cycle.response_complete):
                self.transport.close()

    return HeaderTimed
