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

    max_restarts: int = Field(5, ge=0)  # restarts before dh gives up (FATAL)
    start_secs: float = Field(1.0, ge=0)  # dying sooner than this is a failed start
    backoff_cap: float = Field(30.0, gt=0)  # the longest wait between two restarts


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

    world: Literal["local", "postgres"] = "local"
    postgres_url: str | None = None
    lease_ttl: float = Field(15.0, gt=0)  # seconds a live session's holder may stay silent (issue 15)
    stall_timeout: float | None = Field(None, ge=0)  # None or 0: never treat a quiet harness as hung
    tool_grace: float = Field(3.0, ge=0)
    continue_prompt: str = "Continue from where you left off."
    restart: Restart = Field(default_factory=Restart)
    replay: dict[str, Replay] = Field(default_factory=dict)  # tool name (lower case) -> class
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
