"""Where `dh log export -o FILE` may write: a regular file only (issue 14). A device node,
a FIFO, a socket, a symlink or a folder at FILE is refused with one `Error:` line (as root,
`-o /dev/null` used to replace the device with a regular file); folders missing on the way
are created private (0700) and said so; no temporary file is ever left behind."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from .errors import DhError
from .util import private_dirs

KINDS = {stat.S_IFDIR: "a folder", stat.S_IFCHR: "a character device", stat.S_IFBLK: "a block device",
         stat.S_IFIFO: "a FIFO", stat.S_IFSOCK: "a socket", stat.S_IFLNK: "a symlink"}


class OutputRefused(DhError):
    """-o names something that is not a regular file, or cannot be written."""


def _what(path: Path) -> str | None:
    """What is at path when it is not a regular file (None: nothing there, or a file)."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return None
    except NotADirectoryError:
        raise OutputRefused(f"cannot write {path}: {path.parent} is not a folder") from None
    except OSError as exc:
        raise OutputRefused(f"cannot write {path}: {exc.strerror}") from None
    return None if stat.S_ISREG(mode) else KINDS.get(stat.S_IFMT(mode), "not a regular file")


def _check(path: Path) -> None:
    what = _what(path)
    if what:
        raise OutputRefused(f"refusing to write {path}: it is {what}, not a regular file",
                            hint="give the path of a file to create or replace")


def write_output(path: Path, data, note=None) -> int:
    """Write data (bytes, or an iterator of bytes written as they come) to path (0600)
    through a temporary file renamed over it; the number of bytes written."""
    path = Path(path)
    _check(path)
    parent = path.parent
    if not parent.exists():
        private_dirs(parent)
        if note:
            note(f"dh: created folder {parent} (0700)")
    elif not parent.is_dir():
        raise OutputRefused(f"cannot write {path}: {parent} is not a folder")
    tmp = parent / f".{path.name}.dh-tmp-{os.getpid()}"
    size = 0
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            for part in [data] if isinstance(data, (bytes, bytearray)) else data:
                size += _write_all(fd, part)
                del part  # a part may be one large record: let it go before the next is made
            os.fsync(fd)
        finally:
            os.close(fd)
        _check(path)  # again, just before the rename: nothing swapped in meanwhile
        os.replace(tmp, path)
    except OSError as exc:
        raise OutputRefused(f"cannot write {path}: {exc.strerror or exc}") from None
    finally:
        if os.path.lexists(tmp):
            os.unlink(tmp)
    return size


def _write_all(fd: int, data: bytes) -> int:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
    return len(data)
