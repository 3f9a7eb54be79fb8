"""What OpenCode's flags and the user's own config let its model do without asking (grants.py),
as 1.18.33 reads them (its --help and its bundled source).

Flags: `run --auto` (and its hidden aliases --yolo and --dangerously-skip-permissions) approves
every request that the config does not deny ("auto-approve permissions that are not explicitly
denied"): with a config that denies, what it grants is read with the config.

Config: the global folder (`$XDG_CONFIG_HOME/opencode`): `config.json`, `opencode.json` and
`opencode.jsonc` merged in that order (JSON with comments and trailing commas; one that does
not parse makes OpenCode drop the three and use its defaults), then the file OPENCODE_CONFIG
names, `opencode.json(c)` in OPENCODE_CONFIG_DIR, the JSON in OPENCODE_CONFIG_CONTENT, and
OPENCODE_PERMISSION merged into `permission`; the older `tools` (name -> true/false) goes under
`permission`. A project's files travel with it and are not read; nor are the admin's
/etc/opencode and an agent's own `permission`.

`permission` is one action for every tool or, per tool, an action or {pattern: action}
("allow", "ask", "deny"). OpenCode puts these rules after its defaults and applies the last
that matches. With no `permission`, 1.18.33's default agent allows every tool (`"*":
"allow"`; it asks only for repeated identical calls, folders outside the project and `.env`
files): `base_grant` is `all`. A tool counts as allowed when its last catch-all rule (pattern
`*`) allows and no narrower rule after it asks or denies: edits and bash allowed is `all`,
edits alone `edits`, anything less `ask`."""

from __future__ import annotations

import json
import re
from pathlib import Path

from .. import paths
from .common import flag_name, parse_argv
from .grants import ALL, ASK, EDITS, Grant, switch

MAX_CONFIG = 1 << 20  # a config is a few KiB; a larger one is not read
GLOBAL_FILES = ("config.json", "opencode.json", "opencode.jsonc")
FOLDER_FILES = ("opencode.json", "opencode.jsonc")
DEFAULT_RULES = [("*", "*", "allow")]  # (permission, pattern, action), as 1.18.33's build agent
EDIT_TOOLS = {"write", "edit", "patch"}  # `tools` names that OpenCode files under `edit`
# an unclosed /* runs to the end (one match, not a scan to the end from every /* in it)
_COMMENT = re.compile(r'("(?:\\.|[^"\\])*")|//[^\n]*|/\*.*?(?:\*/|\Z)', re.S)
_TRAILING_COMMA = re.compile(r'("(?:\\.|[^"\\])*")|,(?=\s*[}\]])')


class OpenCodeGrants:
    """The grant part of the OpenCode wrapper (base.Wrapper's grant seam)."""

    grant_table = {"--auto": switch(ALL), "--yolo": switch(ALL),
                   "--dangerously-skip-permissions": switch(ALL)}
    grant_flags = {ALL: ("--auto",)}
    base_grant = Grant(ALL)
    settings_read_flags = frozenset(grant_table)

    def settings_grant(self, env: dict, args: list[str], needed: bool = False) -> Grant | None:
        groups, _ = parse_argv(args, self.value_flags, self.variadic_flags)
        auto = any(flag_name(g) in self.settings_read_flags for g in groups)
        return permission_grant(env, auto, needed)


def permission_grant(env: dict, auto: bool = False, needed: bool = False) -> Grant | None:
    """The level the user's config grants, with --auto approving what it asks (None: it sets
    no permission). An action dh does not know allows on the side of what a session ran
    with (needed), and not on this machine's, as a flag's value dh does not know."""
    permission = _permission(env)
    if permission is None:
        return None
    rules = DEFAULT_RULES + _rules(permission)
    edit, bash = (_allowed(rules, tool, auto, needed) for tool in ("edit", "bash"))
    return Grant(ALL if edit and bash else EDITS if edit else ASK)


