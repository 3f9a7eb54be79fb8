"""All terminal output goes through here: one Rich console for stdout, one for stderr. Colour
only on a terminal (Rich's own check) and never with NO_COLOR; `--json` prints plain JSON."""

from __future__ import annotations

import json
import sys

from rich.console import Console
from rich.table import Table

out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)


def is_terminal() -> bool:
    return sys.stdout.isatty()


def print_json(data) -> None:
    sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False, default=str) + "\n")
    sys.stdout.flush()


def error_line(message: str, hint: str | None = None) -> None:
    text = f"Error: {message}"
    if hint:
        text += f" (hint: {hint})"
    err.print(text, markup=False, highlight=False)


def note(message: str) -> None:
    # Plain text either way (no markup, no highlighting, no wrapping), so skip Rich's
    # rendering: its first use costs ~8 ms, paid between a crash and the relaunch.
    sys.stderr.write(message + "\n")
    sys.stderr.flush()


def table(title: str | None, columns: list[str], rows: list[list]) -> None:
    grid = Table(title=title, show_lines=False, header_style="bold")
    for column in columns:
        grid.add_column(column, overflow="fold")
    for row in rows:
        grid.add_row(*["" if v is None else str(v) for v in row])
    out.print(grid)


def progress(label: str):
    """A progress bar on a terminal; a no-op context elsewhere."""
    from rich.progress import Progress

    return Progress(console=err, disable=not err.is_terminal, transient=True)
