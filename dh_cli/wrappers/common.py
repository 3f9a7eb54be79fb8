"""Helpers every wrapper uses (pure): argv split into flag groups and rebuilt for a resume,
and JSON records written and read the way the harnesses do."""

from __future__ import annotations

import datetime as _dt
import json

from ..models import Record
from .base import load_json, split_args

PRINT_FLAGS = {"-p", "--print"}  # Claude Code's and Pi's headless switch


def parse_argv(args: list[str], value_flags: frozenset[str],
               variadic: frozenset[str] = frozenset()) -> tuple[list[list[str]], list[str]]:
    """The flags of args, each grouped with its value(s), and the positional words, both in
    order. Built on split_args; a variadic flag also swallows the bare words right after it,
    as commander does, so they are not mistaken for the prompt. A value flag at the very end,
    without its value, is left out (the harness refused it: "argument missing")."""
    flags, positionals = split_args(args, value_flags)
    kinds = dict.fromkeys(flags, "flag") | dict.fromkeys(positionals, "word")
    groups, words, want_value, last = [], [], False, -2
    for i in sorted(kinds):
        token = args[i]
        if kinds[i] == "flag" and want_value:
            groups[-1].append(token)
            want_value = False
        elif kinds[i] == "flag":
            groups.append([token])
            want_value = "=" not in token and token in value_flags
        elif i == last + 1 and groups and groups[-1][0] in variadic:
            groups[-1].append(token)
        else:
            words.append(token)
            continue
        last = i
    if want_value:  # a value flag ending args, its value missing: in a relaunch it would take
        groups.pop()  # dh's own next word (`--model --resume=<id>`: a new conversation)
    return groups, words


def flag_name(group: list[str]) -> str:
    return group[0].split("=", 1)[0]


def options(groups: list[list[str]]) -> dict[str, str | None]:
    """Flag name -> its value (None for a switch); a repeated flag keeps its last value."""
    out: dict[str, str | None] = {}
    for group in groups:
        name, eq, inline = group[0].partition("=")
        out[name] = inline if eq else (group[1] if len(group) > 1 else None)
    return out


def kept_flags(groups: list[list[str]], drop: set[str]) -> list[str]:
    """The flag tokens, values included, minus the groups whose flag is in drop."""
    return [token for group in groups if flag_name(group) not in drop for token in group]


def with_flags(args: list[str], extra: list[str]) -> list[str]:
    """args plus dh's own flags, put before a `--` so they are never read as the prompt."""
    cut = args.index("--") if "--" in args else len(args)
    return [*args[:cut], *extra, *args[cut:]]


def prompt_tail(prompt: str | None) -> list[str]:
    """The continuation prompt as the last argv words; one that looks like a flag goes
    after `--`."""
    if not prompt:
        return []
    return ["--", prompt] if prompt.startswith("-") else [prompt]


def note_after_words(groups: list[list[str]], words: list[str], note: str) -> list[str] | None:
    """The args of a harness whose positional words are its first message, with `note` after
    that message: flags first, in their order, then `--` and the message (so that a flag
    taking several values, last among them, cannot swallow it); None when there is none."""
    if not words:
        return None
    return [*(token for group in groups for token in group), "--", f"{' '.join(words)}\n\n{note}"]


def headless_flags(groups: list[list[str]], drop: set[str], headless: bool) -> list[str]:
    """Kept flags with the print switch made to match `headless` (Claude and Pi use -p)."""
    kept = kept_flags(groups, drop | (set() if headless else PRINT_FLAGS))
    has_print = any(flag_name(g) in PRINT_FLAGS for g in groups)
    return ["-p", *kept] if headless and not has_print else kept


def json_line(obj) -> bytes:
    """One record as the harnesses write it: compact JSON, non-ASCII kept raw, a newline.
    Text with lone surrogates (not valid UTF-8 raw) falls back to \\u escapes."""
    text = json.dumps(obj, separators=(",", ":"), ensure_ascii=False)
    try:
        return (text + "\n").encode()
    except UnicodeEncodeError:
        return (json.dumps(obj, separators=(",", ":")) + "\n").encode()


def iso_now() -> str:
    """UTC now as the harnesses stamp records: `2026-11-29T07:42:11.626Z`."""
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="milliseconds")[:-6] + "Z"


def json_objects(records: list[Record]) -> list[dict]:
    """The records that decode to JSON objects, in order; anything else is skipped."""
    objects = (load_json(r.raw)[0] for r in records)
    return [obj for obj in objects if isinstance(obj, dict)]


def stdout_object(line: bytes, marker: bytes) -> dict | None:
    """A stdout line as a JSON object, if it contains marker; garbage gives None. The
    cheap byte test keeps long output lines from being parsed for nothing."""
    if marker not in line:
        return None
    obj, _ = load_json(line.strip())
    return obj if isinstance(obj, dict) else None
