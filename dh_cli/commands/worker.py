"""`dh worker`: a long-running process that takes over sessions whose machine died."""

from __future__ import annotations

import os
from typing import Annotated, Optional

import typer

from .. import output
from ..errors import UsageError
from .. import team


def worker_command(
    world_name: Annotated[str, typer.Option("--world", help=f"The team world to serve: {team.listed()}")] = "postgres",
    url: Annotated[Optional[str], typer.Option("--url", help=team.URL_HELP)] = None,
    harness: Annotated[Optional[list[str]], typer.Option("--harness", help="Only take over sessions of this harness (repeatable)")] = None,
    max_sessions: Annotated[int, typer.Option("--max-sessions", min=1, help="Sessions resumed here at once")] = 4,
    lease_ttl: Annotated[Optional[float], typer.Option("--lease-ttl", help="TTL of the leases it takes (default 15, or the config's lease_ttl)")] = None,
    root: Annotated[Optional[list[str]], typer.Option("--root", help="Run sessions only under this folder (repeatable), or in a cwd they were started in on this machine")] = None,
    user: Annotated[Optional[str], typer.Option("--user", envvar="DH_WORKER_USER", help="The user to run harnesses as (required when the worker runs as root)")] = None,
    grant: Annotated[Optional[str], typer.Option("--grant", help="ask|edits|auto|all: take over sessions that had up to this much permission, adding each harness's own flags for it where local_flags grant less")] = None,
) -> None:
    """Take over sessions whose machine died mid-turn: claim, pull, repair, resume here.

    Sessions are resumed in their working directory (restored from the world's snapshot
    when missing), under this machine's harness homes, with their lease held and replicated
    live; never in `/`, a system folder, the user's home or its hidden folders, and with
    --root only under those folders. A session this machine's local_flags (and --grant)
    grant less than it had, or that it cannot run here, is left to other workers, the reason
    in the world. As root it runs harnesses as --user. Ctrl-C or SIGTERM hands them back to
    the world.

    Example:
      $ dh worker --world postgres --url postgresql://dh@db.internal/dh
      $ dh worker --harness claude-code --max-sessions 2
      $ dh worker --grant edits
    """
    from ..config import load as load_config
    from ..resume.grants import granting
    from ..team.worker import Worker, WorkerOptions
    from ..wrappers import get as get_wrapper

    settings = load_config({}).settings
    flags = granting(settings.local_flags, grant, dict(os.environ))
    names = [get_wrapper(h).name for h in harness] if harness else None
    ttl = lease_ttl if lease_ttl is not None else settings.lease_ttl
    if ttl <= 0:
        raise UsageError("--lease-ttl must be more than 0 seconds")
    from ..team.worker_place import run_as

    found = team.world_class(world_name).resolve_url(team.configured_url(world_name, url))
    opts = WorkerOptions(world_name, found, names, max_sessions, ttl,
                         output.note_shown,  # its lines name hosts, cwds and reasons from the world
                         extra_args=["--grant", grant] if grant else [],
                         run_as=run_as(user, root), local_flags=flags)
    raise typer.Exit(Worker(opts).run())
