"""The current turn of a transcript whose records carry a parent chain (Claude Code's
`uuid`/`parentUuid`, Pi's `id`/`parentId`). Pure: records in, records out.

The conversation is the path from the leaf back to the root, and file order is not always
chain order: the Claude Code 2.1.197 TUI was seen writing a turn's Bash `tool_use` row
before the turn's prompt row (e2e test_tui_kill_during_shell_tool_goes_on). A turn cut by
file order from the prompt on then misses that call, sees no dangling call, and the model
is asked for the same step again. So the turn's prompt is the first prompt on the chain
from the last leaf, and the turn is that prompt with everything that hangs from it, each
record after its parent."""

from __future__ import annotations

from ..models import Record

PROMPT = "user"  # the kind the wrappers give a user prompt (Parsed.kind)


def last_leaf(records: list[Record]) -> Record | None:
    """The last record, in file order, with an id that no record names as its parent."""
    parents = {r.parent_id for r in records if r.parent_id}
    return next((r for r in reversed(records) if r.native_id and r.native_id not in parents), None)


def chain_prompt(records: list[Record]) -> Record | None:
    """The prompt nearest the last leaf on its path back to the root; None without a chain
    (Codex records carry ids but no parents)."""
    if not any(r.parent_id for r in records):
        return None
    by_id = {r.native_id: r for r in records if r.native_id}
    current, seen = last_leaf(records), set()
    while current is not None and current.native_id not in seen:
        if current.kind == PROMPT:
            return current
        seen.add(current.native_id)
        current = by_id.get(current.parent_id)
    return None


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
    file-order prompt at byte offset `start`): the chain prompt, what hangs from it and
    everything written after it, parent first. Without a chain (records carry no ids, or
    no prompt on the leaf's path), the file slice from `start`, as before."""
    prompt = chain_prompt(window)
    if prompt is None:
        return [r for r in window if r.offset >= start]
    keep = descendants(window, prompt)
    at = window.index(prompt)
    return parent_first([r for i, r in enumerate(window) if i >= at or i in keep])
