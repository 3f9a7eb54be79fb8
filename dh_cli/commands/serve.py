"""`dh serve`: a live web view of the log's sessions (dh_cli/serve/)."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from .. import output, paths, team


def serve_command(
    host: Annotated[str, typer.Option(help="Address to listen on")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on (0: any free port, printed)", min=0, max=65535)] = 8765,
    world: Annotated[Optional[str], typer.Option("--world", help=f"Also show this team world: local (the log alone), {team.listed()}")] = None,
    url: Annotated[Optional[str], typer.Option("--url", help=team.URL_HELP)] = None,
    open_: Annotated[bool, typer.Option("--open", help="Open the page in the browser (with a one-time code)")] = False,
) -> None:
    """Show every session in a browser, live: the list, each trace, the team's machines.

    Read-only: it opens the log read-only and never starts a harness. Every request needs
    the token in the URL it prints (once), loopback too. Ctrl-C stops it.

    Example:
      $ dh serve
      $ dh serve --open --world postgres
      $ dh serve --host 0.0.0.0
    """
    from ..serve.server import serve

    remote = None if world in (None, "local") else world
    serve(paths.db_path(), host, port, remote, url, lambda line: output.out.print(line, markup=False,
          soft_wrap=True), open_)
