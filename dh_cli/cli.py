"""The root of the CLI: builds the app from each group's commands and turns every dh error
into one `Error:` line with a documented exit code."""

from __future__ import annotations

import os
import sqlite3
import sys

import typer

from . import __version__, helptypes, output, paths
from .commands import config, demo, doctor, log, shim, status, workspace, world
from .commands.mirror import import_command
from .commands.run import resume_command, run_command
from .commands.worker import worker_command
from .errors import DhError
from .worlds.local_conn import db_error

ROOT_HELP = """Durable harness: run coding agents (Claude Code, Codex, OpenCode, Pi) so that a crash costs nothing.

dh mirrors every record of the harness's own session files into a local log as it is written,
and resumes a crashed, killed or hung session with the harness's own resume flags, without
paying twice for a model call whose answer is already logged.

Example:
  $ dh run claude -- -p "fix the failing test" --output-format stream-json --verbose
  $ dh log show 1m8k6p --follow
  $ dh doctor
"""

helptypes.install()
app = typer.Typer(
    name="dh",
    help=ROOT_HELP,
    no_args_is_help=False,  # `dh` alone prints a short status (the root callback)
    rich_markup_mode="rich",  # keeps each `$ dh …` line of an Example: block on its own line
    pretty_exceptions_enable=False,
    add_completion=True,
)
app.command("run", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})(run_command)
app.command("resume")(resume_command)
app.command("import")(import_command)
app.command("worker")(worker_command)
app.add_typer(log.app, name="log")
app.command("doctor")(doctor.doctor_command)
app.add_typer(config.app, name="config")
app.add_typer(world.app, name="world")
app.add_typer(shim.app, name="shim")
app.command("demo")(demo.demo_command)
app.add_typer(workspace.app, name="workspace")


def _version(value: bool) -> None:
    if value:
        output.out.print(f"dh {__version__}")
        raise typer.Exit()


@app.callback(invoke_without_command=True)
def root(
    ctx: typer.Context,
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                 help="Print dh's version and exit"),
) -> None:
    """Durable harness: supervise coding-agent CLIs, log every record, resume after crashes."""
    if ctx.invoked_subcommand is None:
        status.status_command()


def report_error(exc: BaseException) -> int:
    """Print one `Error:` line for exc and return the exit code it maps to."""
    if isinstance(exc, sqlite3.Error):
        exc = db_error(exc, paths.db_path())
    if isinstance(exc, DhError):
        output.error_line(str(exc), exc.hint)
        return exc.exit_code
    if isinstance(exc, KeyboardInterrupt):
        return 130
    if os.environ.get("DH_RAISE_ERRORS"):
        raise exc
    output.error_line(f"unexpected {type(exc).__name__}: {exc}",
                      "set DH_RAISE_ERRORS=1 to see the traceback")
    return 1


GROUPS = ("log", "config", "world", "shim", "workspace")


def main() -> None:
    # `dh log` (any group) alone asks what there is: help, and success, not a usage error (2);
    # `dh` alone prints the short status (the root callback)
    if sys.argv[1:] in ([g] for g in GROUPS):
        sys.argv.append("--help")
    try:
        app(prog_name="dh")
    except (Exception, KeyboardInterrupt) as exc:  # the edge: everything is one line
        sys.exit(report_error(exc))
