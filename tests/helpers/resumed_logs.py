"""Copies of the logs dh wrote around each real release killed mid-turn and resumed
(tests/fixtures/resumed, captured by tests/e2e/test_resumed_turns.py): a relaunched session
with its journal, for the views that price what resumes re-cached and saved."""

from __future__ import annotations

import shutil
from pathlib import Path

CAPTURED = sorted((Path(__file__).parent.parent / "fixtures" / "resumed").glob("*.db"))
# Claude Code's model is in the price table (the other captures ran on the fake model's names)
PRICED = next(p for p in CAPTURED if p.stem.startswith("claude-code"))


def resumed_home(captured: Path, dh_home: Path) -> Path:
    """dh_home holding a copy of the captured log."""
    dh_home.mkdir(parents=True)
    shutil.copy(captured, dh_home / "dh.db")
    return dh_home
