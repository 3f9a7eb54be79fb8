"""What Claude Code's own settings let its model do (grants.py): `permissions.defaultMode`
(the values of --permission-mode) and `permissions.allow` (tools by name, as --allowedTools)
in the user's settings.json, which the harness applies where no flag says otherwise. A
project's `.claude/settings*.json` travels with its files and is not read."""

from __future__ import annotations

import json
from pathlib import Path

from .grants import ALL, ASK, AUTO, EDITS, MAX_TOOLS, Grant, tools_named

PERMISSION_MODES = {"default": ASK, "plan": ASK, "dontAsk": ASK, "acceptEdits": EDITS, "auto": AUTO,
                    "bypassPermissions": ALL}
MAX_SETTINGS = 1 << 20  # a settings file is a few KiB; a larger one is not read


def settings_grant(home: Path, needed: bool = False) -> Grant | None:
    """None when the settings set neither (no file, no permissions, unreadable). A mode dh
    does not know grants nothing on this machine's side and everything on the side of what a
    session ran with (needed), as an unknown flag value does (grants.granted)."""
    permissions = _settings(home).get("permissions")
    if not isinstance(permissions, dict):
        return None
    mode, allow = permissions.get("defaultMode"), permissions.get("allow")
    names = [a for a in allow[:MAX_TOOLS] if isinstance(a, str)] if isinstance(allow, list) else []
    if mode is None and not names:
        return None
    level = PERMISSION_MODES.get(mode, ALL if needed else ASK) if mode is not None else ASK
    return Grant(level, tools_named(names))


def _settings(home: Path) -> dict:
    path = home / "settings.json"
    try:
        if path.stat().st_size > MAX_SETTINGS:
            return {}
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}
