"""`dh restore --unhide`: a session whose file the harness has but whose own picker leaves it
out (Claude Code hides sessions its first record says the SDK or `-p` started) is made
listable under the harness's own rule, by the one change its wrapper names
(`Wrapper.unhidden`). That rewrites the session's provenance, so it is asked for by name
only, says which field of which line of which file went from what to what, keeps the
file's original bytes beside it (stores/restore_files.py, as `--force` does) and leaves the
log's records as they were: the changed file is mirrored as a new generation of its source,
the way dh keeps any rewrite of a native file. A session no picker hides is never touched,
so a second run changes nothing."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

from .. import events
from ..confine import confined_source, place
from ..errors import DhError, NativeStateError
from ..models import Session
from ..stores.files import write_file
from ..stores.lost import lost_sessions, native_mains, restore_command
from ..stores.restore_files import fresh_mtime, keep_beside


@dataclass
class Unhiding:
    session: str  # dh id
    harness: str
    native_id: str | None
    status: str  # unhidden | would unhide | not hidden | lost | not here | failed (refused)
    change: dict | None = None  # {"path", "line", "field", "from", "to"[, "kept"]}
    error: str | None = None

    def to_dict(self) -> dict:
        return asdict(self)


def unhide_sessions(world, sessions: list[Session], dry_run: bool = False) -> list[Unhiding]:
    lost = lost_sessions(world, {s.id for s in sessions})
    return [unhide_one(world, s, s.id in lost, dry_run) for s in sessions]


def unhide_one(world, session: Session, lost: bool, dry_run: bool) -> Unhiding:
    from ..wrappers import get as get_wrapper

    wrapper = get_wrapper(session.harness)
    done = Unhiding(session.id, wrapper.name, session.harness_session_id, "not hidden")
    if place(world, session.id) is None or not world.sources(session.id):
        done.status = "not here"
        done.error = f"not run on this machine: `dh resume {session.id}` brings it here"
        return done
    if lost:
        done.status = "lost"
        done.error = f"the harness lost it: `{restore_command(session.id)}` first"
        return done
    try:
        if dry_run:
            _unhide(world, wrapper, session, done, dry_run)
        else:
            with world.lock_session(session.id):  # never under a dh that runs it
                _unhide(world, wrapper, session, done, dry_run)
    except DhError as exc:
        done.status, done.error = "failed", f"{exc} ({exc.hint})" if exc.hint else str(exc)
    return done


def _unhide(world, wrapper, session: Session, done: Unhiding, dry_run: bool) -> None:
    main = confined_source(world, wrapper, session, world.sources(session.id)[0])
    path = Path(main.path)
    data = _read(path)
    try:
        change = wrapper.unhidden(data)
    except ValueError as exc:
        raise NativeStateError(f"cannot make {path} listed exactly: {exc}") from None
    if change is None:
        _said_hidden(world, wrapper, session)
        return  # its picker lists it: never touched
    done.change = {"path": str(path), "line": change.line, "field": change.field,
                   "from": change.old, "to": change.new}
    done.status = "would unhide"
    if dry_run:
        return
    done.change["kept"] = str(keep_beside(path, data))
    write_file(path, change.data, force=True)
    fresh_mtime(path)
    events.add(world, session.id, events.unhidden(done.change))
    _mirror(world, wrapper, session)
    done.status = "unhidden"


def _said_hidden(world, wrapper, session: Session) -> None:
    """A harness whose picker filter dh cannot lift: refused, not reported as listed."""
    if wrapper.unhides_picker:
        return
    argv = native_mains(world, [session.id]).get(session.id, (None,) * 7)[6]
    why = wrapper.picker_hides(json.loads(argv)) if argv else None
    if why:
        raise NativeStateError(f"{why}, and dh does not change what {wrapper.name} filters on",
                               hint="the harness still resumes it by its id")


def hidden_change(world, session: Session) -> dict | None:
    """What `dh restore --unhide` would change in a session present here (None: its picker
    lists it, or it is not here)."""
    return unhide_one(world, session, False, dry_run=True).change


def _mirror(world, wrapper, session: Session) -> None:
    """The changed file into the log as a new generation (the tailer sees the rewrite)."""
    from ..mirror.session import SessionMirror

    SessionMirror(world, wrapper, session).sync()


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise NativeStateError(f"cannot read {path}: {exc.strerror}") from None
