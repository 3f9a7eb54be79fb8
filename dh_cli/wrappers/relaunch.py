"""The plan for bringing an interactive harness back, as its wrapper decides it (pure data)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Relaunch:
    """How an interactive harness comes back after a crash, as its wrapper decides: the
    argv, the environment changes for that attempt (None unsets a variable), and who carries
    a cut turn on — `prompt` (dh's continuation prompt is in argv), `typed` (dh types it into
    the TUI once its screen is still), `harness` (the harness continues it by itself, so dh
    sends nothing) or `none` (the turn was complete). `note` is one line for the user, shown
    under dh's relaunch notice (e.g. that a typed prompt was lost, or sent again)."""

    argv: list[str]
    env: dict[str, str | None] = field(default_factory=dict)
    continues: str = "none"  # or `typed`: dh types `typed` into the TUI once it is ready,
    typed: str | None = None  # that is once `ready` was in its output
    ready: bytes | None = None
    note: str | None = None


def typed_prompt_lost(harness: str) -> str:
    """The note for a TUI killed before any prompt reached its files, with none in argv:
    whatever the user typed is nowhere dh can read it."""
    return (f"no prompt of this session had reached {harness}'s files; anything typed "
            "before the kill is lost: type it again")
