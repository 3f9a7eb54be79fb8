"""Full-text search over the log (`dh log search`): the FTS5 table `record_text` holds the
text of each record's prose, tool inputs and outputs (rowid = records.id; contentless, so
snippets are cut from the record itself)."""

from __future__ import annotations

import re
import sqlite3
from dataclasses import dataclass

from ..errors import UnknownHarness
from ..wrappers import get as get_wrapper
from ..wrappers.base import search_text
from .local import STORED_RAW, decode_raw

INDEX_TEXT = ("INSERT INTO record_text (rowid, text) SELECT id, ?4 FROM records"
              " WHERE source_id = ?1 AND generation = ?2 AND \"offset\" = ?3 AND id > ?5")


def index_records(conn: sqlite3.Connection, after_id: int = 0) -> int:
    """Index records with an id above `after_id` by parsing them again through their
    harness's wrapper (records that came without their text: older logs, pulled rows)."""
    rows = conn.execute(
        f"SELECT r.id, s.harness, {STORED_RAW.replace('raw', 'r.raw').replace('packed', 'r.packed')},"
        " r.codec FROM records r JOIN sessions s ON s.id = r.session_id WHERE r.id > ?"
        " ORDER BY r.id", [after_id])
    added = 0
    while batch := rows.fetchmany(1000):
        texts = [(row_id, text) for row_id, text in map(_text_of, batch) if text]
        conn.executemany("INSERT INTO record_text (rowid, text) VALUES (?, ?)", texts)
        added += len(texts)
    return added


def _text_of(row) -> tuple[int, str | None]:
    row_id, harness, stored, codec = row
    try:
        wrapper = get_wrapper(harness)
    except UnknownHarness:
        return row_id, None
    return row_id, search_text(wrapper.parse(decode_raw(stored, codec)))


@dataclass
class Hit:
    session_id: str
    harness: str
    source: str
    turn: int
    at: str | None
    kind: str | None
    snippet: str

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def fts_query(text: str) -> str:
    """The user's words as an FTS5 query of quoted terms (all must match), so that quotes,
    colons or operators in what they typed are searched for, not parsed."""
    words = re.findall(r"\w+", text)
    return " ".join('"' + w.replace('"', '""') + '"' for w in words)
