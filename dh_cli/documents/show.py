"""`dh log docs` output: each document's current items, then how it changed."""

from __future__ import annotations

from .. import output
from .models import Document

MARKS = {"completed": "[x]", "in_progress": "[~]", "pending": "[ ]"}


def print_documents(docs: dict[str, Document]) -> None:
    if not docs:
        output.note("dh: no todo list, plan or tasks in this session")
        return
    for kind, doc in docs.items():
        output.out.print(f"{kind} ({len(doc.items)} item(s), {len(doc.history)} edit(s))", markup=False)
        if doc.explanation:
            output.out.print(f"  {doc.explanation}", markup=False)
        for item in doc.items:
            label = f"#{item.id} " if item.id and kind == "tasks" else ""
            output.out.print(f"  {MARKS.get(item.status, '[?]')} {label}{item.content}"
                             f"{'' if item.status in MARKS else f' ({item.status})'}", markup=False)
        output.out.print("  history:", markup=False)
        for entry in doc.history:
            output.out.print(f"    {_edit_line(entry)}", markup=False)


def _edit_line(entry) -> str:
    edit = entry.edit
    return f"{edit.tool} {edit.call_id}: {edit_summary(edit)} [{where(entry.record)}]"


def where(ref) -> str:
    """The record that made an edit: its source file, generation and byte offset."""
    return f"{ref.source.rsplit('/', 1)[-1]}@{ref.generation}:{ref.offset}"


def edit_summary(edit) -> str:
    """What one edit did, in a line (shared by `dh log docs` and the HTML export)."""
    if not edit.accepted:
        return f"refused by the harness ({edit.why or 'error'})"
    if edit.op == "replace":
        return ", ".join(f"{i.content} [{i.status}]" for i in edit.items) or "(empty)"
    if edit.op == "create":
        return "added " + ", ".join(f"#{i.id} {i.content}" for i in edit.items)
    return f"#{edit.item_id}: " + ", ".join(f"{k}={v}" for k, v in edit.changes.items())
