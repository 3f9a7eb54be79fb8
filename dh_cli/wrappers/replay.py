"""Replay classes: what dh tells the model about a tool call cut off by a crash.

`safe` tools only read (or only update a plan; each wrapper lists its own, `safe_tools`):
running them again costs nothing. Every other tool — shell, edit, write, patch, MCP,
anything unknown — is `never`: it may already have changed the world, so the model is told
to check before repeating it."""

from __future__ import annotations

import signal

from ..errors import ConfigError

CLASSES = ("safe", "never")

SAFE_TEXT = ("[dh] This tool call was interrupted: the harness process stopped before its result "
             "was recorded. The tool only reads, so it is safe to run it again if you still need "
             "its result.")
NEVER_TEXT = ("[dh] This tool call was interrupted: the harness process stopped before its result "
              "was recorded. It may already have taken effect. Check the current state before "
              "repeating it.")
FINISHED_TEXT = ("[dh] This tool call was interrupted: the harness process stopped before its "
                 "result was recorded. It may already have taken effect: the command went on to "
                 "finish on its own{code}, so its effect has happened, but its output was lost. "
                 "Check the current state instead of running it again.")
ENDED_TEXT = ("[dh] This tool call was interrupted: the harness process stopped while the command "
              "was still running, and dh ended the command. It may already have taken effect, "
              "or only partly. Check the current state before repeating it.")
KILLED_TEXT = ("[dh] This tool call was interrupted: the harness process stopped while the command "
               "was still running, and the command was stopped with it{signal}. It may already "
               "have taken effect, or only partly. Check the current state before repeating it.")

UNLOGGED_TEXT = ("[dh] When the harness stopped, this command of its was running, and the session "
                 "holds no tool call it belongs to (the harness had not yet recorded it): "
                 "`{command}`. {fate}If it was one of your tool calls, it may already have taken "
                 "effect. Check the current state before running it again.")


CHANGED_TEXT = ("[dh] The working folder changed after the last step this session recorded "
                "({changes}): a tool call the harness had not yet recorded may already have "
                "taken effect. Check the current state before running it again.")
RESTORED_TEXT = ("[dh] The working folder was restored from a snapshot taken before these steps "
                 "of this session: {steps}. Their results are in the conversation, but what "
                 "they wrote to the folder may be missing; check before relying on it.")
CHANGES_SHOWN = 5
# a workspace change says what a restore of the snapshot would do (workspace/restore.py
# diff); the model is told what happened to the folder
FOLDER_WORDS = {"added": "removed", "deleted": "created", "modified": "modified"}


def changed_files_text(changes: list[dict]) -> str:
    """What the model is told when the folder differs from the snapshot of the last recorded
    step: a harness can run a command before it writes the call down (Claude Code does), and
    a kill that takes the harness's home too leaves no other trace of it."""
    shown = [f"{c.get('path')} {FOLDER_WORDS.get(c.get('status'), c.get('status'))}"
             for c in changes[:CHANGES_SHOWN]]
    more = len(changes) - len(shown)
    return CHANGED_TEXT.format(changes=", ".join(shown) + (f" and {more} more" if more > 0 else ""))


def restored_behind_text(steps: list) -> str:
    """What the model is told when the folder was restored from a snapshot older than its
    last recorded steps (workspace/behind.py): their results are in the conversation, their
    files may not be in the folder."""
    return RESTORED_TEXT.format(steps=steps_named(steps))


def steps_named(steps: list) -> str:
    """`Bash` call toolu_01, … for workspace/behind.Step values."""
    shown = [f"`{s.tool}` call {s.call_id}" for s in steps[:CHANGES_SHOWN]]
    more = len(steps) - len(shown)
    return ", ".join(shown) + (f" and {more} more" if more > 0 else "")


def unlogged_text(outcome: dict) -> str:
    """What the model is told of a tool process dh settled that no dangling call explains:
    Claude Code, for one, can start a command before it writes the message that asked for it."""
    if outcome.get("finished"):
        code = outcome.get("exit_code")
        fate = "It went on to finish on its own" + (f" (exit code {code}). " if code is not None else ". ")
    elif outcome.get("ended_by_dh"):
        fate = "dh ended it while it was still running. "
    elif outcome.get("killed_by"):
        fate = f"It was stopped with the harness{_signal_name(outcome['killed_by'])}. "
    else:
        fate = ""
    return UNLOGGED_TEXT.format(command=(outcome.get("command") or "?")[:300], fate=fate)


def every_safe_tool() -> frozenset[str]:
    """The tools any known harness's wrapper calls safe (`Wrapper.safe_tools`): for a caller
    that does not say which harness the tool is of."""
    from . import REGISTRY

    return frozenset().union(*(w.safe_tools for w in REGISTRY.values()))


def default_class(tool: str, safe_tools: frozenset[str] | None = None) -> str:
    safe = every_safe_tool() if safe_tools is None else safe_tools
    return "safe" if tool.lower() in safe else "never"


def parse_overrides(items: list[str]) -> dict[str, str]:
    """`--replay TOOL=safe|never` values as a mapping; malformed ones are a usage error."""
    out = {}
    for item in items:
        tool, sep, cls = item.partition("=")
        if not sep or not tool or cls not in CLASSES:
            raise ConfigError(f"bad --replay value {item!r}", hint="use TOOL=safe or TOOL=never")
        out[tool.lower()] = cls
    return out


def replay_class(tool: str, overrides: dict[str, str], safe_tools: frozenset[str] | None = None) -> str:
    """`--replay` first, else the harness's own safe tools (every harness's when not given)."""
    return overrides.get(tool.lower()) or default_class(tool, safe_tools)


def _signal_name(number: int) -> str:
    try:
        return f" ({signal.Signals(number).name})"
    except ValueError:
        return f" (signal {number})"


def repair_text(cls: str, outcome: dict | None = None) -> str:
    """The result text for a dangling call; `outcome` is what dh saw of its process, if any."""
    if outcome and outcome.get("finished"):
        code = outcome.get("exit_code")
        return FINISHED_TEXT.format(code=f" (exit code {code})" if code is not None else "")
    if outcome and outcome.get("ended_by_dh"):
        return ENDED_TEXT
    if outcome and outcome.get("killed_by"):
        return KILLED_TEXT.format(signal=_signal_name(outcome["killed_by"]))
    return SAFE_TEXT if cls == "safe" else NEVER_TEXT
