"""dh's settings and where each one came from.

Four layers, later ones win: the defaults below, the file `$XDG_CONFIG_HOME/dh/config.toml`,
`DH_*` environment variables, then command-line flags. Every value is kept under a dotted key
(`restart.max_restarts`, `replay.bash`) together with the layer that set it, so
`dh config show` can say why a setting has the value it has. The merged values are validated
once by pydantic; a bad value is reported against the layer that supplied it.

The settings are plain frozen dataclasses, which pydantic validates (their annotations carry
the constraints). When no layer above the defaults says anything, there is nothing to
validate and pydantic is not imported: importing it and building the schema was a third of
the CPU of a `dh run` that starts a session (bench/bench_startup.py)."""

from __future__ import annotations

import os
import tomllib
from dataclasses import asdict, dataclass, field, fields, make_dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal

from . import paths
from .errors import ConfigError

if TYPE_CHECKING:  # bound by _schema() when a value is validated; the annotations are text
    from annotated_types import Ge, Gt

Replay = Literal["safe", "never"]
OnLimit = Literal["wait", "stop"]
# workspace files listed in a snapshot but never stored (workspace/scan.py Rules)
DEFAULT_SECRETS = (".env", ".env.*", "*.env", "*.pem", "*.key", "id_*", "*.p12", "*.pfx",
                   "*.jks", "*.keystore", ".netrc", ".pgpass", ".npmrc", ".pypirc",
                   "credentials", "credentials.json", "*.kdbx", ".git-credentials")
# pydantic's config of each dataclass: an unknown key is an error, and so is an infinite
# number (`--stall-timeout inf` was taken as a timeout that never comes)
FORBID = {"extra": "forbid", "allow_inf_nan": False}


def _about(text: str, **kw):
    """A field whose description is also the man page's line for its variable."""
    return field(metadata={"description": text}, **kw)


@dataclass(frozen=True)
class Restart:
    __pydantic_config__ = FORBID

    max_restarts: Annotated[int, Ge(0)] = _about("Restarts before dh gives up on a session.", default=5)
    start_secs: Annotated[float, Ge(0)] = _about("An attempt dying sooner than this is a failed start.",
                                                 default=1.0)
    backoff_cap: Annotated[float, Gt(0)] = _about(
        "The longest wait, in seconds, between two restarts.", default=30.0)


def _default_secrets() -> list[str]:
    return list(DEFAULT_SECRETS)


@dataclass(frozen=True)
class Workspace:
    """Workspace snapshots (dh_cli/workspace/): files listed but never stored."""

    __pydantic_config__ = FORBID
    enabled: bool = True
    max_file_size: Annotated[int, Ge(0)] = 10 * 1024 * 1024  # bytes; larger files are listed only
    max_files: Annotated[int, Ge(1)] = 100_000  # a cwd with more files is not snapshotted
    max_restore_size: Annotated[int, Ge(0)] = 4 * 1024 ** 3  # bytes one restore may write
    secret_patterns: list[str] = field(default_factory=_default_secrets)


# The team worlds' settings, one line a world: name -> (what its URL reaches, the variables
# read after DH_<NAME>_URL). From it come the `world` choice, each `<name>_url` setting and
# its variables; the worlds themselves are registered in team/__init__.py (a package this
# leaf module may not import).
TEAM_WORLDS = {
    "postgres": ("the PostgreSQL world", ("WORKFLOW_POSTGRES_URL",)),
    "redis": ("the Redis (or Valkey) world", ()),
}


def url_variables(world: str) -> tuple[str, ...]:
    """The variables a team world's URL is read from, first wins: DH_<NAME>_URL, then its
    other names."""
    return (f"DH_{world.upper()}_URL", *TEAM_WORLDS[world][1])


def _world_choices() -> str:
    *first, last = ["local", *TEAM_WORLDS]
    return f"{', '.join(first)} or {last}"


# Settings' first fields, built from TEAM_WORLDS (a dataclass base's fields come first)
_WorldSettings = make_dataclass("_WorldSettings", [
    ("world", Literal[("local", *TEAM_WORLDS)],
     _about(f"Default world: {_world_choices()}.", default="local")),
    *((f"{name}_url", str | None, _about(f"URL of {what} (password never shown).", default=None))
      for name, (what, _aliases) in TEAM_WORLDS.items()),
], frozen=True, namespace={"__module__": __name__})


