"""Claude Code's TUI killed before its transcript held the prompt: what the user typed, from
the TUI's own prompt history (`history.jsonl` in the config home), and the start-up rows
that are all such a transcript holds (see ClaudeWrapper.restart_unstarted)."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from ..models import Record
from .common import json_objects
from .relaunch import typed_prompt_lost


def project_slug(cwd: str) -> str:
    """Claude's folder name for a cwd: every character outside [A-Za-z0-9] becomes '-'."""
    return re.sub(r"[^A-Za-z0-9]", "-", cwd)


HISTORY = "history.jsonl"  # the TUI's prompt history: {display, pastedContents, timestamp, project, sessionId}
# lines that were not messages to the model: a slash command (`/model`, `/exit`), a `!` shell
# command the TUI ran itself (sent again, it would run twice), a `#` memory note
NOT_PROMPTS = ("/", "!", "#")
HISTORY_TAIL = 1 << 20  # the newest MiB of it is read: the prompt looked for is minutes old
RESENT = ("the prompt typed before the kill had not reached claude-code's transcript; "
          "dh sends it again (from claude-code's prompt history)")
LOST = typed_prompt_lost("claude-code")


def clear_startup_only(path: Path) -> bool:
    """True when the transcript is missing or held only start-up rows (then removed)."""
    try:
        lines = path.read_bytes().splitlines()
    except FileNotFoundError:
        return True
    except OSError:
        return False
    for line in filter(None, lines):
        try:
            obj = json.loads(line)
        except ValueError:
            return False
        if not isinstance(obj, dict) or "uuid" in obj or obj.get("type") in ("user", "assistant"):
            return False
    try:
        path.unlink()
    except OSError:
        return False
    return True


def unsent_prompt(native_id: str, native_path: str | None, after_ms: float) -> str | None:
    """The prompts typed in this session (its id, its project folder) after `after_ms`,
    from Claude's history.jsonl in the transcript's home; None when there is none, or one
    holds pasted content (its text is not in the row). Commands are left out."""
    if not native_path:
        return None
    transcript = Path(native_path)
    rows = [r for r in _history_rows(transcript.parents[2] / HISTORY)
            if r.get("sessionId") == native_id and isinstance(r.get("display"), str)
            and isinstance(r.get("project"), str) and project_slug(r["project"]) == transcript.parent.name
            and isinstance(r.get("timestamp"), (int, float)) and r["timestamp"] > after_ms]
    if not rows or any(r.get("pastedContents") for r in rows):
        return None
    rows = [r for r in rows if not r["display"].lstrip().startswith(NOT_PROMPTS)]
    return "\n\n".join(r["display"] for r in rows) or None


def _history_rows(path: Path) -> list[dict]:
    try:
        with open(path, "rb") as handle:
            handle.seek(max(0, os.fstat(handle.fileno()).st_size - HISTORY_TAIL))
            data = handle.read()
    except OSError:
        return []
    rows = []
    for line in data.splitlines():
        try:
            obj = json.loads(line)
        except ValueError:
            continue  # the first, cut line of the tail; a torn last one
        if isinstance(obj, dict):
            rows.append(obj)
    return rows


def latest_ms(records: list[Record]) -> float:
    """The newest timestamp of the transcript rows (epoch ms), 0 when none has one."""
    from datetime import datetime

    latest = 0.0
    for obj in json_objects(records):
        stamp = obj.get("timestamp")
        if isinstance(stamp, str):
            try:
                latest = max(latest, datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp() * 1000)
            except ValueError:
                continue
    return latest
