"""Which harness release dh is about to run, and whether dh was tried with it.

Each wrapper names the range of releases it was tried with (`tried_versions`, oldest and
newest). The installed version is read from the npm package the binary belongs to (the
nearest package.json above it whose name the wrapper claims: no process started), else from
`<harness> --version`, remembered per binary (path, size, mtime) in the dh home so a run does
not pay for it twice. `dh doctor` shows it against the range; `dh run`/`dh resume` say one
line the first time they meet a release outside it, record the version in the session, and
go on."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

from . import events, paths

VERSION_TIMEOUT = 5.0
_VERSION = re.compile(r"\d+\.\d+\.\d+(?:[-+.][0-9A-Za-z.]+)?")
_NUMBERS = re.compile(r"^(\d+)\.(\d+)\.(\d+)")
CACHE = "harness-versions.json"


def numbers(version: str) -> tuple[int, ...] | None:
    match = _NUMBERS.match(version or "")
    return tuple(int(n) for n in match.groups()) if match else None


def tried_text(wrapper) -> str:
    low, high = wrapper.tried_versions
    return low if low == high else f"{low} to {high}"


def in_tried_range(wrapper, version: str | None) -> bool:
    """x.y.z within the wrapper's range (a platform suffix such as -linux-x64 is ignored)."""
    low, high = (numbers(v) for v in wrapper.tried_versions)
    found = numbers(version) if version else None
    return found is not None and low <= found <= high


def package_version(wrapper, argv: list[str]) -> str | None:
    """The version in the package.json of the npm package holding the binary (or Node
    script) that argv runs, when the wrapper claims that package's name."""
    for part in argv:
        try:
            start = Path(part).resolve()
        except (OSError, RuntimeError):
            continue
        if start.is_file():
            found = _walk_up(wrapper, start.parent)
            if found:
                return found
    return None


def _walk_up(wrapper, folder: Path, levels: int = 5) -> str | None:
    for _ in range(levels):
        meta = _read_json(folder / "package.json")
        name = meta.get("name") if isinstance(meta.get("name"), str) else ""
        if any(name == p or name.startswith(p + "-") for p in wrapper.packages):
            version = meta.get("version")
            return _numeric(version) if isinstance(version, str) else None
        folder = folder.parent
    return None


def _numeric(version: str) -> str:
    """0.171.0-linux-x64 (a platform package) -> 0.171.0; a pre-release tag stays."""
    return re.sub(r"-(linux|darwin|win32)-.*$", "", version)


def _read_json(path: Path) -> dict:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def version_output(argv: list[str], env: dict) -> str | None:
    """The first x.y.z in `<harness> --version`, or None if it fails, hangs or prints none."""
    try:
        done = subprocess.run([*argv, "--version"], capture_output=True, text=True, env=env,
                              stdin=subprocess.DEVNULL, timeout=VERSION_TIMEOUT, errors="replace")
    except (OSError, subprocess.TimeoutExpired):
        return None
    found = _VERSION.search(done.stdout + "\n" + done.stderr)
    return found.group(0) if found and done.returncode == 0 else None


def installed_version(wrapper, argv: list[str], env: dict, cache: Path | None = None) -> str | None:
    """The release argv runs: from its package, else `--version` (remembered per binary)."""
    found = package_version(wrapper, argv)
    if found:
        return found
    cache = cache or paths.dh_home() / CACHE
    key = _binary_key(argv)
    known = _read_json(cache)
    if key and isinstance(known.get(key), str):
        return known[key]
    found = version_output(argv, env)
    if found and key:
        _remember(cache, {**known, key: found})
    return found


def _binary_key(argv: list[str]) -> str | None:
    parts = []
    for part in argv:
        try:
            info = os.stat(part)
        except OSError:
            parts.append(part)
            continue
        parts.append(f"{os.path.realpath(part)}:{info.st_size}:{info.st_mtime_ns}")
    return "|".join(parts) or None


def _remember(cache: Path, data: dict) -> None:
    try:
        cache.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        tmp = cache.with_suffix(f".tmp{os.getpid()}")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)  # dh's home is private
        with os.fdopen(fd, "w") as handle:
            handle.write(json.dumps(data))
        os.chmod(tmp, 0o600)  # whatever the umask
        os.replace(tmp, cache)
    except OSError:
        pass  # only a cache: the next run asks the harness again


def note_version(world, session, wrapper, argv: list[str], env: dict, notice) -> str | None:
    """Record the release in the session; outside the tried range, say so in one line the
    first time dh meets it (an `untried_version` event marks it, in every session it runs)."""
    version = installed_version(wrapper, argv, env)
    if version is None:
        return None
    if session.harness_version != version:
        if session.harness_version:  # a new release sends a new prompt prefix: the cache is lost
            notice(f"dh: resuming with {wrapper.name} {version}; the session ran on {session.harness_version} "
                   "until now (a new release changes the prompt, so the provider's cache starts over)")
        world.update_session(session.id, harness_version=version)
    if in_tried_range(wrapper, version):
        return version
    key = f"{wrapper.name} {version}"
    noted = paths.dh_home() / CACHE
    known = _read_json(noted)
    seen = known.get("untried_noted") if isinstance(known.get("untried_noted"), list) else []
    events.add(world, session.id, events.untried_version(wrapper.name, version,
                                                         list(wrapper.tried_versions)))
    if key not in seen:
        notice(f"dh: {wrapper.name} {version} was not tried with dh (tried: {tried_text(wrapper)}); "
               "going on")
        _remember(noted, {**known, "untried_noted": [*seen, key]})
    return version