@dataclass(frozen=True)
class Settings(_WorldSettings):
    __pydantic_config__ = FORBID

    # each description is also the man page's line for the setting's variable (_gen_docs.py)
    lease_ttl: Annotated[float, Gt(0)] = _about(  # issue 15
        "Seconds a live session's holder may stay silent before another machine may take it over.",
        default=15.0)
    stall_timeout: Annotated[float, Ge(0)] | None = _about(  # None or 0: never hung
        "Seconds without progress during an open turn before a harness counts as hung.", default=None)
    tool_grace: Annotated[float, Ge(0)] = _about(
        "Seconds a tool command may run on after its harness died.", default=3.0)
    continue_prompt: str = _about("The prompt dh sends when it resumes a headless session.",
                                  default="Continue from where you left off.")
    on_limit: OnLimit = _about(
        "When the provider refuses a turn for a usage or rate limit: wait (for its reset, then go on) or stop.",
        default="wait")
    limit_spacing: Annotated[float, Gt(0)] = _about(
        "Seconds at least between two launches while waiting on a limit (doubled while it lasts, up to 900).",
        default=60.0)
    limit_max_wait: Annotated[float, Gt(0)] = _about(
        "Seconds dh waits on a limit at most before it stops the session (resumable).", default=21600.0)
    restart: Restart = field(default_factory=Restart)
    replay: dict[str, Replay] = _about("Replay classes, e.g. Bash=never,Read=safe.",  # tool name (lower case) -> class
                                       default_factory=dict)
    workspace: Workspace = field(default_factory=Workspace)
    # harness name -> args; travel.py: a session's own permission, sandbox, MCP and settings
    # flags never come with it from another machine
    local_flags: dict[str, list[str]] = _about(
        "Flags this machine gives a harness when it runs a session from elsewhere (a world, a "
        "pull, an import), e.g. claude-code = [\"--permission-mode\", \"acceptEdits\"].",
        default_factory=dict)


def _fields(cls) -> dict:
    return {item.name: item for item in fields(cls)}


@cache
def _schema():
    """pydantic's validator of Settings (imported here only: see the module's docstring)."""
    from annotated_types import Ge, Gt
    from pydantic import TypeAdapter

    globals().update(Ge=Ge, Gt=Gt)  # what the annotations name, for pydantic to resolve them
    return TypeAdapter(Settings)


# Environment variable -> dotted key. A world's DH_<NAME>_URL is listed before its other
# names (DH_POSTGRES_URL before the Workflow SDK's WORKFLOW_POSTGRES_URL) so it wins when both
# are set.
ENV_KEYS = {
    "DH_WORLD": "world",
    **{variable: f"{name}_url" for name in TEAM_WORLDS for variable in url_variables(name)},
    "DH_LEASE_TTL": "lease_ttl",
    "DH_STALL_TIMEOUT": "stall_timeout",
    "DH_TOOL_GRACE": "tool_grace",
    "DH_CONTINUE_PROMPT": "continue_prompt",
    "DH_ON_LIMIT": "on_limit",
    "DH_LIMIT_SPACING": "limit_spacing",
    "DH_LIMIT_MAX_WAIT": "limit_max_wait",
    "DH_MAX_RESTARTS": "restart.max_restarts",
    "DH_START_SECS": "restart.start_secs",
    "DH_BACKOFF_CAP": "restart.backoff_cap",
}
REPLAY_ENV = "DH_REPLAY"  # "Bash=never,Read=safe"
TABLES = ("replay", "local_flags")  # settings that are tables of the user's own keys
PARENTS = ("restart.", "replay.", "workspace.", "local_flags.")

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
    ("DH_MAX_RECORD_MB", "The most one record from a log or a world may decode to, in "
                         "megabytes; a larger one is refused before it is expanded. Default: 256."),
    ("DH_WORKER_USER", "The user `dh worker` runs harnesses as (its --user); required when the "
                       "worker runs as root."),
    ("DH_RAISE_ERRORS", "Set to 1 to see the Python traceback of an unexpected error."),
    ("DH_DISABLE", "Set to 1 and a dh shim runs the real harness directly, without dh."),
    ("NO_COLOR", "Set to anything to turn colour off (colour is only used on a terminal anyway)."),
]


