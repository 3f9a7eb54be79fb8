"""The workspace half of a resume (and of a worker's takeover): before the harness is
relaunched, its cwd gets the files of the session's last completed step.

- the cwd does not exist (a lost machine, `--cwd NEW` after a pull): it is created and restored;
- it exists and matches the snapshot: nothing to do;
- it exists and differs: `restore` writes the snapshot's files, `keep` leaves it; `ask` shows
  the difference and asks on a terminal, and keeps it (saying so) without one."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Callable

from .. import events
from ..errors import UsageError
from .restore import Change, Restored, diff, flat_dir, flat_tree, pick, restore_into
from .scan import Rules

MODES = ("ask", "keep", "restore")
SHOWN = 20  # changed paths listed before "… and N more"


@dataclass
class WorkspaceOutcome:
    action: str  # none | restored | kept
    snapshot_seq: int | None = None
    changes: list[Change] = field(default_factory=list)
    restored: Restored | None = None

    def to_dict(self) -> dict:
        return {"action": self.action, "snapshot": self.snapshot_seq,
                "changes": [c.__dict__ for c in self.changes],
                "restored": self.restored.to_dict() if self.restored else None}


def restore_workspace(world, session_id: str, cwd: str, mode: str = "restore",
                      confirm: Callable[[str], bool] | None = None,
                      notice: Callable[[str], None] = lambda text: None,
                      rules: Rules | None = None) -> WorkspaceOutcome:
    """Give `cwd` the session's last snapshot. `confirm(question)` asks the user (None: no
    terminal). This is the call a worker makes before it relaunches a session it took over."""
    if mode not in MODES:
        raise UsageError(f"bad --workspace value {mode!r}", hint="use keep or restore")
    snap = pick(world, session_id)
    if snap is None:
        return WorkspaceOutcome("none")
    if not os.path.isdir(cwd):
        restored = restore_into(world, snap, cwd)
        notice(f"dh: restored the workspace of session {session_id} into {cwd} "
               f"({len(restored.written)} file(s) of snapshot {snap.seq}{_step(snap)})"
               + _not_stored(restored))
        return WorkspaceOutcome("restored", snap.seq, restored=restored)
    changes = diff(flat_dir(cwd, rules or Rules()), flat_tree(world, snap.root))
    changes = [c for c in changes if not c.note and c.status != "deleted"]
    if not changes:
        return WorkspaceOutcome("none", snap.seq)
    if mode == "ask":
        mode = _ask(cwd, snap, changes, confirm, notice)
    if mode == "keep":
        return WorkspaceOutcome("kept", snap.seq, changes)
    restored = restore_into(world, snap, cwd, only={c.path for c in changes})
    notice(f"dh: restored {len(restored.written)} file(s) of {cwd} from snapshot {snap.seq}"
           f"{_step(snap)}" + _not_stored(restored))
    return WorkspaceOutcome("restored", snap.seq, changes, restored)


def _ask(cwd, snap, changes, confirm, notice) -> str:
    notice(f"dh: {cwd} differs from the session's last workspace snapshot ({snap.seq}"
           f"{_step(snap)}):\n" + describe(changes))
    if confirm is None:
        notice("dh: no terminal to ask on: keeping the folder as it is "
               "(pass --workspace restore to restore the snapshot's files)")
        return "keep"
    return "restore" if confirm("Restore the snapshot's files before resuming?") else "keep"


def describe(changes: list[Change]) -> str:
    """The snapshot's view: `modified`/`added` are what a restore would write."""
    lines = [f"  {'would write' if c.status == 'added' else c.status:12} {c.path}"
             for c in changes[:SHOWN]]
    if len(changes) > SHOWN:
        lines.append(f"  … and {len(changes) - SHOWN} more")
    return "\n".join(lines)


def _step(snap) -> str:
    where = f", turn {snap.turn}" if snap.turn else ""
    return where + (f", after tool call {snap.step}" if snap.step else f", {snap.reason}")


def _not_stored(restored: Restored) -> str:
    if not restored.not_stored:
        return ""
    names = ", ".join(p for p, _ in restored.not_stored[:5])
    return f"; not in the log, so not restored: {names}" + (
        " …" if len(restored.not_stored) > 5 else "")


def prepare_cwd(world, session, move_to: str | None, own_cwd: str | None, mode: str | None,
                notice) -> None:
    """`dh resume`'s step before the relaunch: the session's cwd on this machine (`own_cwd`,
    as dh decided it here: confine.py; never a world row's) or --cwd gets its last snapshot;
    a missing folder with no snapshot to fill it is the error it always was."""
    import sys

    from ..errors import NativeStateError

    target = move_to or own_cwd
    if not target:
        return
    target = os.path.abspath(os.path.expanduser(target))
    confirm = _confirm if sys.stdin.isatty() and sys.stderr.isatty() else None
    outcome = restore_workspace(world, session.id, target, mode or "ask", confirm, notice)
    if not os.path.isdir(target):
        if move_to:
            raise NativeStateError(f"the checkout {move_to} does not exist or is not a folder")
        raise NativeStateError(f"the session's working directory {own_cwd} no longer exists",
                               hint="restore that checkout, or resume with --cwd on another path")
    if outcome.action != "none":
        events.add(world, session.id, events.workspace(target, outcome.to_dict()))


def _confirm(question: str) -> bool:
    import typer

    return typer.confirm(question, default=True, err=True)
