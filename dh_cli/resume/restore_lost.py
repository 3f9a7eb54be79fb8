"""`dh restore`: put a session the harness lost back where the harness itself looks for it, so
that the harness alone (without dh) lists it and resumes it with its whole conversation.
Each source goes back as its store does it (stores/restore_files.py for JSONL files,
`opencode import` for OpenCode's rows), into the folder the wrapper says the harness uses
(`Wrapper.restore_relpath`). Only sessions dh ran or imported on this machine are restored,
into their recorded home: paths never come from record contents."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from .. import events
from ..confine import confined_source, place
from ..errors import DhError
from ..models import Session, Source
from ..stores import store_of
from ..stores.lost import lost_sessions, restore_command
from ..wrappers.base import Wrapper
from .prepare import _launch_binary
from .unhide import hidden_change


@dataclass
class Restoring:
    session: str  # dh id
    harness: str
    native_id: str | None
    why: str | None  # what the harness lost ("gone", "shorter"); None: it has the session
    status: str  # lost | would restore | restored | present | not here | failed
    files: list[dict] = field(default_factory=list)
    resume: str | None = None  # the harness's own command that goes on with it
    error: str | None = None
    listed: dict | None = None  # the harness's own list made to show it (Wrapper.relist)
    hidden: dict | None = None  # present, but its picker hides it: what --unhide would change

    def to_dict(self) -> dict:
        return asdict(self)


def find_lost(world) -> list[Restoring]:
    """Every session placed here whose harness no longer has its native state."""
    found = lost_sessions(world)
    out = []
    for sid in sorted(found, key=lambda s: world.get_session(s).created_at):
        session = world.get_session(sid)
        out.append(Restoring(sid, session.harness, session.harness_session_id, found[sid], "lost"))
    return out


def restore_sessions(world, sessions: list[Session], force: bool = False, dry_run: bool = False,
                     harness=None) -> list[Restoring]:
    """Each session put back (or what would be, with dry_run); a session the harness still
    has is left alone. `harness`: (binary argv, environment) for a store that runs the
    harness's own import, by default the binary dh would launch."""
    lost = lost_sessions(world, {s.id for s in sessions})
    return [restore_one(world, s, lost.get(s.id), force, dry_run, harness) for s in sessions]


def restore_one(world, session: Session, why: str | None, force: bool, dry_run: bool,
                harness=None) -> Restoring:
    from ..wrappers import get as get_wrapper

    wrapper = get_wrapper(session.harness)
    done = Restoring(session.id, wrapper.name, session.harness_session_id, why, "present")
    if place(world, session.id) is None:
        done.status = "not here"  # from another machine: `dh resume` adopts it first
        done.error = f"not run on this machine: `dh resume {session.id}` brings it here"
        return done
    if why is None:
        done.hidden = hidden_change(world, session)
        return done  # the harness has it: never touched
    launch = lambda: harness or _launch_binary(wrapper)  # noqa: E731 - found only when needed
    try:
        if dry_run:
            done.files = _bring_back(world, wrapper, session, force, dry_run, launch)
        else:
            with world.lock_session(session.id):  # never under a dh that runs it
                done.files = _bring_back(world, wrapper, session, force, dry_run, launch)
                done.listed = _relist(world, wrapper, session, done.files, launch)
    except DhError as exc:
        done.status, done.error = "failed", f"{exc} ({exc.hint})" if exc.hint else str(exc)
        return done
    done.status = _overall(done.files)
    done.resume = native_resume(wrapper, session, done.files)
    return done


def _bring_back(world, wrapper: Wrapper, session: Session, force: bool, dry_run: bool,
                launch) -> list[dict]:
    store = store_of(wrapper)
    files = []
    for source in world.sources(session.id):
        source = _where_harness_looks(world, wrapper, session, source)
        files.append(store.bring_back(world, wrapper, session, source, launch, force, dry_run))
        if not dry_run and files[-1]["status"] in ("restored", "replaced"):
            events.add(world, session.id, events.rebuilt({**files[-1], "by": "dh restore"}))
    return files


def _relist(world, wrapper: Wrapper, session: Session, files: list[dict], launch) -> dict | None:
    """Where the harness lists its sessions from an index of its own, the restored session
    is put in it by the harness (only when something was written back)."""
    if _overall(files) not in ("restored", "replaced"):
        return None
    return wrapper.relist(Path(place(world, session.id)[0]), session.harness_session_id, launch)


def _where_harness_looks(world, wrapper: Wrapper, session: Session, source: Source) -> Source:
    """The confined source, in the folder the harness uses now (its relpath checked)."""
    confined = confined_source(world, wrapper, session, source)
    home = Path(place(world, session.id)[0])
    relpath = wrapper.restore_relpath(home, source.relpath, session.cwd)
    if relpath == source.relpath:
        return confined
    return replace(confined, relpath=relpath, path=str(wrapper.source_file(home, relpath)))


def _overall(files: list[dict]) -> str:
    statuses = {f["status"] for f in files}
    return next((s for s in ("replaced", "restored", "would restore") if s in statuses), "present")


def native_resume(wrapper: Wrapper, session: Session, files: list[dict]) -> str | None:
    """The harness's own command that goes on with the session, as text."""
    import shlex

    if not session.harness_session_id:
        return None
    main = session.native_path
    try:
        argv = wrapper.resume_args([], session.harness_session_id, main, None, False)
    except (NotImplementedError, DhError):
        return None
    return shlex.join([wrapper.binary, *argv])


__all__ = ["Restoring", "find_lost", "restore_sessions", "restore_command"]
