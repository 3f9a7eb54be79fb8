"""A rebuild puts documents back in the harness's own form where the harness keeps them
outside the transcript (Claude Code: tasks/<session>/<id>.json), when that form is missing."""

from __future__ import annotations

from pathlib import Path


def restore_documents(world, wrapper, session) -> list[str]:
    """Paths written (relative to the harness home); nothing when the harness keeps no
    documents outside its session files, or they are still there."""
    if not session.home or not session.harness_session_id:
        return []
    if type(wrapper).write_documents is _base_write():
        return []
    from .build import session_documents  # pydantic: only when a harness keeps such files

    if "/" in session.harness_session_id or session.harness_session_id in (".", ".."):
        return []  # not an id that can name a folder (it came from the log)
    # lazily: replaying the documents reads the whole session, wanted only when files are missing
    written = wrapper.write_documents(Path(session.home), session.harness_session_id,
                                      lambda kind: session_documents(world, wrapper, session.id).get(kind))
    if written:
        world.add_event(session.id, "documents_restored", {"files": written}, phase="outcome")
    return written


def _base_write():
    from ..wrappers.base import Wrapper

    return Wrapper.write_documents
