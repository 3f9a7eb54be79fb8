"""Starting `dh serve`: the bind is checked (guard.check_bind), the socket is bound here so
that `--port 0` names the port it got in the URL printed, and uvicorn serves the app on it
until Ctrl-C or SIGTERM. Nothing is written anywhere, so stopping it loses nothing."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Callable

from ..errors import DhError, LogDbError
from .guard import Guard, check_bind, new_token


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


def page_url(host: str, port: int, token: str | None) -> str:
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}/" + (f"?token={token}" if token else "")


def serve(log: Path, host: str, port: int, world: str | None, url: str | None, token: bool,
          say: Callable[[str], None], open_browser: bool = False) -> None:
    from .app import Options, create_app

    secret = new_token() if token else None
    check_bind(host, secret)
    if not log.exists():
        raise LogDbError(f"there is no log at {log} yet", hint="run a harness under dh first (dh run …)")
    if world is not None:
        from .team import open_world

        open_world(world, url).close()  # an unknown world or a bad URL: one Error: line now
    sock = bound_socket(host, port)
    port = sock.getsockname()[1]
    app = create_app(Options(log, Guard(host, port, secret), world, url))
    address = page_url(host, port, secret)
    say(f"dh serve: {address}" + ("  (the token is printed this once)" if secret else ""))
    if open_browser:
        import webbrowser

        webbrowser.open(address)
    _run(app, sock)


def _run(app, sock: socket.socket) -> None:
    import uvicorn

    config = uvicorn.Config(app, log_level="warning", access_log=False, server_header=False,
                            date_header=False, lifespan="off", timeout_graceful_shutdown=1)
    uvicorn.Server(config).run(sockets=[sock])
