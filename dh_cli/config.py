"""dh's settings and where each one came from.

Four layers, later ones win: the defaults below, the file `$XDG_CONFIG_HOME/dh/config.toml`,
`DH_*` environment variables, then command-line flags. Every value is kept under a dotted key
(`restart.max_restarts`, `replay.bash`) together with the layer that set it, so
`dh config show` can say why a setting has the value it has. The merged values are validated
once by a pydantic model; a bad value is reported against the layer that supplied it."""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from . import paths
from .errors import ConfigError

Replay = Literal["safe", "never"]


class Restart(BaseModel):
    model_config = ConfigDict(extra="forbid")

    max_restarts: int = Field(5, ge=0, description="Restarts before dh gives up on a session.")
    start_secs: float = Field(1.0, ge=0, description="An attempt dying sooner than this is a failed start.")
    backoff_cap: float = Field(30.0, gt=0,
                               description="The longest wait, in seconds, between two restarts.")


class Workspace(BaseModel):
    """Workspace snapshots (dh_cli/workspace/): files listed but never stored."""

    model_config = ConfigDict(extra="forbid")
    enabled: bool = True
    max_file_size: int = Field(10 * 1024 * 1024, ge=0)  # bytes; larger files are listed only
    max_files: int = Field(100_000, ge=1)  # a cwd with more files is not snapshotted
    secret_patterns: list[str] = Field(default_factory=lambda: list(_default_secrets()))


def _default_secrets() -> tuple[str, ...]:
    from .workspace.scan import DEFAULT_SECRETS

    return DEFAULT_SECRETS


class Settings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    # each description is also the man page's line for the setting's variable (_gen_docs.py)
    world: Literal["local", "postgres"] = Field("local", description="Default world: local or postgres.")
    postgres_url: str | None = Field(None, description="URL of the PostgreSQL world (password never shown).")
    lease_ttl: float = Field(15.0, gt=0, description=(  # issue 15
        "Seconds a live session's holder may stay silent before another machine may take it over."))
    stall_timeout: float | None = Field(None, ge=0, description=(  # None or 0: never hung
        "Seconds without progress during an open turn before a harness counts as hung."))
    tool_grace: float = Field(3.0, ge=0,
                              description="Seconds a tool command may run on after its harness died.")
    continue_prompt: str = Field("Continue from where you left off.",
                                 description="The prompt dh sends when it resumes a headless session.")
    restart: Restart = Field(default_factory=Restart)
    replay: dict[str, Replay] = Field(default_factory=dict,  # tool name (lower case) -> class
                                      description="Replay classes, e.g. Bash=never,Read=safe.")
    workspace: Workspace = Field(default_factory=Workspace)


# Environment variable -> dotted key. DH_POSTGRES_URL is listed first so it wins over the
# Workflow SDK's name when both are set.
ENV_KEYS = {
    "DH_WORLD": "world",
    "DH_POSTGRES_URL": "postgres_url",
    "WORKFLOW_POSTGRES_URL": "postgres_url",
    "DH_LEASE_TTL": "lease_ttl",
    "DH_STALL_TIMEOUT": "stall_timeout",
    "DH_TOOL_GRACE": "tool_grace",
    "DH_CONTINUE_PROMPT": "continue_prompt",
    "DH_MAX_RESTARTS": "restart.max_restarts",
    "DH_START_SECS": "restart.start_secs",
    "DH_BACKOFF_CAP": "restart.backoff_cap",
}
REPLAY_ENV = "DH_REPLAY"  # "Bash=never,Read=safe"

