"""`dh doctor`: is this machine ready to run harnesses under dh?

Each check returns a `Check` (ok / warn / fail / skip and one sentence), never prints. A
missing harness is only a warning, since most people use one or two of them; a log that is
damaged or readable by others, a bad config file, or an unreachable configured world is a
failure. The harness `--version` calls run here, with a short timeout, so a hung binary
cannot hang doctor."""

from __future__ import annotations

import os
import shutil
import sqlite3
import stat
from dataclasses import asdict, dataclass, field
from pathlib import Path

from . import paths
from .errors import ConfigError, DhError, HarnessNotFound



@dataclass
class Check:
    name: str
    status: str  # ok | warn | fail | skip
    message: str
    details: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return asdict(self)


def run_checks(env: dict | None = None) -> list[Check]:
    from .wrappers import REGISTRY

    env = dict(os.environ if env is None else env)
    checks = []
    for wrapper in REGISTRY.values():
        checks.append(check_binary(wrapper, env))
        checks.append(check_home(wrapper, env))
        checks.extend(check_cleanup(wrapper, env))
    checks.extend(check_shims(list(REGISTRY.values()), env))
    checks.append(check_disk(paths.db_path()))
    checks.append(check_log(paths.db_path()))
    checks.append(check_private(paths.db_path()))
    settings, config_check = check_config(env)
    checks.append(config_check)
    checks.extend(check_worlds(settings))
    return checks


def failed(checks: list[Check]) -> bool:
    return any(c.status == "fail" for c in checks)


# harnesses ----------------------------------------------------------------------------------
def check_binary(wrapper, env: dict) -> Check:
    from .supervisor.launch import find_binary
    from .versions import installed_version

    name = f"{wrapper.name} binary"
    try:
        argv = find_binary(wrapper, env)
    except HarnessNotFound as exc:
        return Check(name, "warn", str(exc), {"hint": exc.hint, **tried_details(wrapper, None)})
    if not shutil.which(argv[0], path=env.get("PATH")):
        return Check(name, "fail", f"{argv[0]} is not an executable file",
                     {"path": argv[0], **tried_details(wrapper, None)})
    return check_version(wrapper, name, " ".join(argv), installed_version(wrapper, argv, env))


def tried_details(wrapper, version: str | None) -> dict:
    from .versions import in_tried_range

    return {"version": version, "tried": list(wrapper.tried_versions),
            "in_tried_range": in_tried_range(wrapper, version)}


def check_version(wrapper, name: str, path: str, version: str | None) -> Check:
    """The installed release against the range the wrapper was tried with: ok inside,
    a warning outside or when the harness does not say."""
    from .versions import tried_text

    details = {"path": path, **tried_details(wrapper, version)}
    tried = tried_text(wrapper)
    if version is None:
        return Check(name, "warn", f"{path}: `--version` gave no version (dh was tried with {tried})",
                     details)
    status = "ok" if details["in_tried_range"] else "warn"
    word = "" if status == "ok" else ", not in that range"
    return Check(name, status, f"{path} {version} (dh was tried with {tried}{word})", details)


def harness_version(argv: list[str], env: dict) -> str | None:
    """The first x.y.z in `<harness> --version` (versions.version_output)."""
    from .versions import version_output

    return version_output(argv, env)


def check_home(wrapper, env: dict) -> Check:
    home = wrapper.home(env)
    name = f"{wrapper.name} home"
    if not home.exists():
        return Check(name, "warn", f"{home} does not exist yet (created by the harness's first run)",
                     {"path": str(home)})
    readable = os.access(home, os.R_OK | (os.X_OK if home.is_dir() else 0))
    if not readable:
        return Check(name, "fail", f"{home} is not readable by this user", {"path": str(home)})
    return Check(name, "ok", f"{home} is readable", {"path": str(home)})


CLEANUP_SOON = 7 * 86400  # how far ahead a coming cleanup of the harness is worth a warning


def check_cleanup(wrapper, env: dict, now: float | None = None) -> list[Check]:
    """A harness that deletes its own old sessions (Claude Code's cleanupPeriodDays): which
    sessions of the log it will delete within a week."""
    import time

    home = wrapper.home(env)
    days = wrapper.cleanup_days(home)
    if days is None or not paths.db_path().exists():
        return []
    from .stores.lost import due_for_cleanup
    from .worlds.local import LocalWorld

    try:
        world = LocalWorld(paths.db_path())
    except DhError:
        return []  # the log database check says what is wrong with it
    try:
        due = due_for_cleanup(world, wrapper.name, days, CLEANUP_SOON, time.time() if now is None else now)
    finally:
        world.close()
    name, details = f"{wrapper.name} cleanup", {"days": days, "sessions": due}
    if not due:
        return [Check(name, "ok", f"it deletes sessions unwritten for {days} days; none of the log's is due within a week", details)]
    return [Check(name, "warn", f"it deletes sessions unwritten for {days} days: {len(due)} session(s) of "
                  "the log go within a week (raise cleanupPeriodDays in its settings.json; dh keeps "
                  "them, and `dh restore --lost` brings them back)", details)]


