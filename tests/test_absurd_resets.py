"""A limit's reset time no clock can show (inf, 1e300, negative, a word), told by a harness's
headers or forged in a world's `limit` event, neither stops `dh run` nor `dh log show`
(time.localtime raised OverflowError), and `dh resume --at-reset` never waits more than
plan.MOST_AT_RESET (8 days: a week is the longest limit a provider has): a reset further
away (2038, as a forged event asked) is refused with one Error line."""

from __future__ import annotations

from pathlib import Path

import pytest

from dh_cli import events
from dh_cli.events_text import summary
from dh_cli.models import Record
from dh_cli.supervisor.waiting import clock_time
from dh_cli.wrappers import get
from dh_cli.worlds.local import LocalWorld

from .helpers.cli import dh, one_error

CAPTURE = Path(__file__).parent / "fixtures" / "limits" / "opencode-1.18.33-anthropic-429.jsonl"
ABSURD = ["1e999", "-1e300", "99999999999999", "nan", "-5"]


def told(reset: str) -> list[Record]:
    lines = CAPTURE.read_bytes().replace(b"1796232441", reset.encode()).splitlines()
    return [Record(source_id=1, generation=1, offset=i, raw=line) for i, line in enumerate(lines)]


@pytest.mark.parametrize("reset", ABSURD)
def test_an_absurd_reset_in_a_harness_s_headers_is_no_reset(reset):
    found = get("opencode").limit_from(told(reset), 0.0)
    assert found.which == "five_hour" and found.reset_at is None
    assert get("opencode").limit_from(told("1796232441"), 0.0).reset_at == 1796232441.0  # the control


@pytest.mark.parametrize("value", [float("inf"), -1e300, 1e300, float("nan"), "soon", [1]])
def test_a_forged_reset_shows_in_words(value):
    assert clock_time(value) == "an unreadable time"
    line = summary(events.LIMIT, {"label": "5-hour", "which": "five_hour", "reset_at": value,
                                  "where": "a world"})
    assert "reset time dh cannot read" in line


def limited_session(reset_at) -> str:
    world = LocalWorld()
    sid = world.create_session("pi", cwd="/nowhere", state="exited").id
    world.add_event(sid, events.LIMIT, {"label": "5-hour", "which": "five_hour", "reset_at": reset_at,
                                        "where": "a world", "text": "limit"})
    return sid


@pytest.mark.parametrize("reset_at", [1e300, -1e300, "soon"])
def test_dh_log_show_of_a_forged_reset_works(reset_at):
    shown = dh("log", "show", limited_session(reset_at))
    assert shown.returncode == 0 and "reset time dh cannot read" in shown.stdout, shown.stderr


def test_at_reset_refuses_a_reset_past_any_provider_s_limit():
    sid = limited_session(float(2 ** 31))  # 2038-01-19, as a forged event asked
    one_error(dh("resume", sid, "--at-reset"), 2, "more than 8 days away")


def test_at_reset_waits_for_a_reset_within_the_cap():
    from dh_cli.resume.plan import wait_for_reset

    class Clock:
        slept: list = []

        def time(self):
            return 1_000_000.0

        def sleep(self, seconds):
            self.slept.append(seconds)

    world, clock = LocalWorld(), Clock()
    sid = limited_session(1_000_000.0 + 7 * 86400)
    wait_for_reset(world, sid, lambda _line: None, clock)
    assert clock.slept == [7 * 86400]