# Variables read where they are used: no setting, no file key, no `dh config show` line. The
# man page's ENVIRONMENT lists these after the settings' variables (dh_cli/_gen_docs.py);
# tests/test_docs.py checks that every DH_ variable dh reads is in one list or the other.
PROCESS_ENV = [
    ("DH_HOME", "Where dh keeps its log (dh.db) and locks. Default: $XDG_DATA_HOME/dh."),
    ("XDG_DATA_HOME", "Base of the default DH_HOME and of OpenCode's data. Default: ~/.local/share."),
    ("XDG_CONFIG_HOME", "Base of the config file: $XDG_CONFIG_HOME/dh/config.toml. Default: ~/.config."),
    ("CLAUDE_CONFIG_DIR", "Claude Code's home. Default: ~/.claude."),
    ("CODEX_HOME", "Codex's home. Default: ~/.codex."),
    ("OPENCODE_DB", "OpenCode's database file. Default: $XDG_DATA_HOME/opencode/opencode.db."),
    ("PI_CODING_AGENT_DIR", "Pi's home. Default: ~/.pi/agent."),
    ("DH_<HARNESS>_BIN", "The harness executable to run instead of the one on PATH, e.g. "
                         "DH_CLAUDE_BIN, DH_CLAUDE_CODE_BIN, DH_CODEX_BIN, DH_OPENCODE_BIN, DH_PI_BIN."),
    ("WORKFLOW_TARGET_WORLD", "The Workflow SDK's world: when it names the PostgreSQL world and "
                              "neither --world nor DH_WORLD is given, dh runs against that world."),
    ("DH_DB_TIMEOUT", "Seconds to wait for a busy log database. Default: 30."),
    ("DH_WAL_LIMIT_MB", "The size the log's WAL is kept under while sessions are mirrored. "
                        "Default: 64 (at least 8)."),
    ("DH_SHARED_MIRROR", "On Linux, each `dh run` hands its session to the one shared mirror "
                         "process of its log, which mirrors every session of the machine's `dh run`s "
                         "(cheaper with many sessions). Set to 0 and each `dh run` mirrors its "
                         "session in its own process. Default: 1."),
    ("DH_PARSE_POOL_MB", "An import parses a file with at least this many megabytes left to read "
                         "in a second process. Default: 32, and then only while a core is spare; "
                         "set, it always does."),
    ("DH_RAISE_ERRORS", "Set to 1 to see the Python traceback of an unexpected error."),
    ("DH_DISABLE", "Set to 1 and a dh shim runs the real harness directly, without dh."),
    ("NO_COLOR", "Set to anything to turn colour off (colour is only used on a terminal anyway)."),
]


def environment() -> list[tuple[str, str]]:
    """(variable, meaning) of every variable dh reads: the settings' first (from their
    descriptions and defaults), then PROCESS_ENV."""
    defaults, seen, out = flatten(Settings().model_dump()), {}, []
    for variable, key in [*ENV_KEYS.items(), (REPLAY_ENV, "replay")]:
        if key in seen:
            out.append((variable, f"Read when {seen[key]} is not set."))
            continue
        seen[key] = variable
        out.append((variable, _setting_help(key, defaults.get(key))))
    return out + PROCESS_ENV


def _setting_help(key: str, default) -> str:
    group, _, name = key.rpartition(".")
    field = (Restart if group == "restart" else Settings).model_fields[name]
    text = f"{field.description} Setting: {key}."
    if default in (None, {}):
        return text
    return text + (f' Default: "{default}".' if isinstance(default, str) else f" Default: {default}.")


@dataclass
class Origin:
    source: str  # default | file | env | flag
    name: str = ""  # the file path, variable name or flag that set it


@dataclass
class Effective:
    settings: Settings
    origins: dict[str, Origin] = field(default_factory=dict)
    path: Path | None = None

    def to_dict(self) -> dict:
        values = flatten(self.settings.model_dump())
        return {"file": str(self.path), "settings": {
            key: {"value": show_value(key, values.get(key)), "source": origin.source,
                  "from": origin.name}
            for key, origin in self.origins.items()}}


def flatten(data: dict, prefix: str = "") -> dict:
    out = {}
    for key, value in data.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, dict) and (value or prefix == "" and key == "replay"):
            out.update(flatten(value, dotted + "."))
        else:
            out[dotted] = value
    return out


