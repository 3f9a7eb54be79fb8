"""The cases a soak runs, drawn from one seed: which harness and mode, how many kills, and for
each kill what is killed and when. The same seed gives the same cases (the moments are
relative to what the model server has seen, so a loaded machine shifts them only a little)."""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass, field

# what a kill ends: the harness's process group (dh relaunches it), dh (the harness dies with
# it; `dh resume` goes on), both at once, or both and then the harness's whole home
TARGETS = ("harness", "dh", "both", "home")
MODES = ("headless", "tui")
# TUIs the soak drives (tests/e2e/tui.py knows how to seed, type into and quit each)
TUI_HARNESSES = ("claude-code", "codex", "pi", "opencode")
MAX_OFFSET_S = 2.0
REPLIES = 9  # the script's (case.py)


@dataclass
class Kill:
    target: str
    after_requests: int  # main requests of the current attempt to wait for (0: from the launch)
    offset_s: float  # then this long


@dataclass
class Case:
    index: int
    harness: str
    version_set: str
    mode: str
    delays: list[float]  # each scripted reply's delay, seconds
    kills: list[Kill] = field(default_factory=list)

    @property
    def name(self) -> str:
        kills = "+".join(k.target for k in self.kills)
        return f"{self.index:04d}-{self.version_set}-{self.harness}-{self.mode}-{kills}"

    def to_dict(self) -> dict:
        return asdict(self)


def draw_kill(rng: random.Random, mode: str, first: bool) -> Kill:
    target = rng.choice(TARGETS)
    # a harness killed before its first request is relaunched by dh with the prompt it was
    # given (headless); only a TUI needs the typed prompt logged first
    lowest = 0 if target == "harness" and mode == "headless" and first else 1
    return Kill(target, rng.randint(lowest, 2), round(rng.uniform(0, MAX_OFFSET_S), 2))


def draw_case(rng: random.Random, index: int, harness: str, version_set: str,
              tui_share: float) -> Case:
    mode = "tui" if harness in TUI_HARNESSES and rng.random() < tui_share else "headless"
    delays = [round(rng.uniform(0.1, 1.0), 2) for _ in range(REPLIES)]
    case = Case(index, harness, version_set, mode, delays)
    case.kills = [draw_kill(rng, mode, i == 0) for i in range(rng.randint(2, 4))]
    return case


def draw_cases(seed: int, harnesses: list[str], version_set: str, kills: int,
               tui_share: float = 0.25) -> list[Case]:
    """Cases, harness by harness in turn, until each harness has `kills` kills planned."""
    rng = random.Random(f"{seed}-{version_set}-{','.join(harnesses)}")
    planned = {h: 0 for h in harnesses}
    cases: list[Case] = []
    while any(n < kills for n in planned.values()):
        for harness in harnesses:
            if planned[harness] >= kills:
                continue
            case = draw_case(rng, len(cases), harness, version_set, tui_share)
            case.kills = case.kills[: kills - planned[harness]]
            planned[harness] += len(case.kills)
            cases.append(case)
    return cases
