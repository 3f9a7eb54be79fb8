"""The log's reads for its human views (`dh log list`, the OTLP trace, prices, a turn's
start): SQL over the log's tables stays inside worlds/, and the views get plain rows."""

from __future__ import annotations

import sqlite3
from contextlib import contextmanager
from typing import Callable, Iterator

from .rows import STORED_RAW

# Linear in the log: a session's record count from the (session_id, tool_call_id) index
# alone, its last activity from the last record of each of its sources (an index seek per
# source). With 10,008 sessions and 239,080 records, MAX(ts) over every record with the
# counts joined in took 0.7 s; these per-session lookups take 0.4 s.
_SESSION_SUMMARIES = """
    SELECT s.id, s.harness, s.harness_session_id, s.harness_version, s.cwd, s.host, s.state,
           s.attempts, s.created_at, s.updated_at,
           (SELECT COUNT(*) FROM records r WHERE r.session_id = s.id) AS records,
           COALESCE(strftime('%Y-%m-%dT%H:%M:%fZ',
                             (SELECT MAX((SELECT r.ts FROM records r WHERE r.source_id = o.id
                                          AND r.ts IS NOT NULL
                                          ORDER BY r.generation DESC, r."offset" DESC LIMIT 1))
                              FROM sources o WHERE o.session_id = s.id) / 1000.0, 'unixepoch'),
                    s.updated_at) AS last_activity
    FROM sessions s
    WHERE (:harness IS NULL OR s.harness = :harness) AND (:state IS NULL OR s.state = :state)
      AND (:cwd IS NULL OR s.cwd = :cwd OR s.cwd LIKE :under ESCAPE '\\')
    ORDER BY last_activity DESC, s.id DESC"""

# The records that open a turn in each session's main source (its first), latest generation,
# each record logged in versions (an OpenCode message) counted at its first (turn_marks): the
# `turns` view's `marked` rows (worlds/migrations.py m037), in the source's order.
_TURN_STARTS = """
    SELECT m.session_id, strftime('%Y-%m-%dT%H:%M:%fZ', r.ts / 1000.0, 'unixepoch'), r.native_id
    FROM (SELECT o.session_id, o.id AS source_id,
                 (SELECT MAX(x.generation) FROM records x WHERE x.source_id = o.id) AS generation
          FROM sources o WHERE o.id IN (SELECT MIN(id) FROM sources {where} GROUP BY session_id)) m
         JOIN records r
           ON r.source_id = m.source_id AND r.generation = m.generation AND r.turn_start = 1
    ORDER BY m.session_id, r."offset"
"""

# dh's resumes that went on with a cut turn, as the `turns` view reads them
_CUT_RESUMES = """
    SELECT session_id, at FROM events WHERE type = 'resume_plan'
      AND COALESCE(json_extract(details, '$.cut'), json_extract(details, '$.continues') <> '') = 1
      {where}
    ORDER BY session_id, at"""

# The model calls of many sessions, as the model_calls view counts them (one read of the view
# for the list, in place of one per session).
_CALL_ROWS = """
    SELECT session_id, model, COALESCE(tokens_in, 0), COALESCE(tokens_cache_read, 0),
           COALESCE(tokens_cache_write, 0), tokens_cache_write_1h, COALESCE(tokens_out, 0),
           tokens_reasoning FROM model_calls {where}"""

# The same calls summed per session and model, each model's first call first (the order the
# calls would be read in).
_CALL_SUMS = """
    SELECT session_id, model, COUNT(*), SUM(COALESCE(tokens_in, 0)),
           SUM(COALESCE(tokens_cache_read, 0)), SUM(COALESCE(tokens_cache_write, 0)),
           SUM(tokens_cache_write_1h), SUM(COALESCE(tokens_out, 0)), SUM(tokens_reasoning)
    FROM model_calls {where} GROUP BY session_id, model ORDER BY session_id, MIN(record_id)"""

