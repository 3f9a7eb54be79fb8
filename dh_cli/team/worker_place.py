"""Where `dh worker` may run a session a world names: the world's row chose the
cwd, so it is never `/` or a system folder, never another user's folder, and, when the
worker is given workspace roots (`--root`), only one under a root (or the cwd the session was
started in on this machine). A worker running as root runs harnesses as the user it is told
(`--user`, DH_WORKER_USER), and refuses to start without one: as root, every folder is
"owned by the user"."""

from __future__ import annotations

import os
import pwd
from dataclasses import dataclass, field

from ..errors import UsageError
from .takeover import Pass

# folders of the system: a session is never run or restored in or under them
SYSTEM = ("/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/libx32", "/proc",
          "/root", "/run", "/sbin", "/sys", "/usr", "/var/lib", "/var/log", "/var/run",
          "/var/spool", "/var/cache", "/var/mail", "/snap", "/lost+found")


@dataclass(frozen=True)
class RunAs:
    """The user the worker's children run as, and the folders they may run in."""

    name: str
    uid: int
    gid: int
    home: str
    roots: tuple[str, ...] = field(default_factory=tuple)

    @property
    def switching(self) -> bool:
        return self.uid != os.getuid()

    def popen_args(self) -> dict:
        """subprocess.Popen's arguments that drop to this user (none when it is the worker's)."""
        if not self.switching:
            return {}
        return {"user": self.uid, "group": self.gid, "extra_groups": os.getgrouplist(self.name, self.gid)}


def run_as(user: str | None, roots: list[str] | None) -> RunAs:
    """The worker's user and roots, checked at its start: a root worker must be told its
    user; a root is an existing folder of that user, never `/` or a system folder."""
    if os.getuid() == 0 and not user:
        raise UsageError("dh worker runs as root: refusing to start without the user to run "
                         "harnesses as", hint="pass --user NAME (or set DH_WORKER_USER)")
    try:
        entry = pwd.getpwnam(user) if user else pwd.getpwuid(os.getuid())
    except KeyError:
        raise UsageError(f"no user {user!r} on this machine") from None
    if user and entry.pw_uid != os.getuid() and os.getuid() != 0:
        raise UsageError(f"only root may run harnesses as {user!r}")
    checked = tuple(_checked_root(r, entry.pw_uid) for r in roots or ())
    return RunAs(entry.pw_name, entry.pw_uid, entry.pw_gid, entry.pw_dir, checked)


def current_user() -> RunAs:
    entry = pwd.getpwuid(os.getuid())
    return RunAs(entry.pw_name, entry.pw_uid, entry.pw_gid, entry.pw_dir)


def _checked_root(root: str, uid: int) -> str:
    path = os.path.realpath(os.path.expanduser(root))
    if not os.path.isdir(path):
        raise UsageError(f"--root {root}: not a folder")
    if why := system_folder(path):
        raise UsageError(f"--root {root}: {why}")
    if os.stat(path).st_uid != uid:
        raise UsageError(f"--root {root}: not the folder of the user the worker runs harnesses as")
    return path


def system_folder(path: str) -> str | None:
    """Why path is no place for a session (None: it may be)."""
    if path == "/":
        return "it is the root folder"
    for folder in SYSTEM:
        if path == folder or path.startswith(folder + "/"):
            return f"it is a system folder ({folder})"
    return None


def private_folder(path: str, home: str) -> str | None:
    """Why path, a world's choice, is no place for a session of the user whose home it is
    (None: it may be): the home itself (the harness would read and write all of it) and
    anything in a hidden folder of it (~/.ssh, ~/.config, ~/.aws, the harnesses' homes):
    keys, credentials and settings."""
    home = os.path.realpath(home)
    if path == home:
        return "it is the user's home folder"
    if path.startswith(home.rstrip("/") + "/"):
        first = path[len(home.rstrip("/")) + 1:].split("/", 1)[0]
        if first.startswith("."):
            return f"it is in the user's hidden folder ~/{first}"
    return None


def place_refusal(cwd: str, who: RunAs, started_here: bool) -> str | None:
    """Why the worker must not run a session in cwd (None: it may, as far as the place
    goes; worker.refusal checks ownership and the snapshot). A system folder is refused for
    every worker; the rest is this worker's own limit (takeover.Pass)."""
    real = os.path.realpath(cwd) if os.path.exists(cwd) else cwd
    if why := system_folder(real):
        return f"its working directory {cwd}: {why}"
    if not started_here and (why := private_folder(real, who.home)):
        return Pass(f"its working directory {cwd}: {why}")
    if who.roots and not started_here and not any(_under(cwd, r) for r in who.roots):
        return Pass(f"its working directory {cwd} is under none of this worker's roots "
                    f"({', '.join(who.roots)})")
    return None


def _under(path: str, root: str) -> bool:
    real = os.path.realpath(path) if os.path.exists(path) else path
    return real == root or real.startswith(root.rstrip("/") + "/")
