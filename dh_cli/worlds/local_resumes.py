"""The log's reads for what dh's relaunches cost and saved (logviews/resumecost.py
ResumedCalls): the journal of every session dh launched again or resumed with a cut turn,
and each one's main source, in two queries for the whole log, so `dh log cost` and the cost
page of `dh serve` price the resumes from the calls they read anyway, never from the records."""

from __future__ import annotations

import json

from ..models import Event

# the sessions that have a resume to price: a launch after the first, or a resume of a cut turn
_RESUMED = """
    SELECT DISTINCT session_id FROM events
    WHERE (type = 'launched' AND attempt > 1) OR type = 'resume_plan'"""


class LocalResumes:
    """Mixed into LocalWorld: needs self.conn."""

    def resumed_journals(self) -> dict[str, tuple[int | None, list[Event]]]:
        """session id -> (its main source's id, its events in order) of each session that dh
        launched more than once or resumed."""
        journals: dict[str, tuple[int | None, list[Event]]] = {}
        mains = dict(self.conn.execute(
            f"SELECT session_id, MIN(id) FROM sources WHERE session_id IN ({_RESUMED})"
            " GROUP BY session_id"))
        for row in self.conn.execute(
                "SELECT session_id, seq, at, attempt, type, phase, details FROM events"
                f" WHERE session_id IN ({_RESUMED}) ORDER BY session_id, seq"):
            journals.setdefault(row[0], (mains.get(row[0]), []))[1].append(
                Event(*row[:6], json.loads(row[6] or "{}")))
        return journals
