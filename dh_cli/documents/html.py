"""The documents of a session in the HTML export: a column beside the trace with each
document's current items and its history, every edit naming the record that made it (source
file, generation, byte offset) and linking to its tool call when that call is on the page."""

from __future__ import annotations

import html
from datetime import datetime, timezone

from ..redact import mask
from .models import Document, HistoryEntry
from .show import MARKS, edit_summary, where

TITLES = {"todos": "Todo list", "plan": "Plan", "tasks": "Tasks"}

CSS = """
body:has(.layout){max-width:92rem}.layout{display:grid;grid-template-columns:minmax(0,1fr) 19rem;gap:1rem;align-items:start}
aside.docs{position:sticky;top:.5rem;max-height:calc(100vh - 1rem);overflow:auto;font-size:.85rem}
aside.docs section.doc{background:#fff;border:1px solid #ddd;border-radius:8px;margin:1rem 0;
padding:.5rem .7rem}aside.docs h3{font-size:.95rem;margin:0 0 .3rem}
ul.items{list-style:none;margin:.2rem 0;padding:0}ul.items li{padding:.1rem 0}
ul.items .box{font-family:ui-monospace,monospace;margin-right:.35rem}
li.status-completed{color:#555;text-decoration:line-through}li.status-in_progress{font-weight:600}
ol.history{margin:.2rem 0;padding-left:1.2rem;color:#444}ol.history li{margin:.2rem 0}
ol.history li.refused{color:#b3261e}ol.history code{font-size:.75rem;background:#eee;padding:0 .2rem}
"""


def _e(text) -> str:
    """Masked (redact.py) on the text, before escaping turns its quotes into entities."""
    return html.escape(mask("" if text is None else str(text)))


def aside(docs: dict[str, Document], calls: dict[str, int]) -> str:
    """The column; `calls` maps the tool calls drawn on this page to their turn."""
    if not docs:
        return ""
    body = "".join(_document(kind, doc, calls) for kind, doc in docs.items())
    return f'<aside class="docs" id="documents">\n<h2>Documents</h2>\n{body}</aside>\n'


def _document(kind: str, doc: Document, calls: dict[str, int]) -> str:
    head = (f'<section class="doc" data-kind="{_e(kind)}"><h3>{_e(TITLES.get(kind, kind))} '
            f'<span class="sum">{len(doc.items)} item(s) · {len(doc.history)} edit(s)</span></h3>\n')
    explanation = f'<p class="meta">{_e(doc.explanation)}</p>\n' if doc.explanation else ""
    items = "".join(_item(kind, item) for item in doc.items) or '<li class="none">(empty)</li>'
    history = "".join(_edit(entry, calls) for entry in doc.history)
    return (head + explanation + f'<ul class="items">{items}</ul>\n'
            f'<details class="history" open><summary>History</summary>'
            f'<ol class="history">{history}</ol></details></section>\n')


def _item(kind: str, item) -> str:
    label = f"#{item.id} " if item.id and kind == "tasks" else ""
    status = "" if item.status in MARKS else f" ({item.status})"
    return (f'<li class="item status-{_e(item.status)}" data-status="{_e(item.status)}">'
            f'<span class="box">{_e(MARKS.get(item.status, "[?]"))}</span>'
            f'{_e(label)}{_e(item.content)}{_e(status)}</li>')


def _edit(entry: HistoryEntry, calls: dict[str, int]) -> str:
    edit, ref = entry.edit, entry.record
    call = f"{edit.tool} {edit.call_id}"
    if edit.call_id in calls:
        call = f'<a href="#call-{_e(edit.call_id)}">{_e(call)}</a> (turn {calls[edit.call_id]})'
    else:
        call = _e(call)
    refused = "" if edit.accepted else ' class="refused"'
    return (f'<li{refused} data-call="{_e(edit.call_id)}" data-record="{_e(where(ref))}">'
            f'{call}: {_e(edit_summary(edit))} <code title="record: source@generation:offset">'
            f'{_e(where(ref))}</code>{_e(_when(ref.ts))}</li>')


def _when(ts) -> str:
    if not isinstance(ts, int):
        return ""
    stamp = datetime.fromtimestamp(ts / 1000, timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
    return f" at {stamp} UTC"
