"""Parameters several commands share, each with the shell completion of its values
(logviews/candidates.py, imported only when the shell asks)."""

from __future__ import annotations

from typing import Annotated, Optional

import typer


def _sessions(incomplete: str) -> list[str]:
    from ..logviews.candidates import sessions

    return sessions(incomplete)


def _harnesses(incomplete: str) -> list[str]:
    from ..logviews.candidates import harnesses

    return harnesses(incomplete)


def _states(incomplete: str) -> list[str]:
    from ..logviews.candidates import states

    return states(incomplete)


SessionArg = Annotated[str, typer.Argument(help="dh id, a unique prefix of it, or the harness's own id",
                                           autocompletion=_sessions)]
HarnessArg = Annotated[str, typer.Argument(help="claude-code (claude), codex, opencode or pi",
                                           autocompletion=_harnesses)]
HarnessOpt = Annotated[Optional[str], typer.Option(help="Only sessions of this harness",
                                                   autocompletion=_harnesses)]
StateOpt = Annotated[Optional[str], typer.Option(
    help="Only sessions in this state (e.g. finished, crashed, imported)", autocompletion=_states)]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table")]
SecretsOpt = Annotated[bool, typer.Option("--show-secrets", help="Show what looks like a credential (keys, tokens, passwords) instead of ***")]
