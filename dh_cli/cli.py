"""The root of the CLI: builds the app from each group's commands and turns every dh error
into one `Error:` line with a documented exit code."""

from __future__ import annotations

import importlib
import os
import sqlite3
import sys

import typer

from . import __version__, cliparams, helptypes, output, paths
from .errors import DhError
from .worlds.local_conn import db_error

# A paragraph is one line (the help screen wraps it to the terminal; a line break inside one
# stays a break, so the text wrapped raggedly at 80 columns); an Example: line fits 76 columns.
ROOT_HELP = """Durable harness: run coding agents (Claude Code, Codex, OpenCode, Pi) so that a crash costs nothing.

dh mirrors every record of the harness's own session files into a local log as it is written, and resumes a crashed, killed or hung session with the harness's own resume flags, without paying twice for a model call whose answer is already logged.

Example:
  $ dh run claude -- -p "fix the failing test"
  $ dh log show 1m8k6p --follow
  $ dh doctor
"""

helptypes.install()
cliparams.install()


# Each command's module is imported only when that command runs, or when the whole CLI is
# wanted (help, completion, the man pages, an unknown word): `dh run` imported every command
# module before (demo, log views, import, world): 477 modules in 204 ms, now 384 in 157 ms
# (-X importtime, bytecode cached). The order here is the order of `dh --help`.
COMMANDS = {  # name: (module in commands/, its command function or group app)
    "run": ("run", "run_command"), "resume": ("run", "resume_command"),
    "import": ("mirror", "import_command"), "restore": ("restore", "restore_command"),
    "worker": ("worker", "worker_command"),
    "log": ("log", "app"), "doctor": ("doctor", "doctor_command"), "config": ("config", "app"),
    "world": ("world", "app"), "shim": ("shim", "app"), "demo": ("demo", "demo_command"),
    "workspace": ("workspace", "app"), "serve": ("serve", "serve_command"),
    "completion": ("docs", "completion_command"), "man": ("docs", "man_command"),
}
GROUPS = tuple(name for name, (_, attr) in COMMANDS.items() if attr == "app")
PASS_THROUGH = {"allow_extra_args": True, "ignore_unknown_options": True}  # the harness's args


def _register(app: typer.Typer, name: str) -> None:
    module, attr = COMMANDS[name]
    target = getattr(importlib.import_module(f"{__package__}.commands.{module}"), attr)
    if attr == "app":
        app.add_typer(target, name=name)
    else:
        app.command(name, context_settings=PASS_THROUGH if name == "run" else None)(target)


def build_app(only: str | None = None) -> typer.Typer:
    """The CLI with every command, or with only the one named (what one invocation needs)."""
    built = typer.Typer(
        name="dh",
        help=ROOT_HELP,
        no_args_is_help=False,  # `dh` alone prints a short status (the root callback)
        rich_markup_mode="rich",  # keeps each `$ dh …` line of an Example: block on its own line
        pretty_exceptions_enable=False,
        add_completion=True,
    )
    built.callback(invoke_without_command=True)(root)
    for name in COMMANDS:
        if only in (None, name):
            _register(built, name)
    return built


def __getattr__(name: str):
    """`dh_cli.cli.app`: the whole CLI (tests, the man pages), built on first use and kept."""
    if name != "app":
        raise AttributeError(name)
    globals()["app"] = built = build_app()
    return built


def app_for(argv: list[str]) -> typer.Typer:
    """The app one invocation needs: its command alone when the first word names one; the
    whole CLI for root options (--help, --version, completion), `dh` alone, `dh man` or a typo."""
    if "app" in globals():
        return globals()["app"]  # built (and maybe extended) already: a test's own command
    word = argv[0] if argv else None
    alone = word in COMMANDS and word != "man"  # `dh man` reads every command's help
    return build_app(word) if alone and not os.environ.get("_DH_COMPLETE") else __getattr__("app")


def _version(value: bool) -> None:
    if value:
        output.out.print(f"dh {__version__}")
        raise typer.Exit()


def root(
    ctx: typer.Context,
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                 help="Print dh's version and exit"),
) -> None:
    """Durable harness: supervise coding-agent CLIs, log every record, resume after crashes."""
    if ctx.invoked_subcommand is None:
        from .commands import status

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


def main() -> None:
    # `dh log` (any group) alone asks what there is: help, and success, not a usage error (2);
    # `dh` alone prints the short status (the root callback)
    if sys.argv[1:] in ([g] for g in GROUPS):
        sys.argv.append("--help")
    try:
        app_for(sys.argv[1:])(prog_name="dh")
    except (Exception, KeyboardInterrupt) as exc:  # the edge: everything is one line
        sys.exit(report_error(exc))
