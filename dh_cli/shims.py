"""Shims: small launchers named like the harness binaries (`claude`, `codex`, `opencode`,
`pi`) that run `dh run <harness> -- "$@"`, so typing the harness's own name runs it under dh.

A shim is a POSIX sh script whose second line is MARKER; that line is how dh (and the shims
themselves) tell a shim from a real binary. dh never launches a shim as the harness: the
lookup of the real binary skips every shim on PATH (real_binary), so a shim cannot find
itself or another shim and loop. With DH_DISABLE=1 a shim does the same walk in sh and execs
the real binary directly, without starting Python. Files that are not dh shims are never
overwritten or removed."""

from __future__ import annotations

import os
import shlex
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

from .errors import DhError, HarnessNotFound
from .util import atomic_write

MARKER = "# dh-shim:"
HEAD = 512  # bytes read to recognise a shim (the marker is on line 2)

TEMPLATE = """#!/bin/sh
{marker} harness={harness} binary={binary}
# Written by `dh shim install`: `{binary}` runs under dh (`dh run {harness} -- ARGS`).
# DH_DISABLE=1 runs the real {binary} directly. Remove with `dh shim remove`.
if [ -n "${{DH_DISABLE:-}}" ] && [ "$DH_DISABLE" != 0 ]; then
  set -f; IFS=:
  for dir in $PATH; do
    cand="${{dir:-.}}/{binary}"
    [ -f "$cand" ] && [ -x "$cand" ] || continue
    line2=""; {{ IFS= read -r line1; IFS= read -r line2; }} < "$cand" 2>/dev/null
    case "$line2" in "{marker}"*) continue ;; esac
    unset IFS; set +f
    exec "$cand" "$@"
  done
  echo "Error: DH_DISABLE is set but no real {binary} was found on PATH (only dh's shims)" >&2
  exit 127
fi
exec {python} -m dh_cli run {harness} -- "$@"
"""


@dataclass
class Shim:
    name: str  # the binary name it stands for
    harness: str
    path: str
    active: bool = False  # the first `name` on PATH: typing it runs dh
    real: str | None = None  # the real binary behind it on PATH, if any

    def to_dict(self) -> dict:
        return asdict(self)


class ShimError(DhError):
    pass


def shim_harness(path: Path | str) -> str | None:
    """The harness a dh shim at path stands for; None for anything else."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(HEAD)
    except OSError:
        return None
    lines = head.split(b"\n")
    if len(lines) < 2 or not lines[1].startswith(MARKER.encode()):
        return None
    fields = dict(f.split("=", 1) for f in lines[1].decode(errors="replace").split()[2:] if "=" in f)
    return fields.get("harness") or "?"


def _executables(binary: str, path_env: str | None) -> list[Path]:
    """Every executable file named binary on PATH, in lookup order."""
    found, seen = [], set()
    for folder in (path_env if path_env is not None else os.environ.get("PATH", "")).split(os.pathsep):
        candidate = Path(folder or ".") / binary
        if candidate.is_file() and os.access(candidate, os.X_OK) and candidate not in seen:
            seen.add(candidate)
            found.append(candidate)
    return found


def lookup(binary: str, path_env: str | None) -> tuple[Path | None, list[Path]]:
    """(the first real `binary` on PATH, the dh shims met on the way or after it)."""
    real, shims = None, []
    for candidate in _executables(binary, path_env):
        if shim_harness(candidate):
            shims.append(candidate)
        elif real is None:
            real = candidate
    return real, shims


def real_binary(binary: str, path_env: str | None, harness: str, bin_var: str) -> str:
    """The real harness binary for dh to launch, never a shim (that would loop); one clear
    error when PATH holds only dh's shims, or nothing."""
    real, shims = lookup(binary, path_env)
    if real is not None:
        return str(real)
    if shims:
        raise HarnessNotFound(f"{binary!r} on PATH is only dh's shim ({shims[0]}); the real "
                              f"{binary} for harness {harness} was not found behind it",
                              hint=f"install {binary}, or set {bin_var} to the real binary")
    raise HarnessNotFound(f"{binary!r} not found on PATH for harness {harness}",
                          hint=f"install it, or set {bin_var}")


