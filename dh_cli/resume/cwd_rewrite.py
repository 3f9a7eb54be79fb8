"""Rewrite the working directory a native record carries, for a session moved to another
checkout. Pure: bytes in, bytes out. Only the string values that hold the cwd are touched
(which ones the harness's wrapper says: `Wrapper.carries_cwd`); every other byte of the line stays as the
harness wrote it, so the rewritten line differs from the original in those values alone.

A path under the old cwd moves with it (`/old/sub` becomes `/new/sub`), and so does its
`file://` form and a tag naming it inside a text (`<cwd>/old</cwd>`, `<root>/old</root>`)."""

from __future__ import annotations

import json
import re
from json.decoder import scanstring
from typing import Callable

Path_ = tuple  # the keys (and list indexes) leading to a value; "<json>" enters a JSON text
Carrier = Callable[[dict, Path_], bool]

_WS = re.compile(r"[ \t\n\r]*")
_ATOM = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][-+]?\d+)?|true|false|null")
_NEEDS_SCAN = re.compile(r'["\\\x00-\x1f]')


# ---- locating string values in a JSON text ----------------------------------------------------
def string_spans(text: str) -> list[tuple[Path_, int, int, str]]:
    """(path, start, end, value) of every string value in a JSON text; start/end span the
    literal with its quotes. Keys are not values. Raises ValueError on bad JSON."""
    out: list = []
    end = _value(text, _skip(text, 0), (), out)
    if _skip(text, end) != len(text):
        raise ValueError("trailing data")
    return out


def _skip(text: str, i: int) -> int:
    return _WS.match(text, i).end()


def _value(text: str, i: int, path: Path_, out: list) -> int:
    ch = text[i:i + 1]
    if ch == '"':
        value, end = scanstring(text, i + 1)
        out.append((path, i, end, value))
        return end
    if ch == "{":
        return _members(text, i, path, out, "}", _member)
    if ch == "[":
        return _members(text, i, path, out, "]", _element)
    atom = _ATOM.match(text, i)
    if atom is None:
        raise ValueError(f"bad JSON at {i}")
    return atom.end()


def _members(text: str, i: int, path: Path_, out: list, close: str, one) -> int:
    i, n = _skip(text, i + 1), 0
    if text[i:i + 1] == close:
        return i + 1
    while True:
        i = _skip(text, one(text, i, path, out, n))
        if text[i:i + 1] == close:
            return i + 1
        if text[i:i + 1] != ",":
            raise ValueError(f"bad JSON at {i}")
        i, n = _skip(text, i + 1), n + 1


def _member(text: str, i: int, path: Path_, out: list, _n: int) -> int:
    if text[i:i + 1] != '"':
        raise ValueError(f"bad JSON at {i}")
    key, i = scanstring(text, i + 1)
    i = _skip(text, i)
    if text[i:i + 1] != ":":
        raise ValueError(f"bad JSON at {i}")
    return _value(text, _skip(text, i + 1), path + (key,), out)


def _element(text: str, i: int, path: Path_, out: list, n: int) -> int:
    return _value(text, i, path + (n,), out)


# ---- moving a path ----------------------------------------------------------------------------
def moved_path(value: str, old: str, new: str) -> str:
    """The value with a leading old cwd (bare or as a file:// URL) replaced by the new one."""
    for prefix in ("", "file://"):
        head = prefix + old
        if value == head or value.startswith(head + "/"):
            return prefix + new + value[len(head):]
    return value


def moved_tags(value: str, old: str, new: str) -> str:
    """The text with every tag body that is the old cwd, or a path under it, moved."""
    pattern = re.compile(">" + re.escape(old) + "(?=[</])")
    return pattern.sub(lambda _m: ">" + new, value)


def moved(value: str, old: str, new: str) -> str:
    result = moved_path(value, old, new)
    return moved_tags(result, old, new) if result == value else result


# ---- rewriting a record -----------------------------------------------------------------------
def rewrite_record(raw: bytes, carrier: Carrier, old: str, new: str) -> bytes:
    """The record with the cwd it carries (where `carrier(obj, path)`, the wrapper's
    carries_cwd, says) moved from old to new; the same bytes when it carries none (or is not
    a JSON object: such a line is kept as the harness wrote it)."""
    if old == new or (not _NEEDS_SCAN.search(old) and old.encode() not in raw):
        return raw
    try:
        text = raw.decode("utf-8")
        obj = json.loads(text)
    except (UnicodeDecodeError, ValueError, RecursionError):
        return raw
    if not isinstance(obj, dict):
        return raw
    try:
        out = _rewrite_text(text, obj, (), carrier, old, new)
    except (ValueError, RecursionError):
        return raw
    return raw if out == text else out.encode("utf-8")


def _rewrite_text(text: str, top: dict, base: Path_, carrier: Carrier, old: str, new: str) -> str:
    pieces, last = [], 0
    for path, start, end, value in string_spans(text):
        literal = _new_literal(text[start:end], value, top, base + path, carrier, old, new)
        if literal is not None:
            pieces += [text[last:start], literal]
            last = end
    return "".join(pieces) + text[last:] if pieces else text


def _new_literal(literal: str, value: str, top: dict, path: Path_, carrier: Carrier,
                 old: str, new: str) -> str | None:
    """The replacement for one string literal, or None to keep it."""
    nested = _nested(value, top, path, carrier, old, new)
    if nested is not None:
        return _literal_for(literal, value, nested, old, new)
    if not carrier(top, path):
        return None
    changed = moved(value, old, new)
    return None if changed == value else _literal_for(literal, value, changed, old, new)


def _is_json_text(value: str) -> bool:
    return value[:1] in ("{", "[")


def _nested(value: str, top: dict, path: Path_, carrier: Carrier, old: str, new: str) -> str | None:
    """A string holding JSON (OpenCode's `data` column): its own values rewritten, or None."""
    if not _is_json_text(value) or old not in value:
        return None
    try:
        inner = _rewrite_text(value, top, path + ("<json>",), carrier, old, new)
    except ValueError:
        return None
    return inner if inner != value else None


def _literal_for(literal: str, value: str, changed: str, old: str, new: str) -> str:
    """The JSON literal for `changed`, escaped the way `literal` (for `value`) was: canonical
    escaping gives the same bytes back; anything else gets the old path's escaped form
    replaced in place, checked to decode to `changed`."""
    if json.dumps(value, ensure_ascii=False) == literal:
        return json.dumps(changed, ensure_ascii=False)
    if json.dumps(value) == literal:
        return json.dumps(changed)
    for escape in (lambda s: json.dumps(s, ensure_ascii=False)[1:-1], lambda s: json.dumps(s)[1:-1]):
        candidate = literal.replace(escape(old), escape(new))
        if json.loads(candidate) == changed:
            return candidate
    return json.dumps(changed, ensure_ascii=False)