def environment() -> list[tuple[str, str]]:
    """(variable, meaning) of every variable dh reads: the settings' first (from their
    descriptions and defaults), then PROCESS_ENV."""
    defaults, seen, out = flatten(asdict(Settings())), {}, []
    for variable, key in [*ENV_KEYS.items(), (REPLAY_ENV, "replay")]:
        if key in seen:
            out.append((variable, f"Read when {seen[key]} is not set."))
            continue
        seen[key] = variable
        out.append((variable, _setting_help(key, defaults.get(key))))
    return out + PROCESS_ENV


def _setting_help(key: str, default) -> str:
    group, _, name = key.rpartition(".")
    meta = _fields(Restart if group == "restart" else Settings)[name].metadata
    text = f"{meta['description']} Setting: {key}."
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
        values = flatten(asdict(self.settings))
        return {"file": str(self.path), "settings": {
            key: {"value": show_value(key, values.get(key)), "source": origin.source,
                  "from": origin.name}
            for key, origin in self.origins.items()}}


def flatten(data: dict, prefix: str = "") -> dict:
    out = {}
    for key, value in data.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, dict) and (value or prefix == "" and key in TABLES):
            out.update(flatten(value, dotted + "."))
        else:
            out[dotted] = value
    return out


def unflatten(values: dict) -> dict:
    out: dict = {}
    for dotted, value in values.items():
        *parents, leaf = dotted.split(".", 1) if dotted.startswith(PARENTS) else [dotted]
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
    values = flatten(asdict(Settings()))
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
    if all(origin.source == "default" for origin in origins.values()):
        return Settings()  # the defaults, valid as they stand
    from pydantic import ValidationError

    try:
        return _schema().validate_python(unflatten(values))
    except ValidationError as exc:
        problem = exc.errors()[0]
        key = ".".join(str(p) for p in problem["loc"])
        raise _config_error(key, problem, origins) from None


def _config_error(key: str, problem: dict, origins: dict[str, Origin]) -> ConfigError:
    origin = origins.get(key) or origins.get(key.rsplit(".", 1)[0]) or Origin("file", "")
    where = {"file": f"in {origin.name}", "env": f"from ${origin.name}",
             "flag": f"from {origin.name}"}.get(origin.source, "")
    hint = "see `dh config show` and the CONFIGURATION section of `man dh`"
    if problem["type"] in ("unexpected_keyword_argument", "extra_forbidden"):
        if key in _fields(Restart):
            hint = f"put {key} under [restart]"
        return ConfigError(f"unknown setting {key!r} {where}", hint=hint)
    return ConfigError(f"bad value for {key!r} {where}: {problem_text(problem)}", hint=hint)


def problem_text(problem: dict) -> str:
    """One of pydantic's validation problems (an item of `errors()`) in dh's words: what the
    value must be, never pydantic's "Input should be" or "Value error," prefix."""
    kind, ctx = problem.get("type", ""), problem.get("ctx") or {}
    if kind == "value_error" and ctx.get("error") is not None:
        return str(ctx["error"])
    limits = {"greater_than": "more than {gt}", "greater_than_equal": "at least {ge}",
              "less_than": "less than {lt}", "less_than_equal": "at most {le}"}
    if kind in limits:
        return "must be " + limits[kind].format(**{k: _plain(v) for k, v in ctx.items()})
    if kind == "finite_number":
        return "must be a finite number"
    if kind == "literal_error":
        return f"must be {ctx.get('expected', '')}".replace("'", "")
    named = {"int": "a whole number", "float": "a number", "bool": "true or false",
             "string": "text", "list": "a list", "dict": "a table of settings"}
    for prefix, what in named.items():
        if kind.startswith(prefix + "_"):
            return f"must be {what}"
    return str(problem.get("msg", "bad value")).removeprefix("Value error, ")


def _plain(value) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)
