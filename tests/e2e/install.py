"""Install the pinned real harness CLIs from the npm registry into a cache folder, and say
which executables to exec.

    python -m tests.e2e.install          # install when missing (what .ci/run does)

The cache is `$DH_E2E_CACHE` (default `~/.cache/dh-e2e/npm`). Nothing is fetched from anywhere
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
from dataclasses import dataclass
from pathlib import Path

PACKAGES = {
    "claude-code": ("@anthropic-ai/claude-code", "2.1.197"),
    "pi": ("@mariozechner/pi-coding-agent", "0.73.1"),
    "codex": ("@openai/codex", "0.171.0"),
    "opencode": ("opencode-ai", "1.18.33"),
}
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

    def versions(self) -> dict[str, str]:
        return {h: v for h, (_, v) in PACKAGES.items()}


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


def resolve_bins(prefix: Path) -> dict[str, list[str]]:
    """The real executables: platform binaries for Claude Code, Codex and OpenCode (so the pid
    dh signals is the harness itself, not a Node shim), `node …/dist/cli.js` for Pi."""
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
        found = next((p for p in candidates if _is_real_binary(p)), None)
        if found is None:
            raise InstallError(f"{harness}: no executable at {candidates[0]}")
        bins[harness] = [str(found)]
    pi = nm / "@mariozechner/pi-coding-agent/dist/cli.js"
    node = shutil.which("node")
    if not pi.is_file() or node is None:
        raise InstallError(f"pi: need node and {pi}")
    bins["pi"] = [node, str(pi)]
    return bins


def _complete(prefix: Path) -> bool:
    if any(_installed_version(prefix, name) != version for name, version in PACKAGES.values()):
        return False
    plugin_dir = prefix / "opencode-config" / "opencode"
    return _installed_version(plugin_dir, PLUGIN[0]) == PLUGIN[1]


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


def ensure(prefix: Path | None = None, log=print) -> Installed:
    """The installed harnesses, installing what is missing; InstallError says why not."""
    prefix = Path(prefix) if prefix else cache_dir()
    if not _complete(prefix):
        if reason := _recent_failure(prefix):
            raise InstallError(reason)
        try:
            if any(_installed_version(prefix, n) != v for n, v in PACKAGES.values()):
                _npm(prefix, _specs(), log)
            plugin_dir = prefix / "opencode-config" / "opencode"
            if _installed_version(plugin_dir, PLUGIN[0]) != PLUGIN[1]:
                _npm(plugin_dir, [f"{PLUGIN[0]}@{PLUGIN[1]}"], log)
            if not _complete(prefix):
                raise InstallError("npm install finished but the pinned versions are not in place")
        except InstallError as exc:
            prefix.mkdir(parents=True, exist_ok=True)
            (prefix / FAILED_MARKER).write_text(f"{exc}\n")
            raise
        (prefix / FAILED_MARKER).unlink(missing_ok=True)
    return Installed(prefix, resolve_bins(prefix), prefix / "opencode-config" / "opencode")


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
    try:
        installed = ensure()
    except InstallError as exc:
        print(f"e2e: the real harnesses are not available, the e2e tests will be skipped: {exc}",
              file=sys.stderr)
        return 0
    for harness, argv in installed.bins.items():
        print(f"e2e: {harness} {PACKAGES[harness][1]}: {' '.join(argv)}")
    print(f"e2e: harnesses ready in {time.monotonic() - start:.1f} s ({installed.cache})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
