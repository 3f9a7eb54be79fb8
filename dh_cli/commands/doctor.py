"""`dh doctor`: print the library's checks, one line each, and fail when one failed."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.text import Text

from .. import output
from ..doctor import failed, run_checks

STYLES = {"ok": "green", "warn": "yellow", "fail": "bold red", "skip": "dim"}


def doctor_command(
    json_: Annotated[bool, typer.Option("--json", help="Print the checks as JSON")] = False,
) -> None:
    """Check harness binaries and versions, harness homes, the log database, config and worlds.

    Exits 1 when a check fails; warnings (a harness not installed, an untested version) do not.

    Example:
      $ dh doctor
      $ dh doctor --json | jq '.[] | select(.status != "ok")'
    """
    checks = run_checks()
    if json_:
        output.print_json([c.to_dict() for c in checks])
    else:
        width = output.terminal_width()
        for check in checks:
            line = Text(output.fitted(f"{check.status:<5}{check.name}: {check.message}", width))
            line.stylize(STYLES[check.status], 0, len(check.status))
            output.out.print(line)
    if failed(checks):
        raise typer.Exit(1)
