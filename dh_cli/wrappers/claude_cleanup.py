"""Claude Code's own cleanup of old transcripts: at start it deletes session files whose
modification time is older than `cleanupPeriodDays` (its settings.json, default 30), with
the sessions' side folders left behind (shared docs, harnesses.md §8)."""

from __future__ import annotations

import json
from pathlib import Path

DEFAULT_DAYS = 30


def cleanup_days(home: Path) -> int:
    """The days after which Claude Code deletes a transcript, as the user's settings say."""
    try:
        settings = json.loads((home / "settings.json").read_text())
    except (OSError, ValueError):
        return DEFAULT_DAYS
    days = settings.get("cleanupPeriodDays") if isinstance(settings, dict) else None
    if isinstance(days, bool) or not isinstance(days, (int, float)) or days < 0:
        return DEFAULT_DAYS
    return int(days)
