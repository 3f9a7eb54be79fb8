"""`dh shim …`: install, list and remove the launchers that make `claude`, `codex`,
`opencode` and `pi` run under dh (library: shims.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from .. import output, paths, shims

app = typer.Typer(help="""Make the harness's own name run it under dh: `claude` becomes `dh run claude --`.

Example:
  $ dh shim install
  $ dh shim list
  $ DH_DISABLE=1 claude        # one run without dh
""", no_args_is_help=True, rich_markup_mode="rich")

HarnessArgs = Annotated[Optional[list[str]], typer.Argument(help="claude-code (claude), codex, opencode, pi (default: all)")]
DirOpt = Annotated[Optional[Path], typer.Option("--dir", help="The shim folder (default ~/.local/share/dh/shims)")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON")]


def _wrappers(names: list[str] | None) -> list:
    from ..wrappers import REGISTRY, get

    return [get(n) for n in names] if names else list(REGISTRY.values())


def _real(shim: shims.Shim) -> str:
    return shim.real or "not found on PATH"


@app.command("install")
def shim_install(harness: HarnessArgs = None, dir_: DirOpt = None, json_: JsonOpt = False) -> None:
    """Write a shim per harness; put its folder first on PATH to run every harness under dh.

    Example:
      $ dh shim install
      $ dh shim install claude pi --dir ~/bin/dh-shims
    """
    folder = (dir_ or paths.shim_dir()).expanduser().absolute()
    written = shims.install(_wrappers(harness), folder)
    if json_:
        output.print_json({"dir": str(folder), "path_line": shims.path_line(folder),
                            "shims": [s.to_dict() for s in written]})
        return
    for shim in written:
        output.out.print(f"wrote {shim.path} (runs `dh run {shim.harness}`; real {shim.name}: "
                         f"{shim.real or 'not found on PATH: the shim refuses until it is installed'})", markup=False)
    _path_advice(folder)


def _path_advice(folder: Path) -> None:
    if shims.on_path(folder) == 0:
        output.out.print(f"{folder} is first on PATH: these names now run under dh.", markup=False)
        return
    output.out.print("Add this line to your shell's rc file (~/.bashrc, ~/.zshrc, …), then "
                     "open a new shell:", markup=False)
    output.out.print(f"  {shims.path_line(folder)}", markup=False)


@app.command("list")
def shim_list(dir_: DirOpt = None, json_: JsonOpt = False) -> None:
    """List the shims in the shim folder: which are in effect and the real binary behind each.

    Example:
      $ dh shim list --json
    """
    folder = (dir_ or paths.shim_dir()).expanduser().absolute()
    found = shims.listing(folder)
    if json_:
        output.print_json([s.to_dict() for s in found])
        return
    if not found:
        output.out.print(f"no dh shims in {folder} (add them with `dh shim install`)", markup=False)
        return
    rows = [[s.name, s.harness, s.path, "yes" if s.active else "no (not first on PATH)", _real(s)]
            for s in found]
    output.table(None, ["name", "harness", "shim", "in effect", "real binary"], rows)


@app.command("remove")
def shim_remove(harness: HarnessArgs = None, dir_: DirOpt = None, json_: JsonOpt = False) -> None:
    """Remove dh's shims (all, or those of the harnesses named); other files are left alone.

    Example:
      $ dh shim remove
      $ dh shim remove codex
    """
    folder = (dir_ or paths.shim_dir()).expanduser().absolute()
    removed = shims.remove(_wrappers(harness) if harness else [], folder)
    if json_:
        output.print_json(removed)
        return
    for path in removed:
        output.out.print(f"removed {path}", markup=False)
    if not removed:
        output.out.print(f"no dh shims to remove in {folder}", markup=False)