def check_shims(wrappers: list, env: dict) -> list[Check]:
    """dh's shims on PATH (shims.py): in effect or not, and the real binary behind each."""
    from .shims import survey

    checks = []
    for item in survey(wrappers, env.get("PATH")):
        name, shim, real = f"{item['harness']} shim", item["shims"][0], item["real"]
        if item["shadowing"] and real:
            checks.append(Check(name, "ok", f"{shim} shadows {item['binary']}: it runs under dh; "
                                            f"the real one is {real}", item))
        elif item["shadowing"]:
            checks.append(Check(name, "fail", f"{shim} shadows {item['binary']} but no real "
                                              f"{item['binary']} is found behind it", item))
        else:
            checks.append(Check(name, "warn", f"{shim} is on PATH after {real}: `{item['binary']}` "
                                              "runs without dh (put the shim folder first)", item))
    return checks


# the log ------------------------------------------------------------------------------------
def check_disk(db: Path) -> Check:
    """The disk holding the log: a full one makes every command that writes it fail."""
    from .worlds.local_conn import disk_room, full_disk

    free, wal = disk_room(db)
    details = {"path": str(db.parent), "free": free, "wal": wal}
    if problem := full_disk(db):
        return Check("log disk", "fail", problem, {**details, "hint": "free some disk space"})
    if free is None:
        return Check("log disk", "skip", f"{db.parent} does not exist yet", details)
    return Check("log disk", "ok", f"{free:,} bytes free under {db.parent}", details)


def check_log(db: Path) -> Check:
    if not db.exists():
        return Check("log database", "warn", f"{db} does not exist yet (created on first use)",
                     {"path": str(db)})
    try:
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
        try:
            result = [row[0] for row in conn.execute("PRAGMA quick_check")]
        finally:
            conn.close()
    except sqlite3.Error as exc:
        return Check("log database", "fail", f"{db} cannot be checked: {exc}", {"path": str(db)})
    if result != ["ok"]:
        return Check("log database", "fail", f"{db} is damaged: {'; '.join(result[:3])}",
                     {"path": str(db), "problems": result})
    return Check("log database", "ok", f"{db} passes quick_check", {"path": str(db)})


def check_private(db: Path) -> Check:
    """The log holds whole conversations, so neither it nor its folder may be readable by others."""
    if not db.exists():
        return Check("log privacy", "skip", "no log yet", {"path": str(db)})
    file_mode, dir_mode = _mode(db), _mode(db.parent)
    details = {"path": str(db), "file_mode": _octal(file_mode), "folder_mode": _octal(dir_mode)}
    problems = []
    if file_mode & 0o077:
        problems.append(f"{db} is {_octal(file_mode)} (want 0600)")
    if dir_mode & 0o077:
        problems.append(f"{db.parent} is {_octal(dir_mode)} (want 0700)")
    if problems:
        details["fix"] = f"chmod 600 {db} && chmod 700 {db.parent}"
        return Check("log privacy", "fail", "; ".join(problems), details)
    return Check("log privacy", "ok", f"{db} is 0600 in a 0700 folder", details)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _octal(mode: int) -> str:
    """A mode as chmod and ls write it: 0600, not Python's 0o600."""
    return f"{mode:04o}"


# config and worlds --------------------------------------------------------------------------
def check_config(env: dict):
    from . import config

    try:
        effective = config.load(env=env)
    except ConfigError as exc:
        return None, Check("config", "fail", str(exc), {"path": str(paths.config_path())})
    where = paths.config_path()
    text = f"{where} is valid" if where.exists() else f"no config file ({where}); using defaults"
    return effective.settings, Check("config", "ok", text, {"path": str(where)})


def check_worlds(settings) -> list[Check]:
    """One check per registered team world: skipped without a URL, else reachable or not."""
    from . import team

    return [check_world(name, settings) for name in team.names()]


def check_world(name: str, settings) -> Check:
    from . import team
    from .errors import DhError
    from .redact import mask
    from .util import redact_url

    label, url = f"{name} world", getattr(settings, f"{name}_url", None) if settings else None
    if not url:
        if settings and settings.world == name:
            return Check(label, "fail", f"the configured world is {name} but no URL is configured",
                         {"hint": f"set {name}_url in the config file, or its variable (dh config show)"})
        return Check(label, "skip", f"no URL configured for the team world {name}")
    shown = mask(redact_url(url))  # a libpq `host=… password=…` as well as a URL
    try:
        team.open_world(name, url, migrate=False, connect_timeout=5).close()
    except DhError as exc:  # the world's own error, its password scrubbed (team/urls.py)
        return Check(label, "fail", f"{shown} is unreachable: {mask(redact_url(str(exc)))}", {"url": shown})
    return Check(label, "ok", f"{shown} is reachable", {"url": shown})
