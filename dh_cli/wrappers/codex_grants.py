"""What Codex's flags let its model do without asking (grants.py), from 0.171.0's --help
(--full-auto and --yolo: older releases). The sandbox says what runs without asking; -a only
says when to ask, so alone it grants nothing."""

from __future__ import annotations

from .grants import ALL, ASK, AUTO, EDITS, Grant, switch, value_level

SANDBOXES = {"read-only": ASK, "workspace-write": EDITS, "danger-full-access": ALL}
APPROVALS = {"untrusted": ASK, "on-failure": ASK, "on-request": ASK, "never": ASK}


def _config_grant(values: list[str]) -> Grant | None:
    """`-c sandbox_mode="…"` is --sandbox; any other override grants nothing by itself."""
    key, _, value = (values[-1] if values else "").partition("=")
    if key.strip() != "sandbox_mode":
        return Grant(ASK)
    return value_level(SANDBOXES)([value.strip().strip("'\"")])


GRANT_TABLE = {
    "--dangerously-bypass-approvals-and-sandbox": switch(ALL), "--yolo": switch(ALL),
    "-s": value_level(SANDBOXES), "--sandbox": value_level(SANDBOXES),
    "--full-auto": switch(EDITS), "--approve-for-me": switch(AUTO),
    "-a": value_level(APPROVALS), "--ask-for-approval": value_level(APPROVALS),
    "-c": _config_grant, "--config": _config_grant}
GRANT_FLAGS = {ALL: ("--dangerously-bypass-approvals-and-sandbox",),
               AUTO: ("--approve-for-me",), EDITS: ("--sandbox", "workspace-write")}