# One session's model calls as the model_calls view counts them, read source by source at
# each source's latest generation through the records' (source, generation, offset) index,
# and sorted by message id only where OpenCode's rule needs it (a message's last version
# wins): 0.34 s for the 200,832 records of one session, against 1.2 s through the view, which
# looks every record's generation up apart and sorts every source by message id.
_ONE_SESSION_CALLS = """
    WITH latest AS (
      SELECT o.id AS source_id, o.kind, (SELECT MAX(x.generation) FROM records x
                                         WHERE x.source_id = o.id) AS generation
      FROM sources o WHERE o.session_id = ?),
    marked AS (
      SELECT {columns}, LEAD(r.msg_id) OVER (PARTITION BY r.source_id ORDER BY r."offset") AS next
      FROM latest l JOIN records r ON r.source_id = l.source_id AND r.generation = l.generation
      WHERE l.kind IS NOT 'opencode' AND (r.tokens_in IS NOT NULL OR r.turn_start = 1)
      UNION ALL
      SELECT {columns}, LEAD(r.msg_id) OVER (PARTITION BY r.source_id ORDER BY r.msg_id, r."offset")
      FROM latest l JOIN records r ON r.source_id = l.source_id AND r.generation = l.generation
      WHERE l.kind = 'opencode' AND (r.tokens_in IS NOT NULL OR r.turn_start = 1))
    SELECT {{shown}} FROM marked
    WHERE tokens_in IS NOT NULL AND (msg_id IS NULL OR next IS NOT msg_id)
    {{order}}""".format(columns="r.id, r.msg_id, r.model, r.tokens_in,"
                                         " r.tokens_cache_read, r.tokens_cache_write,"
                                         " r.tokens_cache_write_1h, r.tokens_out, r.tokens_reasoning")
_CALL_COUNTS = [f"COALESCE({c}, 0)" for c in ("tokens_in", "tokens_cache_read", "tokens_cache_write",
                                              "tokens_cache_write_1h", "tokens_out", "tokens_reasoning")]

QUICK_WRITE_MS = 100  # how long a list waits for the write lock to keep the digests it made


# The first FIRST_ROWS user and text records of each session's first source, as
# first_prompt_rows reads one session's: numbered from the records' (source, generation, kind,
# offset) index alone (SQLite's own choice looked up every record's kind: 0.29 s against 0.06 s
# on a 200,832-record session), their bytes read for those alone (all 50,208 were, 0.4 s).
FIRST_ROWS = 50
_FIRST_SOURCE_PROMPTS = f"""
    SELECT f.session_id, {STORED_RAW.replace('raw', 'r.raw').replace('packed', 'r.packed')}, r.codec
    FROM (SELECT o.session_id, r.id, ROW_NUMBER() OVER (PARTITION BY o.id
                                                        ORDER BY r.generation, r."offset") AS n
          FROM sources o JOIN records r INDEXED BY records_by_kind ON r.source_id = o.id
          WHERE o.id IN (SELECT MIN(id) FROM sources {{where}} GROUP BY session_id)
            AND r.kind IN ('user', 'text')) f
    JOIN records r ON r.id = f.id
    WHERE f.n <= {FIRST_ROWS}
    ORDER BY f.session_id, f.n
"""


def _by_session(rows) -> dict[str, list[tuple]]:
    calls: dict[str, list[tuple]] = {}
    for session_id, *call in rows:
        calls.setdefault(session_id, []).append(tuple(call))
    return calls


def _missing(session_ids: list[str], kept: dict) -> list[str]:
    return [sid for sid in dict.fromkeys(session_ids) if sid not in kept]


