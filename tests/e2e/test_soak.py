"""The CI slice of the fault soak (tests/soak): for each harness of the version set, a few
cases drawn from a fixed seed, each killed at its moments (the harness, dh, both, the whole
home) and taken on again, then checked against every invariant of tests/soak/checks.py. The
long run (`python -m tests.soak`) draws from the same code with more kills."""

from __future__ import annotations

import pytest

from tests.helpers import harnesses
from tests.soak.case import run_case
from tests.soak.plan import draw_cases

pytestmark = pytest.mark.e2e

SEED = 33  # a case of three kills per harness; TUIs: Claude Code newest, Codex, OpenCode
KILLS = 3  # per harness and version set


@pytest.mark.parametrize("harness", harnesses.ALL)
def test_a_slice_of_the_soak_keeps_every_invariant(installed, harness, tmp_path):
    cases = draw_cases(SEED, [harness], installed.version_set, KILLS, tui_share=0.3)
    outcomes = [run_case(case, installed, tmp_path, keep=True) for case in cases]
    assert sum(o.kills_made for o in outcomes) >= 1, "no kill landed: the slice tested nothing"
    failed = {o.case.name: o.violations for o in outcomes if o.violations}
    assert failed == {}, f"kept in {tmp_path}"
