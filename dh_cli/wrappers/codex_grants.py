"""What Codex's flags and the user's own config let its model do without asking (grants.py),
from 0.171.0's --help (--full-auto and --yolo: older releases). The sandbox says what runs
without asking; -a only says when to ask, so alone it grants nothing.

The user's `$CODEX_HOME/config.toml` sets `sandbox_mode` where no flag does, and `--profile
NAME` layers `$CODEX_HOME/NAME.config.toml` on top of it. Measured with 0.171.0 (`codex exec`
prints the sandbox it runs with): the profile's sandbox_mode wins over config.toml's, and
-s/--sandbox, --dangerously-bypass-approvals-and-sandbox, --yolo, --approve-for-me (it runs
workspace-write) and `-c sandbox_mode=…` win over both; another `-c` key does not;
--ignore-user-config reads neither. A legacy `profile = "x"` (or `-c profile=x`) and
`[profiles.x]` beside `--profile x` make it exit at once: nothing runs, so they are not read."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from .common import flag_name, options, parse_argv
from .grants import ALL, ASK, AUTO, EDITS, Grant, switch, value_level

SANDBOXES = {"read-only": ASK, "workspace-write": EDITS, "danger-full-access": ALL}
APPROVALS = {"untrusted": ASK, "on-failure": ASK, "on-request": ASK, "never": ASK}
MAX_CONFIG = 1 << 20  # a config.toml is a few KiB; a larger one is not read
# 0.171.0 refuses any other --profile ("pass a plain name such as `work`"): never a path
PROFILE_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")


def _config_grant(values: list[str]) -> Grant | None:
    """`-c sandbox_mode="…"` is --sandbox; any other override grants nothing by itself."""
    key, _, value = (values[-1] if values else "").partition("=")
    if key.strip() != "sandbox_mode":
        return Grant(ASK)
    return value_level(SANDBOXES)([value.strip().strip("'\"")])


GRANT_TABLE = {
    "--dangerously-bypass-approvals-and-sandbox": switch(ALL), "--yolo": switch(ALL),
    "-s": value_level(SANDBOXES), "--sandbox": value_level(SANDBOXES),
    "--full-auto": switch(EDITS), "--approve-for-me": switch(AUTO),
    "-a": value_level(APPROVALS), "--ask-for-approval": value_level(APPROVALS),
    "-c": _config_grant, "--config": _config_grant}
GRANT_FLAGS = {ALL: ("--dangerously-bypass-approvals-and-sandbox",),
               AUTO: ("--approve-for-me",), EDITS: ("--sandbox", "workspace-write")}
# the flags that set the sandbox themselves, so the config files' sandbox_mode does not count
LEVEL_FLAGS = frozenset({"-s", "--sandbox", "--dangerously-bypass-approvals-and-sandbox", "--yolo",
                         "--full-auto", "--approve-for-me", "-c sandbox_mode", "--config sandbox_mode"})


class CodexGrants:
    """The grant part of the Codex wrapper (base.Wrapper's grant seam)."""

    grant_table, grant_flags, settings_level_flags = GRANT_TABLE, GRANT_FLAGS, LEVEL_FLAGS

    def settings_grant(self, env: dict, args: list[str], needed: bool = False) -> Grant | None:
        groups, _ = parse_argv(args, self.value_flags, self.variadic_flags)
        return config_grant(self.home(env), groups, needed)


def config_grant(home: Path, groups: list[list[str]], needed: bool = False) -> Grant | None:
    """The sandbox the user's config files under the Codex home set (None: neither sets one,
    or the flags skip them). A value dh does not know grants nothing on this machine's side
    and everything on the side of what a session ran with (needed), as a flag's does."""
    if any(flag_name(g) == "--ignore-user-config" for g in groups):
        return None
    mode = _sandbox_mode(home / "config.toml")
    profile = _profile(groups)
    if profile is not None and PROFILE_NAME.fullmatch(profile):
        layered = _sandbox_mode(home / f"{profile}.config.toml")
        mode = layered if layered is not None else mode
    if mode is None:
        return None
    level = SANDBOXES.get(mode) if isinstance(mode, str) else None
    return Grant(level or (ALL if needed else ASK))


def _profile(groups: list[list[str]]) -> str | None:
    """The last -p/--profile given (one flag under two names: the last one counts)."""
    named = [options([g]).popitem()[1] for g in groups if flag_name(g) in ("-p", "--profile")]
    return named[-1] if named else None


def _sandbox_mode(path: Path):
    """The file's top-level sandbox_mode as written (None: unset, unreadable, not TOML)."""
    try:
        if path.stat().st_size > MAX_CONFIG:
            return None
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):  # tomllib.TOMLDecodeError and UnicodeDecodeError are ValueErrors
        return None
    return data.get("sandbox_mode")