class LocalViews:
    def session_summaries(self, harness: str | None, state: str | None, cwd: str | None,
                          under: str | None) -> list[dict]:
        """Sessions with their record count and last activity, most recent first; `under`
        is a LIKE pattern (escaped with a backslash) for the folders below cwd."""
        cursor = self.conn.execute(_SESSION_SUMMARIES, {"harness": harness, "state": state,
                                                        "cwd": cwd, "under": under})
        names = [d[0] for d in cursor.description]
        return [dict(zip(names, row)) for row in cursor]

    def session_names(self) -> list[tuple[str, str | None]]:
        """(dh id, harness id) of every session."""
        return self.conn.execute("SELECT id, harness_session_id FROM sessions").fetchall()

    def first_prompt_rows(self, session_id: str, limit: int = FIRST_ROWS) -> Iterator[tuple]:
        """(raw as stored, codec) of the session's first user and text records."""
        return self.conn.execute(
            f"SELECT {STORED_RAW}, codec FROM records WHERE session_id = ? AND kind IN ('user', 'text')"
            " ORDER BY source_id, generation, \"offset\" LIMIT ?", [session_id, limit])

    def first_source_prompts(self, session_ids: list[str] | None = None) -> Iterator[tuple]:
        """(session id, raw as stored, codec) of the user and text records of each session's
        first source (every session's, or those named), a session's rows together in order:
        one query for a list, where one per session took 0.5 s for 10,008 sessions."""
        where, args = "", []
        if session_ids is not None:
            where, args = f"WHERE session_id IN ({', '.join('?' * len(session_ids))})", session_ids
        return self.conn.execute(_FIRST_SOURCE_PROMPTS.format(where=where), args)

    def calls_by_session(self, session_ids: list[str] | None = None) -> dict[str, list[tuple]]:
        """session id -> (model, then the counts of tokens.KINDS) of each of its model calls:
        every session's, or those named (each read apart, as call_sums reads them)."""
        if session_ids is None:
            return self._by_session(_CALL_ROWS, None)
        return {sid: calls for sid in session_ids if (calls := list(self.model_call_tokens(sid)))}

    def call_sums(self, session_ids: list[str] | None = None) -> dict[str, list[tuple]]:
        """session id -> (model, its calls, then their sums of tokens.KINDS) for each model
        the session called: every session's, or those named (read one by one: the view read
        a 200,832-record session's in 2.8 s of a list page's 3.9 s, model_call_sums in 0.4)."""
        if session_ids is None:
            return self._by_session(_CALL_SUMS, None)
        return {sid: sums for sid in session_ids if (sums := self.model_call_sums(sid))}

    def _by_session(self, sql: str, session_ids: list[str] | None) -> dict[str, list[tuple]]:
        """The rows of `sql` (its {where} filled in) grouped by their first column, the
        session id: every session's, or those named."""
        if session_ids is None:
            return _by_session(self.conn.execute(sql.format(where="")))
        found: dict[str, list[tuple]] = {}
        for at in range(0, len(session_ids), 500):  # SQLite's limit on bound values
            part = session_ids[at:at + 500]
            where = f"WHERE session_id IN ({', '.join('?' * len(part))})"
            found.update(_by_session(self.conn.execute(sql.format(where=where), part)))
        return found

    def session_digests(self, session_ids: list[str], rules: str,
                        make: Callable[[list[str]], dict[str, tuple[str, str]]]) -> dict[str, tuple[str, str]]:
        """session id -> (title, calls as JSON) of each named session: the digests kept by a
        dh of these `rules`, and make(the others), kept when the log can be written at once."""
        kept = self._kept_digests(session_ids, rules)
        if not _missing(session_ids, kept):
            return kept
        with self._quick_write() as writable:
            if writable:  # what another list kept meanwhile
                kept = self._kept_digests(session_ids, rules)
            missing = _missing(session_ids, kept)
            made = make(missing) if missing else {}
            if writable and made:
                self._keep_digests(made, rules)
        return {**kept, **made}

    def _keep_digests(self, made: dict[str, tuple[str, str]], rules: str) -> None:
        try:
            self.conn.executemany(
                "INSERT OR REPLACE INTO session_digests (session_id, rules, title, calls)"
                " VALUES (?, ?, ?, ?)", [(sid, rules, *made[sid]) for sid in made])
        except sqlite3.Error:  # a read-only file, a full disk: made again next time
            pass

    def _kept_digests(self, session_ids: list[str], rules: str) -> dict[str, tuple[str, str]]:
        where, args = "WHERE rules = ?", [rules]
        if len(session_ids) <= 500:  # SQLite's limit on bound values; past it, read them all
            where += f" AND session_id IN ({', '.join('?' * len(session_ids))})"
            args += session_ids
        return {sid: (title, calls) for sid, title, calls in self.conn.execute(
            f"SELECT session_id, title, calls FROM session_digests {where}", args)}

    @contextmanager
    def _quick_write(self):
        """A write transaction if one can be had within QUICK_WRITE_MS (yields True), else
        nothing to write in (yields False): a read-only log (`dh serve`), a log another dh
        holds, a full disk. Whatever fails to be kept is made again next time."""
        if self._read_only:
            yield False
            return
        waited = self.conn.execute("PRAGMA busy_timeout").fetchone()[0]
        self.conn.execute(f"PRAGMA busy_timeout = {QUICK_WRITE_MS}")
        try:
            self.conn.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError:
            begun = False
        else:
            begun = True
        finally:
            self.conn.execute(f"PRAGMA busy_timeout = {waited}")
        if not begun:
            yield False
            return
        try:
            yield True
        except BaseException:
            self._roll_back()
            raise
        try:
            self.conn.execute("COMMIT")
        except sqlite3.Error:
            self._roll_back()

    def ts_range(self, session_id: str) -> tuple[int | None, int | None]:
        """The first and last record time of the session (epoch ms)."""
        return self.conn.execute("SELECT MIN(ts), MAX(ts) FROM records WHERE session_id = ?",
                                 [session_id]).fetchone()

    def last_model(self, session_id: str) -> str | None:
        """The model the session's newest record names, read from the records alone: the
        model_calls view sorts every record's bytes (seconds on a 200k-record session), and a
        page asks this on every refresh of a waiting session."""
        row = self.conn.execute("SELECT model FROM records WHERE session_id = ? AND model IS NOT NULL"
                                " ORDER BY id DESC LIMIT 1", [session_id]).fetchone()
        return row[0] if row else None

    def model_call_tokens(self, session_id: str) -> Iterator[tuple]:
        """(model, then the counts of tokens.KINDS) of each model call."""
        return self.conn.execute(_ONE_SESSION_CALLS.format(shown=f"model, {', '.join(_CALL_COUNTS)}",
                                                          order="ORDER BY id"),
                                 [session_id])

    def model_call_sums(self, session_id: str) -> list[tuple]:
        """(model, calls, then the sums of tokens.KINDS) of each model the session called,
        in the order of their first calls."""
        return self.conn.execute(_ONE_SESSION_CALLS.format(
            shown=f"model, COUNT(*), {', '.join(f'SUM({c})' for c in _CALL_COUNTS)}",
            order="GROUP BY model ORDER BY MIN(id)"), [session_id]).fetchall()

    def model_call_usage(self) -> Iterator[tuple]:
        """(session id, harness, at, model, then the counts of tokens.KINDS, then the session's
        native id and the call's source id) of every model call in the log."""
        return self.conn.execute(
            "SELECT m.session_id, m.harness, m.at, m.model, COALESCE(m.tokens_in, 0),"
            " COALESCE(m.tokens_cache_read, 0), COALESCE(m.tokens_cache_write, 0),"
            " m.tokens_cache_write_1h, COALESCE(m.tokens_out, 0), m.tokens_reasoning,"
            " s.harness_session_id, m.source_id FROM model_calls m JOIN sessions s ON s.id = m.session_id")

    def last_turn_start(self, source_id: int, generation: int | None) -> int | None:
        """The offset of the last record marked as opening a turn."""
        return self.conn.execute(
            "SELECT MAX(\"offset\") FROM records WHERE source_id = ? AND generation = ?"
            " AND turn_start = 1", [source_id, generation]).fetchone()[0]

    # what `dh serve` follows ----------------------------------------------------------------
    def records_after(self, session_id: str, after_id: int, limit: int) -> tuple[list[tuple], int]:
        """(id, kind, ts, raw as stored, codec) of the session's records with an id above
        `after_id`, in id order (the order they were committed), and the id to read after
        next time: the log's largest id at this read once every record up to it was handed
        out (ids grow in commit order: one writer at a time). Walked by the primary key (the
        session's own index would sort all its records at each read)."""
        top = self.conn.execute("SELECT COALESCE(MAX(id), 0) FROM records").fetchone()[0]
        start = after_id
        if not after_id:  # from the start: from just before the session's first record
            first = self.conn.execute("SELECT MIN(id) FROM records WHERE session_id = ?",
                                      [session_id]).fetchone()[0]
            start = (first or top + 1) - 1
        rows = self.conn.execute(
            f"SELECT id, kind, ts, {STORED_RAW}, codec FROM records"
            " WHERE id > ? AND id <= ? AND +session_id = ? ORDER BY id LIMIT ?",
            [start, top, session_id, limit]).fetchall()
        return rows, rows[-1][0] if len(rows) == limit else top

    def attempt_rows(self, session_id: str) -> list[dict]:
        """The session's rows of the `attempts` view, in order."""
        cursor = self.conn.execute("SELECT * FROM attempts WHERE session_id = ? ORDER BY attempt",
                                   [session_id])
        names = [d[0] for d in cursor.description]
        return [dict(zip(names, row)) for row in cursor]

    def last_ids(self, session_id: str) -> tuple[int, int]:
        """(the log's largest record id, the session's last event seq)."""
        return self.conn.execute(
            "SELECT (SELECT COALESCE(MAX(id), 0) FROM records),"
            " (SELECT COALESCE(MAX(seq), 0) FROM events WHERE session_id = ?)", [session_id]).fetchone()

    def change_stamp(self) -> tuple:
        """Changes whenever a session, record or event is added or a session's row changes."""
        return self.conn.execute(
            "SELECT (SELECT COUNT(*) FROM sessions), (SELECT MAX(updated_at) FROM sessions),"
            " (SELECT MAX(id) FROM records), (SELECT MAX(rowid) FROM events)").fetchone()

    def harness_names(self) -> list[str]:
        return [r[0] for r in self.conn.execute("SELECT DISTINCT harness FROM sessions ORDER BY 1")]

    def turn_marks(self, session_ids: list[str] | None) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
        """({session id: when each record that opens a turn was written, in the order of its main
        source's latest generation (a record logged in versions counted once)}, {session id:
        when each resume that went on with a cut turn was planned}), of the named sessions (None:
        every one). logviews/sessionlist.py turn_counts reads them as the `turns` view does."""
        where, args = "", []
        if session_ids is not None:
            where, args = f"WHERE session_id IN ({', '.join('?' * len(session_ids))})", session_ids
        starts: dict[str, list[str]] = {sid: [] for sid in session_ids or ()}
        seen: set[tuple[str, str]] = set()  # (session, native id) of a record met already
        for sid, at, native in self.conn.execute(_TURN_STARTS.format(where=where), args):
            if native is None or (sid, native) not in seen:
                starts.setdefault(sid, []).append(at)
                seen.add((sid, native))
        cuts: dict[str, list[str]] = {}
        for sid, at in self.conn.execute(_CUT_RESUMES.format(where=where.replace("WHERE", "AND")), args):
            cuts.setdefault(sid, []).append(at)
        return starts, cuts

    def resumes_kept(self, session_ids: list[str]) -> dict[str, int]:
        """session id -> the finished calls its resumes kept."""
        marks = ", ".join("?" * len(session_ids))
        kept = dict(self.conn.execute(
            f"SELECT session_id, SUM(json_extract(details, '$.kept')) FROM events"
            f" WHERE session_id IN ({marks}) AND type = 'resume_plan' GROUP BY session_id", session_ids))
        return {sid: kept.get(sid) or 0 for sid in session_ids}

