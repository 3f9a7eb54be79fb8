"""Which of a session's args may come with it from another machine (pure).

A session's stored argv is data once it left the machine it was started on: a world, a pull
or an import carries it, and whoever can write there chooses it. Only the flags a wrapper
lists in `travels` (model, output format, headless switch: what shapes the reply, never
what the harness may do) and the words that say how the harness runs (Codex's `exec`,
OpenCode's `run`) are kept. Permission, sandbox, MCP, settings, hooks, config overrides,
paths, the prompt and anything unknown stay behind; the user of this machine gives their own
(`local_flags` in dh's config)."""

from __future__ import annotations

from .base import split_args
from .common import flag_name, parse_argv


def travelling_args(wrapper, args: list[str]) -> tuple[list[str], list[str]]:
    """(the args a session from elsewhere runs with here, the names of the flags left
    behind, in order, once each)."""
    _, positional = split_args(args, wrapper.value_flags)
    command = positional[0] if positional and args[positional[0]] in wrapper.command_words else None
    if command is None:
        kept, dropped = _kept(wrapper, args)
        return kept, dropped
    before, dropped_before = _kept(wrapper, args[:command])
    after, dropped_after = _kept(wrapper, args[command + 1:])
    return [*before, args[command], *after], list(dict.fromkeys(dropped_before + dropped_after))


def _kept(wrapper, args: list[str]) -> tuple[list[str], list[str]]:
    groups, _ = parse_argv(args, wrapper.value_flags, wrapper.variadic_flags)
    kept, dropped = [], []
    for group in groups:
        name = flag_name(group)
        values = [group[0].partition("=")[2]] if "=" in group[0] else group[1:]
        # a value that looks like a flag would be read as one by a harness's parser
        if name in wrapper.travels and not any(v.startswith("-") for v in values):
            kept.extend(group)
        else:
            dropped.append(name)
    return kept, list(dict.fromkeys(dropped))
