"""The current turn of a transcript whose records carry a parent chain (Claude Code's
`uuid`/`parentUuid`, Pi's `id`/`parentId`). Pure: records in, records out.

The conversation is the path from the leaf back to the root, and file order is not always
chain order: the Claude Code 2.1.197 TUI was seen writing a turn's Bash `tool_use` row
before the turn's prompt row (e2e test_tui_kill_during_shell_tool_goes_on). A turn cut by
file order from the prompt on then misses that call, sees no dangling call, and the model
is asked for the same step again. So the turn is its prompt (the last prompt row) with
everything that hangs from it by the chain, wherever it was written, and everything written
after it, each record after its parent: the last record is then the leaf the harness resumes
from, and the path from it back to the prompt is all there. (The prompt is taken by file
order, not as the first prompt on the leaf's path: a side row chained to an old row would
otherwise make the turn reach back over earlier turns.)"""

from __future__ import annotations

from ..models import Record


def descendants(records: list[Record], root: Record) -> set[int]:
    """Indexes of the records that hang from root (root included)."""
    children: dict[str, list[int]] = {}
    for index, record in enumerate(records):
        if record.parent_id:
            children.setdefault(record.parent_id, []).append(index)
    found, todo = {records.index(root)}, [root.native_id]
    while todo:
        for index in children.pop(todo.pop(), []):
            if index not in found:
                found.add(index)
                todo.append(records[index].native_id)
    return found


def parent_first(records: list[Record]) -> list[Record]:
    """The records in file order, except that one written before its parent moves to just
    after it (so the last record is the leaf the harness resumes from)."""
    ids = {r.native_id for r in records if r.native_id}
    out, placed, waiting = [], set(), {}
    for record in records:
        parent = record.parent_id
        if parent in ids and parent not in placed and parent != record.native_id:
            waiting.setdefault(parent, []).append(record)
            continue
        todo = [record]
        while todo:
            current = todo.pop(0)
            out.append(current)
            if current.native_id:
                placed.add(current.native_id)
                todo[:0] = waiting.pop(current.native_id, [])
    out.extend(r for group in waiting.values() for r in group)  # a loop of parents: kept, last
    return out


def chain_turn(window: list[Record], start: int) -> list[Record]:
    """The current turn among `window` (records in file order, from somewhat before the
    prompt row at byte offset `start`): the prompt, what hangs from it and everything
    written after it, parent first. Without a chain (Codex records carry ids but no
    parents) or without an id on the prompt, the file slice from `start`, as before."""
    at = next((i for i, r in enumerate(window) if r.offset >= start), len(window))
    prompt = window[at] if at < len(window) else None
    if prompt is None or not prompt.native_id or not any(r.parent_id for r in window):
        return window[at:]
    keep = descendants(window, prompt)
    return parent_first([r for i, r in enumerate(window) if i >= at or i in keep])
