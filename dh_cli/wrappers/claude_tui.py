"""Claude Code's TUI relaunched after a crash: a cut turn continued by Claude itself
(CLAUDE_CODE_RESUME_INTERRUPTED_TURN), a prompt typed but never written sent again, and a
session killed before its transcript held the prompt started afresh under the same id."""

from __future__ import annotations

from pathlib import Path

from ..models import Record
from .base import Relaunch
from .claude_prompts import LOST, RESENT, clear_startup_only, latest_ms, unsent_prompt
from .common import note_after_words, prompt_tail

OFF = {"CLAUDE_CODE_RESUME_INTERRUPTED_TURN": None}
CONVERSATION_KINDS = {"user", "assistant", "tool_call", "tool_result", "compaction"}


class ClaudeTuiResume:
    """ClaudeWrapper's interactive relaunch; it uses the wrapper's resume_args, _split, parse
    and conversation (claude.py, base.py)."""

    def interactive_resume(self, original: list[str], native_id: str, native_path: str | None,
                           prompt: str | None, records: list[Record], notes: bool = False) -> Relaunch:
        """Claude Code's TUI continues a cut turn itself when CLAUDE_CODE_RESUME_INTERRUPTED_TURN
        is set (its own crash-respawn path, in 2.1.197 and 2.1.332): when the transcript ends
        in a user row — a tool result, dh's repair, or the prompt itself — it sends the
        continue text (CLAUDE_CODE_RESUME_PROMPT, so dh's wording) or the cut prompt as the
        first message, and writes no extra "No response requested." row. dh then passes no
        prompt of its own: one continuation, never two. After a prompt row Claude sends that
        prompt again and never the continue text, so when dh has notes for the model
        (`notes`: a command or a file change no record holds) they go in argv instead. A
        transcript ending in an assistant row cut short is not an interrupted turn to
        Claude; there the prompt goes in argv too. The variable is unset whenever dh does
        not want it, so a user's own export of it cannot continue a turn a second time."""
        if not self._holds_conversation(records):
            return self.restart_unstarted(original, native_id, native_path) or \
                Relaunch(list(original), dict(OFF))
        argv = self.resume_args(original, native_id, native_path, None, False)
        off = dict(OFF)
        if not prompt:
            typed = unsent_prompt(native_id, native_path, latest_ms(records))
            if typed:  # typed after the last turn, cut before it reached the transcript
                return Relaunch([*argv, *prompt_tail(typed)], off, "prompt", note=RESENT)
            return Relaunch(argv, off)
        last = self._last_turn_row(records)
        if last == "tool_result" or (last == "user" and not notes):
            return Relaunch(argv, {"CLAUDE_CODE_RESUME_INTERRUPTED_TURN": "1",
                                   "CLAUDE_CODE_RESUME_PROMPT": prompt}, "harness")
        return Relaunch([*argv, *prompt_tail(prompt)], off, "prompt")

    def restart_unstarted(self, original: list[str], native_id: str | None,
                          native_path: str | None) -> Relaunch | None:
        """Killed before its transcript held the prompt. Seen with the real TUIs (2.1.197
        and 2.1.332, polled every 5 ms after Enter): the model request goes out and the
        prompt goes into `history.jsonl` within a few ms of each other (either first), then
        the transcript gets its start-up rows (`mode`, `permission-mode`, `atis-latch` or a
        `file-history-snapshot`), and the prompt row only ~0.1 s later (about a second
        under load). Killed in between, there is no transcript or one `--resume` refuses
        ("No conversation found with session ID") and that makes `--session-id` refuse the
        id ("Session ID … is already in use"). The cut request was never answered, so
        never paid. So dh removes the start-up-only transcript (its rows are in the log),
        starts the same session id afresh with the original flags and the prompt from the
        history, and says so in one line; with no such line (killed before Claude wrote
        it) the line says the prompt is lost."""
        if not native_id or not native_path or not clear_startup_only(Path(native_path)):
            return None
        _, words = self._split(original)
        typed = None if words else unsent_prompt(native_id, native_path, 0)
        note = RESENT if typed else None if words else LOST
        return Relaunch([*original, *prompt_tail(typed)], dict(OFF),
                        "prompt" if typed or words else "none", note=note)

    def with_note(self, args: list[str], note: str) -> list[str] | None:
        """Claude takes its first message as its one positional word, headless or its TUI
        (restart_unstarted puts a typed prompt there too)."""
        return note_after_words(*self._split(args), note)

    def _holds_conversation(self, records: list[Record]) -> bool:
        return any(self.parse(r.raw).kind in CONVERSATION_KINDS for r in records)

    def _last_turn_row(self, records: list[Record]) -> str | None:
        """The kind of the conversation's last row ("user", "tool_result", "assistant",
        "tool_call"); None when there is none or the harness made it up (synthetic)."""
        rows = [p for p in self.conversation(records) if p.kind in ("user", "tool_result", "assistant",
                                                                     "tool_call")]
        return rows[-1].kind if rows and not rows[-1].synthetic else None
