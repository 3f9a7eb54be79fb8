"""What a harness lets its model do without asking, read from its flags as a level every
machine reads the same way (pure).

A session's permission, sandbox and tool flags never travel (travel.py): the machine that
runs a session from elsewhere gives its own (`local_flags`). So that it never runs one with
fewer, the launch records the *grant* its flags gave (`Grant.to_dict`: a level and the tools
allowed by name, never the flags), and a machine resumes the session only when its own
flags grant at least as much (`Grant.covers`). Each wrapper holds its harness's table
(`grant_table`: flag -> what it grants, `grant_flags`: the flags that grant a level),
`base_grant`, what the harness does with no flag at all, and `settings_grant`, what the
user's own config of the harness grants where no flag says otherwise (launch_grant).

Levels, in order: `ask` (every tool that changes something asks, or is denied headless),
`edits` (file edits in the workspace without asking), `auto` (the harness's own reviewer
approves), `all` (every tool, no sandbox). A recorded grant is untrusted: whatever it says
can only make dh refuse, never add a flag; a level this dh does not know reads as `all`."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .common import flag_name, parse_argv

ASK, EDITS, AUTO, ALL = "ask", "edits", "auto", "all"
LEVELS = (ASK, EDITS, AUTO, ALL)
WHAT = {ASK: "asks before any tool that changes something",
        EDITS: "edits files without asking", AUTO: "lets its own reviewer approve tools",
        ALL: "runs every tool without asking and without a sandbox"}
# a recorded grant is read from a world: bounded, so a forged one costs nothing to read
MAX_TOOLS, MAX_TOOL_NAME = 64, 200
# "Bash(git *) Edit,Read": names, each with an optional parenthesised pattern
_TOOL = re.compile(r"[^\s,()]+(?:\([^)]*\))?")


@dataclass(frozen=True)
class Grant:
    level: str = ASK
    tools: frozenset[str] = field(default_factory=frozenset)  # allowed by name at `ask`

    def covers(self, needed: "Grant") -> bool:
        """This grant lets the model do at least what `needed` did."""
        if LEVELS.index(self.level) < LEVELS.index(needed.level):
            return False
        return self.level == ALL or needed.tools <= self.tools

    def joined(self, other: "Grant") -> "Grant":
        level = max(self.level, other.level, key=LEVELS.index)
        return Grant(level, self.tools | other.tools)

    def to_dict(self) -> dict:
        return {"level": self.level, "tools": sorted(self.tools)}

    def describe(self) -> str:
        named = self.tools and self.level != ALL  # all covers every tool
        tools = f"; allowed without asking: {', '.join(sorted(self.tools))}" if named else ""
        return f"{self.level} ({WHAT[self.level]}{tools})"

    @classmethod
    def recorded(cls, data) -> "Grant | None":
        """A grant read from a session's journal (untrusted); None when there is none."""
        if not isinstance(data, dict):
            return None
        level = data.get("level") if data.get("level") in LEVELS else ALL
        tools = data.get("tools") if isinstance(data.get("tools"), list) else []
        names = [t for t in tools[:MAX_TOOLS] if isinstance(t, str) and len(t) <= MAX_TOOL_NAME]
        return cls(level if len(names) == len(tools) else ALL, frozenset(names))


def tools_named(values: list[str]) -> frozenset[str]:
    return frozenset(_TOOL.findall(" ".join(values)))


def granted(wrapper, args: list[str], needed: bool = False, base: Grant | None = None) -> Grant:
    """What args let the harness's model do, on top of `base` (what its settings grant,
    having read the flags in `settings_read_flags` themselves; None: its `base_grant`). A
    flag whose value the table does not know grants nothing when it is this machine's
    (needed=False) and everything when it is what a session ran with (needed=True): either
    way dh never runs with less than it had."""
    groups, _ = parse_argv(args, wrapper.value_flags, wrapper.variadic_flags)
    grant = base if base is not None else wrapper.base_grant or Grant()
    for group in groups:
        read = wrapper.grant_table.get(flag_name(group))
        if read is None or (base is not None and flag_name(group) in wrapper.settings_read_flags):
            continue
        values = [group[0].partition("=")[2]] if "=" in group[0] else group[1:]
        found = read(values)
        grant = grant.joined(found if found is not None else Grant(ALL if needed else ASK))
    return grant


def launch_grant(wrapper, args: list[str], env: dict | None = None, needed: bool = False) -> Grant:
    """What a launch with args lets the harness's model do: its flags on top of what the
    user's settings of the harness (found from `env` as the harness finds them; None: none
    read) grant in place of its `base_grant` (a level there counts only when no flag sets
    one: the harness's flag wins over its settings; a setting may grant less than the
    harness does with none, as OpenCode's). Recorded by each launch and read for this
    machine's side of the comparison, so a level set in a settings file on one machine and
    not on the other is never lost on the way."""
    settings = wrapper.settings_grant(env, args, needed) if env is not None else None
    if settings is None:
        return granted(wrapper, args, needed)
    groups, _ = parse_argv(args, wrapper.value_flags, wrapper.variadic_flags)
    if any(_sets_level(wrapper, g) for g in groups):
        settings = Grant(ASK, settings.tools)
    return granted(wrapper, args, needed, base=settings)


def _sets_level(wrapper, group: list[str]) -> bool:
    """The flag sets the level itself: named in `settings_level_flags`, or, for a flag whose
    value is `key=value` (Codex's `-c`), named there with its key (`-c sandbox_mode`)."""
    name = flag_name(group)
    if name in wrapper.settings_level_flags:
        return True
    value = group[0].partition("=")[2] if "=" in group[0] else (group[1] if len(group) > 1 else "")
    return f"{name} {value.partition('=')[0].strip()}" in wrapper.settings_level_flags


def flags_for(wrapper, needed: Grant) -> list[str]:
    """Flags of the harness that grant at least `needed` (its table's own words)."""
    for level in LEVELS[LEVELS.index(needed.level):]:
        if level in wrapper.grant_flags and level != ASK:
            flags = list(wrapper.grant_flags[level])
            break
    else:
        flags = []
    if needed.tools and needed.level != ALL and "tools" in wrapper.grant_flags:
        flags += [*wrapper.grant_flags["tools"], ",".join(sorted(needed.tools))]
    return flags


def value_level(levels: dict[str, str]):
    """A table entry for a flag whose one value names a level (None: a value not known)."""
    def read(values: list[str]) -> Grant | None:
        level = levels.get(values[-1]) if values else None
        return Grant(level) if level else None
    return read


def switch(level: str):
    """A table entry for a switch that grants a level."""
    return lambda values: Grant(level)
