"""Writing native files back from the log, byte-exact. Every file is written to a temporary
name and renamed, and a different existing file is never overwritten without `force`.
Paths come from the log, which may have been pulled from another machine, so each one is
checked to stay inside the target folder (pathrule.under)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..pathrule import under
from ..errors import NativeStateError, RebuildConflict
from ..models import Source
from ..util import atomic_write_parts


@dataclass
class RebuiltFile:
    path: Path
    bytes: int
    status: str  # written | unchanged | replaced


def safe_target(root: Path, relpath: str) -> Path:
    """root/relpath, refusing anything that would land outside root (pathrule.under)."""
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
            if not all(_holds_next(handle, part) for part in batch):
                return False
            del batch  # a batch may be one large record: let it go before the next is made
        return handle.read(1) == b""


def _holds_next(handle, part: bytes, piece: int = 1 << 20) -> bool:
    """The file's next bytes are `part`, read a piece at a time."""
    view = memoryview(part)
    for start in range(0, len(view), piece):
        if handle.read(min(piece, len(view) - start)) != view[start:start + piece]:
            return False
    return True
