"""A bounded view of a huge native line: every JSON string in it longer than a limit cut to
that limit and marked, so a view parses a few kilobytes where the line holds a 200 MB tool
result. orjson made each string of such a line a str as long as it, and the views held
several (a 213 MB line cost `dh log show` 1.6 GB). The native bytes stay as they are: this is
only ever what a view reads."""

from __future__ import annotations

import re

# a JSON string literal (possessive: no backtracking state over a 100 MB string)
_STRING = re.compile(rb'"[^"\\]*+(?:\\.[^"\\]*+)*+"', re.S)
# whole characters and escapes of a string's body, to cut it between two of them
_KEY_END = re.compile(rb"[ \t\r\n]*:")  # a string followed by a colon is a key: kept whole
_BODY = re.compile(rb'(?:[^"\\]++|\\u[0-9a-fA-F]{4}|\\[^u])*+')

# What the mirror parses of a line for its columns and search text: a string value past this is
# cut (ids, names, token counts and flags are never that long). A 213 MB tool result parsed
# whole made two strs as long as the line, and the search text a third.
INDEXED = 1 << 20


def clipped_json(raw: bytes, limit: int) -> bytes:
    """raw with each string value longer than `limit` bytes cut after at most `limit` of them (at
    a whole escape and a whole UTF-8 character) and ended by a note of what was left out.
    A line with no such string comes back as the same object."""
    parts, start = [], 0
    for match in _STRING.finditer(raw):
        if match.end() - match.start() - 2 <= limit or _KEY_END.match(raw, match.end()):
            continue
        cut = _cut(raw, match.start() + 1, limit)
        parts += [raw[start:cut], _note(match.end() - 1 - cut), b'"']
        start = match.end()
    if not parts:
        return raw
    parts.append(raw[start:])
    return b"".join(parts)


def bounded(raw: bytes, limit: int | None) -> bytes:
    """clipped_json for a line longer than `limit` (a shorter one cannot hold a longer
    string: it is not scanned); raw itself without a limit."""
    return raw if limit is None or len(raw) <= limit else clipped_json(raw, limit)


def _cut(raw: bytes, body: int, limit: int) -> int:
    cut = _BODY.match(raw, body, body + limit).end()
    while cut > body and raw[cut] & 0xC0 == 0x80:  # inside a character: before it
        cut -= 1
    return cut


def _note(left_out: int) -> bytes:
    return f" \u2026 [{left_out:,} more bytes not shown: the native record has them]".encode()
