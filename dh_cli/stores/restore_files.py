"""`dh restore` for the JSONL store: a session file the harness lost (deleted, or cut shorter
than the log's copy) is written back from the log, byte-exact, where the harness looks for
it. A file the harness still has (as long as the log's copy or longer) is never touched; a
shorter file that is not the start of the log's copy (the harness went on without dh) is
replaced only when forced, its bytes kept beside it under a name no harness reads as a
session (no `.jsonl` ending)."""

from __future__ import annotations

import os
import time
from pathlib import Path

from ..errors import NativeStateError, RebuildConflict
from ..models import Source
from .files import source_bytes, write_file

KEPT_SUFFIX = ".dh-kept"  # Claude Code, Codex and Pi read only `*.jsonl` in their folders


def file_lost(path: str, logged: int) -> str | None:
    """Why the harness no longer has the file (one stat): "gone", "shorter", or None."""
    try:
        size = os.stat(path).st_size
    except FileNotFoundError:
        return "gone"
    except OSError:
        return None  # unreadable: not known to be lost
    return "shorter" if size < logged else None


def bring_back_file(world, source: Source, force: bool, dry_run: bool = False) -> dict:
    """Write the (confined) source's file back from the log when the harness lost it; what
    was done: {"path", "status": present | restored | replaced | would restore, ...}."""
    path = Path(source.path)
    logged = source_bytes(world, source)
    found = _read(path)
    if found is not None and len(found) >= len(logged):
        return {"path": source.relpath, "status": "present"}
    differs = found is not None and not logged.startswith(found)
    if differs and not force:
        raise RebuildConflict(f"{path} differs from the log: the harness went on without dh",
                              hint="pass --force to replace it (its bytes are kept beside it)")
    if dry_run:
        return {"path": source.relpath, "status": "would restore", "bytes": len(logged)}
    kept = keep_beside(path, found) if differs else None
    write_file(path, logged, force=True)
    fresh_mtime(path)
    done = {"path": source.relpath, "status": "replaced" if kept else "restored", "bytes": len(logged)}
    return done | ({"kept": str(kept)} if kept else {})


def keep_beside(path: Path, data: bytes) -> Path:
    """The replaced file's bytes, under a name that does not exist yet."""
    stamp = time.strftime("%Y%m%dT%H%M%S")
    for n in range(1000):
        kept = path.with_name(f"{path.name}.{stamp}{'-' + str(n) if n else ''}{KEPT_SUFFIX}")
        try:
            fd = os.open(kept, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            continue
        except OSError as exc:
            raise NativeStateError(f"cannot keep {path} beside it: {exc.strerror}") from None
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        return kept
    raise NativeStateError(f"cannot keep {path} beside it: too many kept copies")


def fresh_mtime(path: Path) -> None:
    """Claude Code's cleanup deletes transcripts by modification time: a restored file keeps
    the time of its writing, never an old one copied over."""
    try:
        os.utime(path)
    except OSError:
        pass


def _read(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise NativeStateError(f"cannot read {path}: {exc.strerror}") from None
