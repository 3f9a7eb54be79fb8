"""The one confinement rule for every path dh derives from data (issue 14), without the log:
what a relpath may be, which file a source may be read from or written to on this machine,
and which values of a session row are this machine's. confine.py applies it to the log.

Rows of a world (`home`, `cwd`, `host`, `native_path`, a source's `path`) are never trusted.
Every native path is `home / relpath`, the relpath checked (relative, no `..`, no NUL, no
symlink on the way), for JSONL and OpenCode sources alike; the only other path dh reads is one
its own mirror recorded on this machine (`mirrored_paths`)."""

from __future__ import annotations

import os
import socket
from pathlib import Path, PurePosixPath

from .errors import NativeStateError
from .models import Session


class Refused(NativeStateError):
    """A path or id from the log that would leave dh's lane."""


def checked_relpath(relpath) -> PurePosixPath:
    """The relpath as parts under a home: refused when absolute, empty, with `..`, NUL or
    a backslash (a Windows separator a harness never writes)."""
    if not isinstance(relpath, str) or not relpath or "\0" in relpath or "\\" in relpath:
        raise Refused(f"refusing unsafe path {relpath!r} from the log")
    rel = PurePosixPath(relpath)
    parts = [p for p in rel.parts if p != "."]
    if rel.is_absolute() or not parts or ".." in parts:
        raise Refused(f"refusing unsafe path {relpath!r} from the log")
    return PurePosixPath(*parts)


def under(home: Path, relpath: str) -> Path:
    """home/relpath, refusing a relpath that leaves home: checked as text, then every
    existing step below home must be a real folder (or the final file), never a symlink."""
    rel = checked_relpath(relpath)
    home = Path(home)
    step = home
    for part in rel.parts:
        step = step / part
        if step.is_symlink():
            raise Refused(f"refusing path {relpath!r}: {step} is a symlink (it leaves {home})")
        if not step.exists():
            break
    if not inside(step if step.exists() else home, home):
        raise Refused(f"refusing path {relpath!r}: it leaves {home}")
    return home / rel


def inside(path: Path, root: Path) -> bool:
    """True when path, every symlink followed, stays under root."""
    try:
        return Path(path).resolve().is_relative_to(Path(root).resolve())
    except (OSError, RuntimeError, ValueError):  # a symlink loop, a NUL byte
        return False


def home_here(wrapper, decided: tuple[str, str | None] | None, env: dict | None = None) -> Path:
    """The harness home of a session here: its recorded place (`decided`, from the log), else
    the configured one."""
    if decided:
        return Path(decided[0])
    return Path(wrapper.home(dict(os.environ) if env is None else env))


def source_file(wrapper, home: Path, relpath: str, row_path: str | None, mirrored: str | None,
                placed: bool) -> Path:
    """The one file a source may be read from or written to on this machine: the file this
    machine's own mirror recorded for it (e.g. Pi's --session-dir), when the session has a
    place here and the row still names that file; else the wrapper's file under the home
    (home/relpath checked; OpenCode's: the home)."""
    checked_relpath(relpath)
    if mirrored and mirrored == row_path and placed:
        return Path(mirrored)
    return wrapper.source_file(home, relpath)


def settled_values(session: Session, home: str, cwd: str | None, main: str | None) -> dict | None:
    """The row values that put a session back at its place here (home, cwd, the main source's
    file, this host), or None when the row already holds them."""
    if (session.home, session.cwd, session.native_path) == (home, cwd, main):
        return None
    return {"home": home, "cwd": cwd, "native_path": main, "host": socket.gethostname()}


def check_native_id(wrapper, native_id) -> str:
    """The harness's own session id, refused unless it has that harness's id shape: it is
    put on the harness's command line, and a world or a transcript chose it."""
    if not isinstance(native_id, str) or not wrapper.native_id_ok(native_id):
        shown = repr(native_id)[:80]
        raise Refused(f"refusing session id {shown} from the log: not a {wrapper.name} session id")
    return native_id
