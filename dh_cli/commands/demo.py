"""`dh demo`: narrate the demo (dh_cli/demo/) as it runs, then show the session and what
was saved. Rich on a terminal, plain text when piped (output.py's consoles decide)."""

from __future__ import annotations

from typing import Annotated

import typer

from .. import output
from ..logviews import render

STYLES = {"model": "cyan", "kill": "bold red", "dh": "bold yellow"}
LABELS = {"model": "  model   | ", "kill": "  demo    | ", "dh": ""}


def _say(kind: str, text: str) -> None:
    output.out.print(f"{LABELS[kind]}{text}", style=STYLES[kind], markup=False)
    output.out.file.flush()


def _heading(text: str) -> None:
    output.out.print(text, style="bold", markup=False)
    output.out.file.flush()


def demo_command(
    keep: Annotated[bool, typer.Option("--keep", help="Keep the demo's temporary folder (its log, harness home and work folder)")] = False,
) -> None:
    """Watch dh survive a crash: a scripted harness is killed mid model call, dh resumes it.

    Offline and self-contained: a demo harness and model shipped with dh, a temporary home,
    dh's real supervision; nothing is left behind unless --keep.

    Example:
      $ dh demo
      $ dh demo --keep
    """
    from ..demo.run import PROMPT, run_demo

    _heading("dh demo: a scripted harness and model (shipped with dh for this demo), offline,")
    _heading("in a temporary home. The model's 2nd reply is cut by a SIGKILL of the harness.")
    _heading(f'$ dh run dh-demo -- -p "{PROMPT}"')
    result = run_demo(_say, keep=keep)
    _heading(f"$ dh log show {result.session_id}")
    render.session_view(result.view)
    _summary(result)
    raise typer.Exit(result.code)


def _summary(result) -> None:
    saved = len(result.saved)
    replies = ", ".join(f"reply {i + 1} ×{n}" for i, n in sorted(result.finished.items()))
    cut = ", ".join(f"reply {i + 1}" for i in sorted(result.cut))
    _heading("What dh saved")
    lines = [
        f"killed: the harness (pid {result.killed_pid}) by SIGKILL in the middle of a model call",
        f"repaired: dropped the half-written reply ({result.dropped_bytes} bytes) the kill left in "
        "the session file",
        f"resumed: attempt {result.view.session['attempts']}, state {result.view.session['state']}",
        f"{saved} finished model call{'' if saved == 1 else 's'} not paid again "
        f"(the model served: {replies}; cut by the kill and asked again: {cut or 'none'})",
        f"the tool step ran {result.tool_runs} time{'' if result.tool_runs == 1 else 's'} "
        "(notes.txt has that many lines)",
    ]
    if result.paid_twice:
        lines.append(f"PAID TWICE: {', '.join(f'reply {i + 1}' for i in result.paid_twice)}")
    for line in lines:
        output.out.print(f"  {line}", markup=False)
    if result.kept:
        output.out.print(f"kept {result.folder}; read it again with: DH_HOME={result.folder / 'dh-home'} "
                         f"dh log show {result.session_id}", markup=False)
    else:
        output.out.print(f"removed {result.folder} (took {result.seconds:.1f} s; --keep keeps it)",
                         markup=False)
