"""Full-text search over the log (`dh log search`): the FTS5 table `record_text` holds the
text of each record's prose, tool inputs and outputs (rowid = records.id; contentless, so
snippets are cut from the record itself)."""

from __future__ import annotations

import re
import sqlite3
from dataclasses import dataclass

from ..errors import UnknownHarness
from ..redact import mask
from ..wrappers import get as get_wrapper
from ..wrappers.base import search_text
from .rows import STORED_RAW, decode_raw

INDEX_TEXT = ("INSERT INTO record_text (rowid, text) SELECT id, ?4 FROM records"
              " WHERE source_id = ?1 AND generation = ?2 AND \"offset\" = ?3 AND id > ?5")
INDEX_TEXT_AT = "INSERT INTO record_text (rowid, text) VALUES (?, ?)"


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
    words = _words(text)
    return " ".join('"' + w.replace('"', '""') + '"' for w in words)


def _words(text: str) -> list[str]:
    """The words FTS5's unicode61 tokenizer makes of text: letters and digits (an underscore
    separates, so GITHUB_TOKEN is two words, and one quoted term of two words would be a
    phrase query, which a detail=none index refuses)."""
    return re.findall(r"[^\W_]+", text)


_HITS = f"""
    SELECT r.session_id, s.harness, o.relpath, r.at, r.kind,
           (SELECT COUNT(*) FROM records x WHERE x.source_id = r.source_id
              AND x.generation = r.generation AND x.turn_start = 1 AND x."offset" <= r."offset"),
           {STORED_RAW.replace('raw', 'r.raw').replace('packed', 'r.packed')}, r.codec
    FROM record_text t JOIN records r ON r.id = t.rowid
         JOIN sessions s ON s.id = r.session_id JOIN sources o ON o.id = r.source_id
    WHERE record_text MATCH :query AND (:harness IS NULL OR s.harness = :harness)
      AND (:since IS NULL OR r.at >= :since) AND (:session IS NULL OR r.session_id = :session)
    ORDER BY rank LIMIT :limit"""


def search(conn: sqlite3.Connection, text: str, harness: str | None = None,
           since: str | None = None, limit: int = 50, session: str | None = None) -> list[Hit]:
    """Records whose text holds every word of `text`, best matches first (FTS5's bm25);
    of one session's records alone when `session` is given."""
    from ..errors import UsageError

    query = fts_query(text)
    if not query:
        raise UsageError(f"nothing to search for in {text!r}", hint="give one or more words")
    rows = conn.execute(_HITS, {"query": query, "harness": harness, "since": since,
                                "limit": limit, "session": session}).fetchall()
    words = _words(text)
    return [_hit(row, words) for row in rows]


def _hit(row, words: list[str]) -> Hit:
    session_id, harness, relpath, at, kind, turn, stored, codec = row
    try:
        found = search_text(get_wrapper(harness).parse(decode_raw(stored, codec))) or ""
    except UnknownHarness:
        found = ""
    # masked whole, before the cut: a key cut mid-way loses the prefix the masker knows it by
    return Hit(session_id, harness, relpath, turn, at, kind, snippet(mask(found), words))


def snippet(text: str, words: list[str], width: int = 160) -> str:
    """The part of `text` around the first of `words`, on one line."""
    flat = " ".join(text.split())
    lower = flat.lower()
    spots = [i for i in (lower.find(w.lower()) for w in words) if i >= 0]
    at = min(spots) if spots else 0
    start = max(0, at - 24)  # a little context before the word, most of it after
    piece = flat[start:start + width]
    return ("…" if start else "") + piece + ("…" if start + width < len(flat) else "")
