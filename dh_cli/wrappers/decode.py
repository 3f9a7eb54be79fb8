"""Decoding the harnesses' native records: one JSONL line to an object (bad bytes flagged,
never fatal), the text of a message content, the first record of a session file. Shared by
every wrapper (base.py re-exports these names)."""

from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path

try:  # orjson parses the log's hot path several times faster; json is the fallback
    from orjson import loads as _fast_loads
except ImportError:  # pragma: no cover - orjson is a declared dependency
    _fast_loads = json.loads


def regular_file(path: Path) -> bool:
    """True for a regular file (a FIFO or device at a session's path must never be opened
    for reading: that can block)."""
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except (OSError, ValueError):
        return False


MAX_DEPTH = 10_000  # deeper nesting overflows the C stack of the JSON parsers (a crash)
_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.S)
_BRACKETS = bytes(range(256)).translate(None, b"[]{}")


def too_deep(raw: bytes) -> bool:
    """True when the line nests arrays/objects deeper than MAX_DEPTH (brackets inside
    strings do not count). Cheap unless the line holds that many opening brackets."""
    if raw.count(b"[") + raw.count(b"{") <= MAX_DEPTH:
        return False
    depth = top = 0
    for byte in _STRING.sub(b"", raw).translate(None, _BRACKETS):
        depth += 1 if byte in (0x5B, 0x7B) else -1
        top = max(top, depth)
    return top > MAX_DEPTH


def load_json(raw: bytes) -> tuple[object | None, list[str]]:
    """Decode one native line; bad bytes are flagged, never fatal."""
    flags = []
    if b"\x00" in raw:
        flags.append("nul")
    if len(raw) > MAX_DEPTH and too_deep(raw):  # a shorter line cannot nest that deep
        return None, flags + ["too_deep"]
    try:
        return _fast_loads(raw), flags  # strict: rejects invalid UTF-8 as well as bad JSON
    except ValueError:
        pass
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        flags.append("bad_utf8")
        text = raw.decode("utf-8", errors="replace")
    try:
        return json.loads(text), flags
    except RecursionError:
        return None, flags + ["too_deep"]
    except ValueError:
        flags.append("bad_json")
        return None, flags


def text_of(content) -> str:
    """Plain text of a message content that is a string or a list of blocks."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    parts = []
    for block in content:
        if isinstance(block, dict) and isinstance(block.get("text"), str):
            parts.append(block["text"])
        elif isinstance(block, str):
            parts.append(block)
    return "\n".join(parts)


def first_record(path: Path, limit: int = 1 << 20):
    """The first line of a regular file as a JSON object; None when it is not one;
    `...` when the line is not complete yet (no newline within the limit)."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return None
        with open(path, "rb") as handle:
            line = handle.readline(limit)
        if not line.endswith(b"\n"):
            return ... if len(line) < limit else None
        obj = json.loads(line)
    except (OSError, ValueError):
        return None
    return obj if isinstance(obj, dict) else None
