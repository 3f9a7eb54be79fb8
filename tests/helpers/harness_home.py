"""Losing a harness's whole home in a test: everything the real CLI keeps under the test's
HOME goes, but for the files the test itself wrote there (its config), which a person whose
disk died would write again."""

from __future__ import annotations

import shutil

# what each harness keeps, relative to the test's HOME
HOME_DIRS = {"claude-code": [".claude"], "codex": [".codex"], "pi": ["pi-agent"],
             "opencode": [".local/share/opencode", ".local/state/opencode", ".cache/opencode"]}


def lose_the_home(home, harness: str, keep: list[str]) -> None:
    """Delete the harness's folders under `home`; the files `keep` names (relative to it)
    are put back as they were, when they were there."""
    kept = {rel: (home / rel).read_bytes() for rel in keep if (home / rel).exists()}
    for rel in HOME_DIRS[harness]:
        shutil.rmtree(home / rel, ignore_errors=True)
    for rel, data in kept.items():
        (home / rel).parent.mkdir(parents=True, exist_ok=True)
        (home / rel).write_bytes(data)
