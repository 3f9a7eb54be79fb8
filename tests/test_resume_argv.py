"""A relaunch's argv never lets a value flag the user left without its value (`--model` at
the end) take dh's own next word: each wrapper's resume leaves that flag out. On the real
Claude Code in tests/e2e/test_resume_argv_real.py."""

from __future__ import annotations

import pytest

from dh_cli import wrappers

ENDING_IN_MODEL = {  # harness: (a command line ending in a value-less --model, dh's own resume words)
    "claude": (["-p", "hi", "--model"], ["-p", "--resume=abc-123", "go on"]),
    "pi": (["-p", "hi", "--model"], ["-p", "--session", "/x/y.jsonl", "go on"]),
    "codex": (["exec", "hi", "--model"], ["exec", "resume", "abc-123", "go on"]),
    "opencode": (["run", "hi", "--model"], ["run", "--session=abc-123", "go on"]),
}


@pytest.mark.parametrize("harness", ENDING_IN_MODEL)
def test_a_value_flag_without_its_value_is_left_out_of_a_resume(harness):
    original, resumed = ENDING_IN_MODEL[harness]
    assert wrappers.get(harness).resume_args(original, "abc-123", "/x/y.jsonl", "go on", True) == resumed


@pytest.mark.parametrize("harness", ENDING_IN_MODEL)
def test_a_value_flag_with_its_value_is_kept(harness):
    original, _ = ENDING_IN_MODEL[harness]
    argv = wrappers.get(harness).resume_args([*original, "opus"], "abc-123", "/x/y.jsonl", "go on", True)
    assert argv[argv.index("--model") + 1] == "opus"