def _permission(env: dict):
    config = _config(env)
    permission = _normal(config.get("permission"))
    from_env = _parsed(env.get("OPENCODE_PERMISSION") or "null")
    if from_env is not None:
        permission = _merged(permission if permission is not None else {}, _normal(from_env))
    tools = config.get("tools")
    if isinstance(tools, dict):
        named = {("edit" if name in EDIT_TOOLS else name): "allow" if on else "deny"
                 for name, on in tools.items()}
        permission = _merged(named, permission if permission is not None else {})
    return permission


def _config(env: dict) -> dict:
    """The user's config merged as OpenCode merges it (module docstring)."""
    folder = paths.opencode_config_dir(env)
    layers = [_global(folder)]
    named, extra = env.get("OPENCODE_CONFIG"), env.get("OPENCODE_CONFIG_DIR")
    if named and Path(named).is_absolute():  # relative to OpenCode's folder, not dh's
        layers.append(_file(Path(named)) or {})
    if extra and Path(extra).is_absolute():
        layers += [_file(Path(extra) / name) or {} for name in FOLDER_FILES]
    content = _parsed(env.get("OPENCODE_CONFIG_CONTENT") or "{}")
    layers.append(_with_permission(content) if isinstance(content, dict) else {})
    merged: dict = {}
    for layer in layers:
        merged = _merged(merged, layer)
    return merged


def _global(folder: Path) -> dict:
    read = [_file(folder / name) for name in GLOBAL_FILES]
    if any(layer is None for layer in read):
        return {}
    merged: dict = {}
    for layer in read:
        merged = _merged(merged, layer)
    return merged


def _file(path: Path) -> dict | None:
    """The file's config with its permission in one form; {} when absent or too large to
    read, None when it does not parse."""
    try:
        if path.stat().st_size > MAX_CONFIG:
            return {}
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except (OSError, ValueError):
        return None
    data = _parsed(text)
    return _with_permission(data) if isinstance(data, dict) else None


def _parsed(text: str):
    """JSON with comments and trailing commas, as OpenCode reads its config; None if not."""
    text = _COMMENT.sub(lambda m: m.group(1) or "", text)
    text = _TRAILING_COMMA.sub(lambda m: m.group(1) or "", text)
    try:
        return json.loads(text)
    except ValueError:
        return None


def _with_permission(config: dict) -> dict:
    return {**config, "permission": _normal(config["permission"])} if "permission" in config else config


def _normal(permission):
    """`"allow"` for every tool is `{"*": "allow"}` (OpenCode's own reading of its config)."""
    return {"*": permission} if isinstance(permission, str) else permission


def _merged(base, top):
    """top over base, objects merged key by key (a key keeps its first place, as in JS)."""
    if not (isinstance(base, dict) and isinstance(top, dict)):
        return top
    out = dict(base)
    for key, value in top.items():
        out[key] = _merged(base[key], value) if key in base else value
    return out


def _rules(permission) -> list[tuple]:
    """(permission, pattern, action) in order; a form dh does not know is one rule with an
    action no table knows."""
    if not isinstance(permission, dict):
        return [("*", "*", None)]
    rules: list[tuple] = []
    for name, value in permission.items():
        if isinstance(value, dict):
            rules += [(name, pattern, action) for pattern, action in value.items()]
        else:
            rules.append((name, "*", value))
    return rules


def _allowed(rules: list[tuple], tool: str, auto: bool, needed: bool) -> bool:
    mine = [(pattern, action) for name, pattern, action in rules if _matches(tool, name)]
    last = max(i for i, (pattern, _) in enumerate(mine) if pattern == "*")
    allows = {"allow", "ask"} if auto else {"allow"}
    return all(action in allows if action in ("allow", "ask", "deny") else needed
               for _, action in mine[last:])


def _matches(tool: str, name: str) -> bool:
    """OpenCode's wildcard: `*` any run of characters, `?` one."""
    pattern = re.escape(name).replace(r"\*", ".*").replace(r"\?", ".")
    return re.fullmatch(pattern, tool, re.S) is not None
