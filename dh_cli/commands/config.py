"""`dh config …`: show the effective settings and where each one came from."""

from __future__ import annotations

from typing import Annotated

import typer

from .. import output

app = typer.Typer(help="""Show dh's settings and where each comes from (defaults, config file, environment).

Example:
  $ dh config show
""", no_args_is_help=True, rich_markup_mode="rich")


@app.command("show")
def config_show(
    json_: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table")] = False,
) -> None:
    """Show each effective setting, its value, and where it came from (default, file, env, flag).

    Example:
      $ dh config show
      $ DH_MAX_RESTARTS=2 dh config show --json
    """
    from ..config import load  # pydantic: imported by the commands that need it

    effective = load()
    data = effective.to_dict()
    if json_:
        output.print_json(data)
        return
    rows = [[key, _text(item["value"]), item["source"], item["from"]]
            for key, item in data["settings"].items()]
    output.table(f"config file: {data['file']}", ["setting", "value", "source", "from"], rows)


def _text(value) -> str:
    return "(none)" if value is None else str(value)