def refuse_shim(value: str, bin_var: str) -> None:
    """A DH_<HARNESS>_BIN that names a shim would run dh inside dh, forever."""
    if shim_harness(value):
        raise HarnessNotFound(f"{bin_var}={value} is dh's shim, not the harness",
                              hint=f"point {bin_var} at the real binary")


# install, list, remove ------------------------------------------------------------------------
def script(harness: str, binary: str, python: str | None = None) -> str:
    return TEMPLATE.format(marker=MARKER, harness=harness, binary=binary,
                           python=shlex.quote(python or sys.executable))


def install(wrappers: list, folder: Path, path_env: str | None = None) -> list[Shim]:
    """Write one shim per wrapper into folder (mode 0755); refuses to replace a file that
    is not a dh shim (e.g. the real binary, with --dir pointing at its folder)."""
    for wrapper in wrappers:
        target = folder / wrapper.binary
        if target.exists() and not shim_harness(target):
            raise ShimError(f"{target} exists and is not a dh shim; not replacing it",
                            hint="choose another --dir")
    folder.mkdir(parents=True, exist_ok=True)
    for wrapper in wrappers:
        target = folder / wrapper.binary
        atomic_write(target, script(wrapper.name, wrapper.binary).encode(), mode=0o755)
        target.chmod(0o755)
    return [_describe(folder / w.binary, path_env) for w in wrappers]


def _describe(path: Path, path_env: str | None) -> Shim:
    real, shims = lookup(path.name, path_env)
    found = _executables(path.name, path_env)
    active = bool(found) and found[0].resolve() == path.resolve()
    return Shim(path.name, shim_harness(path) or "?", str(path), active, str(real) if real else None)


def listing(folder: Path, path_env: str | None = None) -> list[Shim]:
    if not folder.is_dir():
        return []
    return [_describe(p, path_env) for p in sorted(folder.iterdir()) if shim_harness(p)]


def remove(wrappers: list, folder: Path) -> list[str]:
    """Delete the dh shims for wrappers (all of them: every shim in folder); returns the paths."""
    names = {w.binary for w in wrappers} if wrappers else None
    removed = []
    for shim in listing(folder, ""):
        if names is None or shim.name in names:
            os.unlink(shim.path)
            removed.append(shim.path)
    return removed


def on_path(folder: Path, path_env: str | None = None) -> int | None:
    """folder's position on PATH (0 = first), or None."""
    entries = (path_env if path_env is not None else os.environ.get("PATH", "")).split(os.pathsep)
    for index, entry in enumerate(entries):
        if entry and Path(entry).resolve() == folder.resolve():
            return index
    return None


def path_line(folder: Path, shell: str | None = None) -> str:
    """The one line to add to the shell's rc file that puts folder first on PATH."""
    if (shell or os.environ.get("SHELL", "")).endswith("fish"):
        return f"fish_add_path --prepend {shlex.quote(str(folder))}"
    return f'export PATH="{folder}:$PATH"'


# what `dh doctor` reports ---------------------------------------------------------------------
def survey(wrappers: list, path_env: str | None = None) -> list[dict]:
    """Per harness with a dh shim on PATH: the shims, the real binary, and whether the
    first `binary` on PATH is a shim (it shadows the real one: typing it runs dh)."""
    found = []
    for wrapper in wrappers:
        real, shims = lookup(wrapper.binary, path_env)
        if not shims:
            continue
        first = _executables(wrapper.binary, path_env)[0]
        found.append({"harness": wrapper.name, "binary": wrapper.binary,
                      "shims": [str(p) for p in shims], "real": str(real) if real else None,
                      "shadowing": first in shims})
    return found
