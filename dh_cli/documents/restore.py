"""A rebuild puts documents back in the harness's own form where the harness keeps them
outside the transcript (Claude Code: tasks/<session>/<id>.json), when that form is missing."""

from __future__ import annotations

from pathlib import Path

from .. import events


def restore_documents(world, wrapper, session) -> list[str]:
    """Paths written (relative to the harness home); nothing when the harness keeps no
    documents outside its session files, or they are still there."""
    if not session.home or not session.harness_session_id:
        return []
    if "/" in session.harness_session_id or session.harness_session_id in (".", ".."):
        return []  # not an id that can name a folder (it came from the log)

    def document(kind: str):
        """Called by a wrapper that keeps documents outside its session files, and only for
        one that is missing: replaying reads the whole session, and imports pydantic."""
        from .build import session_documents

        return session_documents(world, wrapper, session.id).get(kind)

    written = wrapper.write_documents(Path(session.home), session.harness_session_id, document)
    if written:
        events.add(world, session.id, events.documents_restored(written))
    return written
