"""Which `projects/<slug>/` folder Claude Code uses for a cwd, found rather than computed: a
long path's slug carries a hash dh does not compute, and a folder can be renamed. The folder
the transcript was written in is kept while it exists; when the cleanup or the user removed
it, a folder whose transcripts say they ran in the same cwd is the one the harness reads for
that cwd now; with none, the folder the harness itself chose when it wrote the session."""

from __future__ import annotations

import json
from itertools import islice
from pathlib import Path

from .base import regular_file
from .claude_cleanup import cleanup_days
from .claude_picker import unhidden

LOOKED_AT = 3  # transcripts read per folder: each one's first rows name its cwd


def restore_relpath(home: Path, relpath: str, cwd: str | None, cwd_of) -> str:
    """`cwd_of(transcript)`: the cwd a transcript's first rows name (first_cwd)."""
    parts = relpath.split("/")
    if len(parts) < 3 or parts[0] != "projects" or not cwd:
        return relpath
    if (home / "projects" / parts[1]).is_dir():
        return relpath
    found = folder_of_cwd(home / "projects", cwd, cwd_of)
    return "/".join(["projects", found, *parts[2:]]) if found else relpath


def folder_of_cwd(projects: Path, cwd: str, cwd_of) -> str | None:
    """The name of the project folder whose transcripts ran in cwd."""
    try:
        folders = sorted(p for p in projects.iterdir() if p.is_dir() and not p.is_symlink())
    except OSError:
        return None
    for folder in folders:
        if any(cwd_of(t) == cwd for t in islice(sorted(folder.glob("*.jsonl")), LOOKED_AT)):
            return folder.name
    return None


def first_cwd(path: Path, max_lines: int = 50) -> str | None:
    if not regular_file(path):
        return None
    try:
        with open(path, "rb") as handle:
            for _, line in zip(range(max_lines), handle):
                try:
                    obj = json.loads(line)
                except ValueError:
                    continue
                if isinstance(obj, dict) and isinstance(obj.get("cwd"), str):
                    return obj["cwd"]
    except OSError:
        return None
    return None


class ClaudeSessionPlaces:
    """Where Claude Code keeps, lists and deletes its sessions: the wrapper's part of `dh restore`."""

    def picker_hides(self, args: list[str]) -> str | None:
        """A `-p` run's rows say `entrypoint: sdk-cli`, and `claude --resume`'s picker hides
        SDK sessions; `claude --resume ID` still resumes them (shared docs, harnesses.md §8)."""
        return "started with -p: `claude --resume` lists no SDK session" if self.is_headless(args) else None

    unhides_picker = True

    def unhidden(self, data: bytes):
        """The transcript with the SDK entrypoint the picker reads set to `cli` (claude_picker.py)."""
        return unhidden(data)

    def cleanup_days(self, home: Path) -> int | None:
        return cleanup_days(home)

    def restore_relpath(self, home: Path, relpath: str, cwd: str | None) -> str:
        return restore_relpath(home, relpath, cwd, first_cwd)
