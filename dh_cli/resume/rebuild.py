"""Write a session's native state back from the log, byte-exact, under the harness's own
layout. Every file is written to a temporary name and renamed, and a different existing file
is never overwritten without `force`. Paths come from the log, which may have been pulled from
another machine, so each one is checked to stay inside the target folder."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from ..confine import check_native_id, inside, session_home, under  # noqa: F401 (inside: re-exported)
from ..errors import NativeStateError, RebuildConflict
from ..models import Session, Source
from ..util import atomic_write_parts
from ..worlds.log import Log
from .opencode_export import build_export


@dataclass
class RebuiltFile:
    path: Path
    bytes: int
    status: str  # written | unchanged | replaced


def safe_target(root: Path, relpath: str) -> Path:
    """root/relpath, refusing anything that would land outside root (confine.under)."""
    return under(root, relpath)


def source_bytes(world, source: Source) -> bytes:
    """The latest generation of a source's records, concatenated."""
    latest = world.latest_generation(source.id)
    if latest is None:
        return b""
    return b"".join(world.raw_lines(source.id, latest))


def write_file(target: Path, data: bytes, force: bool) -> RebuiltFile:
    return write_parts(target, lambda: iter([[data]]), force)


def write_parts(target: Path, batches, force: bool) -> RebuiltFile:
    """Write the bytes that `batches()` yields (lists of byte strings) to target, unless it
    already holds exactly them; a different file only with `force`."""
    try:
        return _write_parts(target, batches, force)
    except OSError as exc:
        raise NativeStateError(f"cannot write {target}: {exc.strerror or exc}") from None


def _write_parts(target: Path, batches, force: bool) -> RebuiltFile:
    status = "written"
    if target.exists():
        if target.is_file() and _holds(target, batches()):
            return RebuiltFile(target, target.stat().st_size, "unchanged")
        if not force:
            raise RebuildConflict(f"{target} exists and differs from the log",
                                  hint="pass --force to replace it, or --to DIR")
        status = "replaced"
    return RebuiltFile(target, atomic_write_parts(target, batches()), status)


def _holds(path: Path, batches) -> bool:
    with open(path, "rb") as handle:
        for batch in batches:
            data = b"".join(batch)
            if handle.read(len(data)) != data:
                return False
        return handle.read(1) == b""


def export_path(root: Path, session: Session, wrapper=None) -> Path:
    native_id = check_native_id(wrapper, session.harness_session_id) if wrapper else session.harness_session_id
    return safe_target(root, f"opencode-export-{native_id}.json")


def rebuild_session(world: Log, session: Session, to_dir: Path | None = None,
                    force: bool = False, env: dict | None = None) -> list[RebuiltFile]:
    """Without to_dir, into the session's harness home on this machine (confine.py): its
    recorded place, or for a session from a world this machine's configured home."""
    from ..wrappers import get as get_wrapper

    wrapper = get_wrapper(session.harness)
    home = Path(to_dir) if to_dir else session_home(world, wrapper, session, env)
    out = []
    for source in world.sources(session.id):
        if source.kind == "opencode":
            root = Path(to_dir) if to_dir else home.parent
            target = export_path(root, session, wrapper)  # checked before anything is built
            records = list(world.records(session.id, source.id))
            export = build_export(records, session.harness_session_id)
            data = (json.dumps(export, indent=2, ensure_ascii=False) + "\n").encode()
            out.append(write_file(target, data, force))
            continue
        latest = world.latest_generation(source.id)
        if latest is not None:
            out.append(write_parts(safe_target(home, source.relpath),
                                   lambda: world.raw_batches(source.id, latest), force))
    return out
