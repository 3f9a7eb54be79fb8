"""Replaying a session's document edits from the log."""

from __future__ import annotations

from .models import Document, Edit, HistoryEntry, Item, RecordRef


def session_documents(world, wrapper, session_id: str) -> dict[str, Document]:
    """kind -> the document as the session's last edit left it, with its history. Records of
    the latest generation of each source, in log order; a call answered twice (a row updated
    in place, a repair) counts once."""
    docs: dict[str, Document] = {}
    calls: dict[str, object] = {}  # the document tools' calls
    done: set[str] = set()
    names = [name.encode() for name in wrapper.document_tools]
    waiting: set[bytes] = set()  # the ids of the document calls met and not answered yet

    def may_edit(raw: bytes) -> bool:
        """Whether the record can hold a document tool's call (its name is in the bytes) or
        the result of one waiting (its id is): the others are not parsed. Asked in order."""
        return _holds(raw, names) or _holds(raw, waiting)

    for source in world.sources(session_id) if names else ():
        generation = world.latest_generation(source.id)
        for record in world.records_kept(session_id, source.id, generation, may_edit):
            parsed = wrapper.parse(record.raw)
            for call in parsed.tool_calls:
                if call.name in wrapper.document_tools and call.id not in calls:
                    calls[call.id] = call
                    waiting.add(call.id.encode())
            for result in parsed.tool_results:
                call = calls.get(result.call_id)
                if call is None or result.call_id in done:
                    continue
                edit = wrapper.document_edit(call, result)
                if edit is not None:
                    done.add(result.call_id)
                    waiting.discard(result.call_id.encode())
                    ref = RecordRef(source=source.relpath, generation=record.generation,
                                    offset=record.offset, ts=record.ts)
                    apply(docs.setdefault(edit.kind, Document(kind=edit.kind)), edit, ref)
    return docs


def _holds(raw: bytes, needles) -> bool:
    for needle in needles:
        if needle in raw:
            return True
    return False


def apply(doc: Document, edit: Edit, ref: RecordRef) -> None:
    doc.history.append(HistoryEntry(edit=edit, record=ref))
    if not edit.accepted:
        return
    if edit.op == "replace":
        doc.items = [item.model_copy() for item in edit.items]
        doc.explanation = edit.explanation
    elif edit.op == "create":
        doc.items += [item.model_copy() for item in edit.items]
    elif edit.op == "update":
        _update(doc, edit)


def _update(doc: Document, edit: Edit) -> None:
    for index, item in enumerate(doc.items):
        if item.id == edit.item_id:
            if edit.changes.get("status") == "deleted":
                del doc.items[index]
            else:
                doc.items[index] = Item.model_validate({**item.model_dump(), **edit.changes})
            return
