"""What hides a session from Claude Code's `claude --resume` picker although its transcript is
there, and the one change that makes the picker list it: the wrapper's part of
`dh restore --unhide`.

The picker's rule, read in 2.1.197 and 2.1.332 (the session loader of both): a transcript's
`entrypoint` is the first `"entrypoint":"…"` in its first 64 KiB (then the same with a space
after the colon), else the last one in its last 64 KiB; a session whose entrypoint is an SDK
one (`sdk-cli`, what `claude -p` writes; `sdk-ts`, `sdk-py`) is left out of the list unless
the picker itself runs from the SDK. `claude --resume ID` resumes it all the same. The change
is that one value, to `cli` (what an interactive `claude` writes): the record it stands in
must parse before and after with nothing else changed, or dh refuses."""

from __future__ import annotations

import json
from dataclasses import dataclass

SDK_ENTRYPOINTS = frozenset({"sdk-cli", "sdk-ts", "sdk-py"})
LISTED_ENTRYPOINT = "cli"
WINDOW = 65536  # the head and the tail the picker reads of each transcript
FORMS = ('"entrypoint":"', '"entrypoint": "')


@dataclass
class Unhidden:
    data: bytes  # the transcript as the picker lists it
    line: int  # 1-based: the record whose field changed
    field: str
    old: str
    new: str


def picker_entrypoint(data: bytes) -> tuple[str, int, int] | None:
    """(value, start, end) of the entrypoint the picker reads: byte positions of the value
    between its quotes; None when the transcript names none."""
    head = data[:WINDOW]
    for form in FORMS:
        found = _value_at(head, head.find(form.encode()), form)
        if found:
            return found
    tail_start = max(0, len(data) - WINDOW)
    last = max(((data.rfind(f.encode(), tail_start), f) for f in FORMS), key=lambda p: p[0])
    return _value_at(data, last[0], last[1])


def _value_at(data: bytes, at: int, form: str) -> tuple[str, int, int] | None:
    if at < 0:
        return None
    start = end = at + len(form.encode())
    while end < len(data) and data[end:end + 1] != b'"':
        end += 2 if data[end:end + 1] == b"\\" else 1
    try:
        return json.loads(data[start - 1:end + 1]), start, end
    except ValueError:
        return None


def hidden_by(data: bytes) -> str | None:
    """The SDK entrypoint that hides the transcript from the picker (None: it lists it)."""
    found = picker_entrypoint(data)
    return found[0] if found and found[0] in SDK_ENTRYPOINTS else None


def unhidden(data: bytes) -> Unhidden | None:
    """The transcript with the entrypoint the picker reads set to `cli`; None when the picker
    lists it already. ValueError when that value is not the top-level field of one record."""
    found = picker_entrypoint(data)
    if not found or found[0] not in SDK_ENTRYPOINTS:
        return None
    old, start, end = found
    changed = data[:start] + LISTED_ENTRYPOINT.encode() + data[end:]
    line_start = data.rfind(b"\n", 0, start) + 1
    line_end = data.find(b"\n", start)
    line_end = len(data) if line_end < 0 else line_end
    before = _record(data[line_start:line_end])
    after = _record(changed[line_start:line_end - (end - start) + len(LISTED_ENTRYPOINT)])
    if before.get("entrypoint") != old or after != {**before, "entrypoint": LISTED_ENTRYPOINT}:
        raise ValueError("the entrypoint the picker reads is not a record's own field")
    if hidden_by(changed):
        raise ValueError("the picker would still read an SDK entrypoint")
    return Unhidden(changed, data.count(b"\n", 0, start) + 1, "entrypoint", old, LISTED_ENTRYPOINT)


def _record(line: bytes) -> dict:
    try:
        obj = json.loads(line)
    except ValueError:
        return {}
    return obj if isinstance(obj, dict) else {}
