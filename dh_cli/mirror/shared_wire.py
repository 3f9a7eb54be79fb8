"""What the shared mirror's server and its clients agree on (see shared_server.py for the
design): where the socket and the lock are, the messages and how one is framed, and whose
process is at the other end.

A message is one JSON object on one line. The socket lives next to the log (`dh.db.mirror.sock`,
mode 0600) and each side checks the other's uid with SO_PEERCRED, so only the log's owner can
hand the server a session or be told about one. `dh.db.mirror.lock` is flock()ed by the server
for its whole life and holds its pid: one server per log, and only the lock's holder ever binds
or unlinks the socket."""

from __future__ import annotations

import json
import os
import socket
import struct
import sys
from pathlib import Path

UCRED = struct.Struct("3i")  # pid, uid, gid
SUN_PATH_MAX = 107  # bytes of a unix socket path (108 with its NUL)
OFF_VALUES = ("0", "off", "no", "false")
# The protocol's version, sent with `hold`: a server left running by another dh version
# refuses a hold of another version (the client then mirrors in-process)
PROTOCOL = 2
LINE_MAX = 1 << 20  # bytes of one message, at most

# The messages: each op, and the fields it carries besides "op", by direction. Both sides
# build them with `message()` and dispatch on these names, so a message one side sends and
# the other does not know fails where it is written, not as a dropped session at the other end.
HOLD, NATIVE_ID, RELEASE = "hold", "native_id", "release"
HELD, PROGRESS, NOTICE, RELEASED = "held", "progress", "notice", "released"
TO_SERVER = {HOLD: ("version", "session", "wrapper", "native_id", "dirs"), NATIVE_ID: ("id",),
             RELEASE: ()}
TO_CLIENT = {HELD: (), PROGRESS: ("at",), NOTICE: ("text",), RELEASED: ("committed", "progress_at")}


def enabled() -> bool:
    """On Linux, `dh run` hands its sessions to the shared mirror unless DH_SHARED_MIRROR is
    0 (then each `dh run` mirrors its session in its own process, as on other systems)."""
    if not sys.platform.startswith("linux"):
        return False
    return os.environ.get("DH_SHARED_MIRROR", "1").strip().lower() not in OFF_VALUES


def socket_path(db: Path) -> Path:
    return Path(f"{db}.mirror.sock")


def lock_path(db: Path) -> Path:
    return Path(f"{db}.mirror.lock")


def errors_path(db: Path) -> Path:
    return Path(f"{db}.mirror.err")


ERRORS_KEPT = 256 * 1024  # bytes; a server that finds the file larger starts it afresh


def keep_errors(db: Path) -> None:
    """Send the server's stderr to DB.mirror.err, with the stack of every thread on a fatal
    signal (faulthandler): it runs detached from any terminal, and on /dev/null a crash left
    no trace at all. Appended to (the log's folder is the owner's, 0700); a file that cannot
    be opened leaves stderr where it was."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC | os.O_NOFOLLOW
    try:
        fd = os.open(errors_path(db), flags, 0o600)
    except OSError:
        return
    try:
        if os.fstat(fd).st_size > ERRORS_KEPT:
            os.ftruncate(fd, 0)
        os.dup2(fd, 2)
    finally:
        os.close(fd)
    import faulthandler  # here: the client (`dh run`) imports this module too

    faulthandler.enable(file=sys.stderr, all_threads=True)


def server_pid(db: Path) -> int | None:
    """The pid the server wrote into its lock file (for the bench and the tests)."""
    try:
        return int(lock_path(db).read_text().strip() or 0) or None
    except (OSError, ValueError):
        return None


class _Address:
    """A socket path too long for sun_path is reached through an O_PATH descriptor of its
    folder (/proc/self/fd/N/name), which the kernel resolves like any path."""

    def __init__(self, path: Path):
        self.path, self.dir_fd = path, None

    def __enter__(self) -> str:
        text = str(self.path)
        if len(os.fsencode(text)) <= SUN_PATH_MAX:
            return text
        self.dir_fd = os.open(self.path.parent, os.O_PATH | os.O_CLOEXEC)
        return f"/proc/self/fd/{self.dir_fd}/{self.path.name}"

    def __exit__(self, *exc) -> None:
        if self.dir_fd is not None:
            os.close(self.dir_fd)


def listen(path: Path) -> socket.socket:
    """A listening socket at `path` that only its owner may connect to (0600 from the start).
    Bound under a name of its own and renamed to `path` once it listens: clients take the
    path for a server ready, and one that connected between bind and listen was refused
    (ECONNREFUSED; seen in a full test run), so its session went in-process."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
    staging = path.with_name(f"{path.name}.{os.getpid()}")
    old = os.umask(0o177)
    try:
        with _Address(staging) as address:
            sock.bind(address)
    finally:
        os.umask(old)
    try:
        sock.listen(128)
        os.rename(staging, path)
    except OSError:
        sock.close()
        staging.unlink(missing_ok=True)
        raise
    return sock


def connect(path: Path, timeout: float) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
    sock.settimeout(timeout)
    try:
        with _Address(path) as address:
            sock.connect(address)
    except OSError:
        sock.close()
        raise
    return sock


def peer(sock: socket.socket) -> tuple[int, int]:
    """(pid, uid) of the process at the other end of a unix socket."""
    pid, uid, _ = UCRED.unpack(sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, UCRED.size))
    return pid, uid


def same_user(sock: socket.socket) -> bool:
    return peer(sock)[1] == os.getuid()


def message(op: str, **fields) -> bytes:
    """One message of the table, encoded: its fields are exactly the table's (TypeError
    otherwise; KeyError for an op not in it)."""
    wanted = (TO_SERVER | TO_CLIENT)[op]
    if set(fields) != set(wanted):
        raise TypeError(f"a {op!r} message carries {sorted(wanted)}, not {sorted(fields)}")
    return encode({"op": op, **fields})


def encode(message: dict) -> bytes:
    return json.dumps(message, separators=(",", ":")).encode() + b"\n"


class Lines:
    """Cuts what a socket delivers into messages (a read may hold half of one, or several)."""

    def __init__(self):
        self.pending = b""

    def feed(self, data: bytes) -> list[dict]:
        """ValueError for what is no message: not JSON, JSON nested too deep to read, or a
        line longer than LINE_MAX (a peer that never ends its line must not fill memory)."""
        self.pending += data
        *lines, self.pending = self.pending.split(b"\n")
        if len(self.pending) > LINE_MAX:
            raise ValueError("a message longer than LINE_MAX")
        try:
            return [json.loads(line) for line in lines if line.strip()]
        except RecursionError:
            raise ValueError("a message nested too deep") from None
