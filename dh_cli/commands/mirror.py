"""`dh import`: backfill native sessions into the log."""

from pathlib import Path
from typing import Annotated, Optional

import typer

from .. import output, wrappers
from ..worlds.local import LocalWorld
from ..mirror.importer import import_sessions
from .args import HarnessArg


def import_command(
    harness: HarnessArg,
    session: Annotated[Optional[str], typer.Argument(help="The harness's session id, or a path to its file")] = None,
    all_: Annotated[bool, typer.Option("--all", help="Import every session found in the harness home")] = False,
    home: Annotated[Optional[Path], typer.Option(help="The harness home (default: from its own environment variables)")] = None,
    json_: Annotated[bool, typer.Option("--json", help="Print the report as JSON")] = False,
) -> None:
    """Import existing native sessions of a harness into the log (idempotent).

    Example:
      $ dh import claude --all
      $ dh import pi ~/.pi/agent/sessions/--home-u-app--/2026-11-29T07-35-57-628Z_01a2.jsonl
    """
    wrapper = wrappers.get(harness)
    world = LocalWorld()
    root = home or wrapper.home()
    with output.progress("import") as bar:
        task = bar.add_task("importing", total=None)
        report = import_sessions(world, wrapper, root, session, all_,
                                 progress=lambda done, total: bar.update(task, completed=done, total=total))
    for item in report.skipped:  # a bad session is skipped, the rest imported
        output.note(f"dh: warning: skipped {item['path']}: {item['why']}")
    if json_:
        output.print_json(report.to_dict())
        return
    output.out.print(f"{len(report.sessions)} session(s), {report.added} new record(s) from {root}")
    if report.pending:
        output.note(f"dh: {report.pending} byte(s) of torn last lines left pending (not yet complete)")
