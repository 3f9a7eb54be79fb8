"""The NativeStore protocol: what a kind of native state does for dh. Every method takes the
world (the log) and a source whose `path` is already confined (confine.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Iterator, Protocol

from ..models import Parsed, Record, Session, Source

Rewrite = Callable[[bytes], bytes]
Harness = Callable[[], tuple[list[str], dict]]  # (binary argv, environment), found when needed


class NativeStore(Protocol):
    name: str  # what a wrapper's `store` attribute says
    kinds: frozenset[str]  # the source kinds it keeps
    session_files: bool  # each session in files of its own under the home (else one database)
    offsets_are_bytes: bool  # a source's offsets are byte positions (else counts of row versions)

    def tailer(self, world, wrapper, source: Source, native_id: str | None):
        """What mirrors the source into the log (`sync() -> TailResult`)."""

    def warm(self) -> None:
        """Import now what tailing a new session will need (stores/__init__.warm)."""

    def conversation(self, world, session_id: str, source: Source, wrapper,
                     clip: int | None = None) -> Iterator[Parsed]:
        """The source's conversation as the log holds it now, parsed, in order; with `clip`,
        each string longer than that cut and marked (wrappers/clip.py): what a view reads."""

    def last_turn(self, world, session_id: str, source: Source,
                  clip: int | None = None) -> list[Record]:
        """The records from the last one the wrapper marked as opening a turn (log views);
        with `clip`, their raw bytes clipped as conversation() does."""

    def current_turn(self, world, session: Session, source: Source) -> list[Record]:
        """The records of the current turn, where a dangling call and the turn's end can be."""

    def repair(self, world, wrapper, session: Session, source: Source, call, text: str,
               records: list[Record]) -> bool:
        """Close a dangling tool call with `text` as an error result in the native state;
        False when it cannot be (the conversation moved past the call)."""

    def restore(self, world, wrapper, session: Session, source: Source,
                harness: Harness) -> dict | None:
        """Put the native state back from the log where it is missing or differs; the
        `rebuilt` event's details, or None when nothing was written."""

    def bring_back(self, world, wrapper, session: Session, source: Source, harness: Harness,
                   force: bool, dry_run: bool) -> dict:
        """`dh restore`: put the (confined) source back where the harness looks, under its
        own rules, unless the harness still has it; what was done (`status`)."""

    def rebuild(self, world, wrapper, session: Session, source: Source, home: Path,
                to_dir: Path | None, force: bool):
        """Write the source from the log under home or to_dir (`dh log rebuild`); a
        RebuiltFile, or None when the source holds nothing."""

    def rewritten(self, world, session: Session, source: Source,
                  rewrite: Rewrite) -> tuple[list[Record], int]:
        """The records to commit for the source with `rewrite` applied (a move to another
        checkout), and how many changed."""

    def advance(self, source: Source, records: list[Record]) -> None:
        """Set the source's progress to just after the rewritten records."""
