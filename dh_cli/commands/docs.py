"""`dh completion SHELL` and `dh man [COMMAND]`: the completion scripts and man pages, made
from the CLI itself (dh_cli/clidocs.py), so an installed dh has them whatever installed it;
the copies in completions/ and man/ are the same text (tests/test_docs.py, test_completion.py)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from enum import Enum
from typing import Annotated, Optional

import typer

from .. import output
from ..errors import UsageError


class Shell(str, Enum):
    bash = "bash"
    zsh = "zsh"
    fish = "fish"


def completion_command(
    shell: Annotated[Shell, typer.Argument(help="bash, zsh or fish")],
) -> None:
    """Print the shell completion script (commands, options, harness names, session ids, states).

    Example:
      $ dh completion bash > ~/.local/share/bash-completion/completions/dh
      $ dh completion zsh > "${fpath[1]}/_dh"
      $ dh completion fish > ~/.config/fish/completions/dh.fish
    """
    from ..clidocs import completion

    sys.stdout.write(completion(shell.value))


def man_command(
    ctx: typer.Context,
    command: Annotated[Optional[str], typer.Argument(help="A command or group, e.g. log (default: dh itself)")] = None,
) -> None:
    """Show dh's man page, or a command group's (through man(1) on a terminal, roff otherwise).

    Example:
      $ dh man
      $ dh man log
      $ dh man world > dh-world.1
    """
    from ..clidocs import man_pages

    root = ctx.find_root().command  # the whole CLI (cli.app_for builds all of it for `dh man`)
    _show(man_pages(root)[_page_name(root, command)])


def _page_name(root, command: str | None) -> str:
    """dh(1) for dh and its commands, dh-GROUP(1) for a group."""
    groups = [name for name, sub in root.commands.items() if hasattr(sub, "commands")]
    if command in groups:
        return f"dh-{command}"
    if command in (None, "dh") or command in root.commands:
        return "dh"
    raise UsageError(f"no command {command!r}; the pages are dh and " + ", ".join(f"dh-{g}" for g in groups))


def _show(page: str) -> None:
    viewer = shutil.which("man")
    if output.is_terminal() and viewer:
        subprocess.run([viewer, "-l", "-"], input=page.encode("utf-8"), check=False)
        return
    sys.stdout.write(page)