def unflatten(values: dict) -> dict:
    out: dict = {}
    for dotted, value in values.items():
        *parents, leaf = dotted.split(".", 1) if dotted.startswith(("restart.", "replay.", "workspace.")) else [dotted]
        node = out
        for part in parents:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise ConfigError(f"{part!r} must be a table of settings, not a value",
                                  hint=f"write it as [{part}] with one setting a line")
        node[leaf] = value
    return out


def show_value(key: str, value):
    """The value as `config show` prints it: never a password (a URL's, a libpq
    `password=…`, a value named like a secret), whatever --show-secrets says elsewhere."""
    from .redact import MASK, config_value
    from .util import is_secret_name

    if is_secret_name(key.rsplit(".", 1)[-1]) and isinstance(value, str) and value:
        return MASK
    return config_value(value)


def read_file(path: Path) -> dict:
    """The file's settings as dotted keys; a missing file is an empty layer."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read {path}: {exc}", hint="fix or remove the file") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"malformed TOML in {path}: {exc}", hint="fix the file's syntax") from None
    values = flatten(data)
    # Tool names are matched without case, so `Bash` and `bash` are one setting.
    return {_key(k): v for k, v in values.items()}


def _key(dotted: str) -> str:
    return "replay." + dotted[7:].lower() if dotted.startswith("replay.") else dotted


def read_env(env: dict) -> dict[str, tuple[object, str]]:
    """dotted key -> (value, variable name) for every DH_* setting present."""
    out: dict[str, tuple[object, str]] = {}
    for name, key in ENV_KEYS.items():
        if env.get(name) and key not in out:
            out[key] = (env[name], name)
    for item in filter(None, (env.get(REPLAY_ENV) or "").split(",")):
        tool, _, cls = item.strip().partition("=")
        out[_key("replay." + tool.strip())] = (cls.strip(), REPLAY_ENV)
    return out


def load(flags: dict | None = None, env: dict | None = None, path: Path | None = None) -> Effective:
    """The effective settings. `flags` maps dotted keys to flag values; None means the flag
    was not given and the lower layers decide."""
    env = os.environ if env is None else env
    path = path or paths.config_path()
    values = flatten(Settings().model_dump())
    origins = {key: Origin("default") for key in values}
    for key, value in read_file(path).items():
        values[key], origins[key] = value, Origin("file", str(path))
    for key, (value, name) in read_env(env).items():
        values[key], origins[key] = value, Origin("env", name)
    for key, value in (flags or {}).items():
        if value is not None:
            values[key], origins[key] = value, Origin("flag", _flag_name(key))
    return Effective(_validate(values, origins), origins, path)


def _flag_name(key: str) -> str:
    return "--replay" if key.startswith("replay.") else "--" + key.split(".")[-1].replace("_", "-")


def _validate(values: dict, origins: dict[str, Origin]) -> Settings:
    try:
        return Settings.model_validate(unflatten(values))
    except ValidationError as exc:
        problem = exc.errors()[0]
        key = ".".join(str(p) for p in problem["loc"])
        raise _config_error(key, problem, origins) from None


def _config_error(key: str, problem: dict, origins: dict[str, Origin]) -> ConfigError:
    origin = origins.get(key) or origins.get(key.rsplit(".", 1)[0]) or Origin("file", "")
    where = {"file": f"in {origin.name}", "env": f"from ${origin.name}",
             "flag": f"from {origin.name}"}.get(origin.source, "")
    hint = "see `dh config show` and the CONFIGURATION section of `man dh`"
    if problem["type"] == "extra_forbidden":
        if key in Restart.model_fields:
            hint = f"put {key} under [restart]"
        return ConfigError(f"unknown setting {key!r} {where}", hint=hint)
    return ConfigError(f"bad value for {key!r} {where}: {problem['msg']}", hint=hint)
