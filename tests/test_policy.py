"""The restart policy state machine and the exit classification, tick by tick."""

import pytest

from dh_cli.errors import ConfigError
from dh_cli.wrappers.replay import NEVER_TEXT, SAFE_TEXT, parse_overrides, repair_text, replay_class
from dh_cli.supervisor import states
from dh_cli.supervisor.policy import PolicyConfig, RestartPolicy
from dh_cli.supervisor.runner import Attempt, classify


def test_first_restart_is_immediate_then_backoff_doubles_to_the_cap():
    policy = RestartPolicy(PolicyConfig(max_restarts=10, backoff_base=1, backoff_cap=5))
    delays = [policy.after_exit("crashed", ran_for=2).delay for _ in range(6)]
    assert delays == [0, 1, 2, 4, 5, 5]


def test_too_many_restarts_is_fatal():
    policy = RestartPolicy(PolicyConfig(max_restarts=2))
    assert [policy.after_exit("crashed", 0.1).state for _ in range(3)] == [
        states.BACKOFF, states.BACKOFF, states.FATAL]


def test_stable_running_resets_the_counter():
    policy = RestartPolicy(PolicyConfig(max_restarts=1, stable_secs=60))
    assert policy.after_exit("crashed", 5).state == states.BACKOFF
    assert policy.after_exit("crashed", 120).state == states.BACKOFF  # ran a stable minute
    assert policy.after_exit("crashed", 5).state == states.FATAL


def test_counter_carried_over_from_the_log():
    policy = RestartPolicy(PolicyConfig(max_restarts=3), restarts=3)
    assert policy.after_exit("hung", 10).state == states.FATAL


@pytest.mark.parametrize("outcome", ["finished", "stopped"])
def test_clean_finish_and_user_stop_are_never_restarted(outcome):
    assert RestartPolicy().after_exit(outcome, 0.1).state == states.EXITED


@pytest.mark.parametrize("rc,complete,interactive,user,stalled,expected", [
    (0, True, False, None, False, "finished"),
    (0, False, False, None, False, "finished"),
    (1, True, False, None, False, "finished"),
    (1, False, False, None, False, "crashed"),
    (-9, True, False, None, False, "finished"),
    (-9, True, True, None, False, "crashed"),
    (-9, False, False, None, False, "crashed"),
    (0, False, True, None, False, "finished"),
    (-2, False, False, 2, False, "stopped"),
    (-15, False, False, None, True, "hung"),
])
def test_classify(rc, complete, interactive, user, stalled, expected):
    attempt = Attempt(1, rc=rc, user_signal=user, stalled=stalled)
    assert classify(attempt, complete, interactive) == expected


def test_replay_classes_and_texts():
    assert replay_class("Read", {}) == "safe"
    assert replay_class("Bash", {}) == "never"
    assert replay_class("mcp__github__create_issue", {}) == "never"
    assert replay_class("Bash", parse_overrides(["bash=safe"])) == "safe"
    assert repair_text("never") == NEVER_TEXT and "may already have taken effect" in NEVER_TEXT
    assert repair_text("safe") == SAFE_TEXT
    assert "exit code 3" in repair_text("never", {"finished": True, "exit_code": 3})
    assert "ended the command" in repair_text("never", {"ended_by_dh": True})


@pytest.mark.parametrize("bad", ["bash", "bash=maybe", "=safe"])
def test_malformed_replay_is_a_usage_error(bad):
    with pytest.raises(ConfigError):
        parse_overrides([bad])
