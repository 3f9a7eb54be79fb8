"""The log's reads for its human views (`dh log list`, the OTLP trace, prices, a turn's
start): SQL over the log's tables stays inside worlds/, and the views get plain rows."""

from __future__ import annotations

from typing import Iterator

from .rows import STORED_RAW

_SESSION_SUMMARIES = """
    SELECT s.id, s.harness, s.harness_session_id, s.cwd, s.state, s.attempts, s.created_at,
           s.updated_at, COALESCE(a.records, 0) AS records,
           COALESCE(strftime('%Y-%m-%dT%H:%M:%fZ', a.last_ts / 1000.0, 'unixepoch'), s.updated_at)
             AS last_activity
    FROM sessions s LEFT JOIN (SELECT session_id, COUNT(*) AS records, MAX(ts) AS last_ts
                               FROM records GROUP BY session_id) a ON a.session_id = s.id
    WHERE (:harness IS NULL OR s.harness = :harness) AND (:state IS NULL OR s.state = :state)
      AND (:cwd IS NULL OR s.cwd = :cwd OR s.cwd LIKE :under ESCAPE '\\')
    ORDER BY last_activity DESC, s.id DESC"""


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

    def first_prompt_rows(self, session_id: str, limit: int = 50) -> Iterator[tuple]:
        """(raw as stored, codec) of the session's first user and text records."""
        return self.conn.execute(
            f"SELECT {STORED_RAW}, codec FROM records WHERE session_id = ? AND kind IN ('user', 'text')"
            " ORDER BY source_id, generation, \"offset\" LIMIT ?", [session_id, limit])

    def ts_range(self, session_id: str) -> tuple[int | None, int | None]:
        """The first and last record time of the session (epoch ms)."""
        return self.conn.execute("SELECT MIN(ts), MAX(ts) FROM records WHERE session_id = ?",
                                 [session_id]).fetchone()

    def model_call_tokens(self, session_id: str) -> Iterator[tuple]:
        """(model, then the counts of tokens.KINDS) of each model call."""
        return self.conn.execute(
            "SELECT model, COALESCE(tokens_in, 0), COALESCE(tokens_cache_read, 0),"
            " COALESCE(tokens_cache_write, 0), tokens_cache_write_1h, COALESCE(tokens_out, 0),"
            " tokens_reasoning FROM model_calls WHERE session_id = ?", [session_id])

    def model_call_usage(self) -> Iterator[tuple]:
        """(session id, harness, at, model, then the counts of tokens.KINDS, then the session's
        native id) of every model call in the log."""
        return self.conn.execute(
            "SELECT m.session_id, m.harness, m.at, m.model, COALESCE(m.tokens_in, 0),"
            " COALESCE(m.tokens_cache_read, 0), COALESCE(m.tokens_cache_write, 0),"
            " m.tokens_cache_write_1h, COALESCE(m.tokens_out, 0), m.tokens_reasoning,"
            " s.harness_session_id FROM model_calls m JOIN sessions s ON s.id = m.session_id")

    def model_call_offsets(self, source_id: int) -> set[int]:
        """The offsets of the source's records that the log counts as model calls."""
        return {row[0] for row in self.conn.execute(
            'SELECT "offset" FROM model_calls WHERE source_id = ?', [source_id])}

    def last_turn_start(self, source_id: int, generation: int | None) -> int | None:
        """The offset of the last record marked as opening a turn."""
        return self.conn.execute(
            "SELECT MAX(\"offset\") FROM records WHERE source_id = ? AND generation = ?"
            " AND turn_start = 1", [source_id, generation]).fetchone()[0]
