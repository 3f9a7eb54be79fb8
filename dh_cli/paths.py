"""Where dh and each harness keep their files. The only place that reads DH_HOME and the
harness home variables, so tests can make everything hermetic with environment alone."""

import os
import re
from pathlib import Path

# a session id that may name a file of dh's (a lock, a liveness mark): ids come from pulled logs
SAFE_ID = re.compile(r"[0-9A-Za-z][0-9A-Za-z_-]{0,127}")


def _xdg(var: str, fallback: str) -> Path:
    value = os.environ.get(var)
    return Path(value) if value else Path.home() / fallback


def dh_home() -> Path:
    """DH_HOME, refused when relative: it would name another log in every folder dh starts
    in (a `dh resume --cwd`, a worker's child, a shim), so sessions would seem to vanish."""
    value = os.environ.get("DH_HOME")
    if value and not os.path.isabs(value):
        from .errors import ConfigError

        raise ConfigError(f"DH_HOME must be an absolute path, not {value!r}",
                          hint=f"e.g. DH_HOME={os.path.abspath(value)}")
    return Path(value) if value else _xdg("XDG_DATA_HOME", ".local/share") / "dh"


def db_path() -> Path:
    return dh_home() / "dh.db"


def config_path() -> Path:
    return _xdg("XDG_CONFIG_HOME", ".config") / "dh" / "config.toml"


def claude_home(env: dict | None = None) -> Path:
    env = os.environ if env is None else env
    value = env.get("CLAUDE_CONFIG_DIR")
    return Path(value) if value else Path(env.get("HOME", str(Path.home()))) / ".claude"


def codex_home(env: dict | None = None) -> Path:
    env = os.environ if env is None else env
    value = env.get("CODEX_HOME")
    return Path(value) if value else Path(env.get("HOME", str(Path.home()))) / ".codex"


def pi_home(env: dict | None = None) -> Path:
    env = os.environ if env is None else env
    value = env.get("PI_CODING_AGENT_DIR")
    return Path(value) if value else Path(env.get("HOME", str(Path.home()))) / ".pi" / "agent"


def _xdg_opencode(env: dict | None, variable: str, *default: str) -> Path:
    """OpenCode's folder under an XDG base folder: the variable's, else HOME/<default>."""
    env = os.environ if env is None else env
    base = env.get(variable)
    return (Path(base) if base else Path(env.get("HOME", str(Path.home())), *default)) / "opencode"


def opencode_data_dir(env: dict | None = None) -> Path:
    return _xdg_opencode(env, "XDG_DATA_HOME", ".local", "share")


def opencode_config_dir(env: dict | None = None) -> Path:
    """OpenCode's global config folder (its `Path.config`: XDG_CONFIG_HOME/opencode)."""
    return _xdg_opencode(env, "XDG_CONFIG_HOME", ".config")


def opencode_db(env: dict | None = None) -> Path:
    env = os.environ if env is None else env
    value = env.get("OPENCODE_DB")
    if value:
        path = Path(value)
        return path if path.is_absolute() else opencode_data_dir(env) / path
    return opencode_data_dir(env) / "opencode.db"


def shim_dir() -> Path:
    """Where `dh shim install` writes its launchers by default (not under DH_HOME: the
    shims belong to the user's shell, whatever log a run uses)."""
    return _xdg("XDG_DATA_HOME", ".local/share") / "dh" / "shims"
