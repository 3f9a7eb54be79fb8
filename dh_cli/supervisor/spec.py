"""What a supervised run is given: the user's settings (`RunOptions`, built once from flags,
environment and config) and the launch itself (`LaunchSpec`: the binary, the harness's
args, its environment and working directory, headless or in a terminal), built once by
`dh run` / `dh resume` before the Supervisor starts. Both are frozen: a change (the cwd a
relocation picked) is a new value made with `dataclasses.replace`, never a mutation."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from .policy import PolicyConfig


@dataclass(frozen=True)
class RunOptions:
    cwd: str  # where dh was started (the harness runs there unless the session says otherwise)
    env: dict[str, str]
    stall_timeout: float | None = None
    stop_wait: float = 5.0  # SIGTERM -> SIGKILL grace when dh stops the harness
    tool_grace: float = 3.0
    replay: dict = field(default_factory=dict)
    continue_prompt: str = "Continue from where you left off."
    policy: PolicyConfig = field(default_factory=PolicyConfig)
    supervise: bool = True
    on_limit: str = "wait"  # a provider's limit: "wait" for its reset and go on, or "stop"
    notice: Callable[[str], None] = print  # one-line messages to the user (stderr)
    link: object = None  # a live world (worlds/live_world.py WorldLink): lease and replication
    local_flags: dict = field(default_factory=dict)  # harness -> this user's flags for a session from elsewhere


@dataclass(frozen=True)
class LaunchSpec:
    binary: tuple[str, ...]  # how to exec the harness (e.g. ("/usr/bin/claude",))
    args: tuple[str, ...]  # the harness's args of this session (what a resume builds on)
    env: dict[str, str]
    cwd: str
    headless: bool = True  # the harness runs without a TUI (its args say so)
    interactive: bool = False  # a TUI in the user's terminal (a pty); else pipes
    # the args came from elsewhere (wrappers/travel.py): never run as an original command
    foreign: bool = False

    def argv(self, args) -> list[str]:
        return [*self.binary, *args]

