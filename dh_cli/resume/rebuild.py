"""Write a session's native state back from the log, byte-exact, under the harness's own
layout: each source as its store rebuilds it (stores/). The file-writing helpers live in
stores/files.py and are re-exported here."""

from __future__ import annotations

from pathlib import Path

from ..confine import session_home
from ..models import Session
from ..stores import store_of
from ..stores.files import (RebuiltFile, safe_target, source_bytes, write_file,  # noqa: F401 (re-exported)
                            write_parts)
from ..worlds.log import Log


def rebuild_session(world: Log, session: Session, to_dir: Path | None = None,
                    force: bool = False, env: dict | None = None) -> list[RebuiltFile]:
    """Without to_dir, into the session's harness home on this machine (confine.py): its
    recorded place, or for a session from a world this machine's configured home."""
    from ..wrappers import get as get_wrapper

    wrapper = get_wrapper(session.harness)
    home = Path(to_dir) if to_dir else session_home(world, wrapper, session, env)
    store = store_of(wrapper)
    out = []
    for source in world.sources(session.id):
        rebuilt = store.rebuild(world, wrapper, session, source, home, to_dir, force)
        if rebuilt is not None:
            out.append(rebuilt)
    return out
