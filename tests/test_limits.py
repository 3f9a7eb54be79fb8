"""Each wrapper's recognition of a provider's limit (Wrapper.limit_from), on the rows the real
programs wrote (tests/fixtures/limits/MANIFEST.md), and the reading of reset times."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from dh_cli.models import Record
from dh_cli.wrappers import get
from dh_cli.wrappers.limits import reset_after, retry_after, wait_told

FIXTURES = Path(__file__).parent / "fixtures" / "limits"
UTC = timezone.utc


def records(name: str, edit=None) -> list[Record]:
    lines = (FIXTURES / name).read_bytes().splitlines()
    if edit:
        lines = [edit(line) for line in lines]
    return [Record(source_id=1, generation=1, offset=i, raw=line) for i, line in enumerate(lines)]


def epoch(text: str, tz=UTC) -> float:
    return datetime.fromisoformat(text).replace(tzinfo=tz).timestamp()


def with_text(text: str):
    """An edit of the captured Claude Code 2.1.332 limit row: the plan's text in place of the API's."""
    def edit(line: bytes) -> bytes:
        obj = json.loads(line)
        if obj.get("error") != "rate_limit":
            return line
        obj["message"]["content"][0]["text"] = text
        return json.dumps(obj, ensure_ascii=False).encode()
    return edit


@pytest.mark.parametrize("name", ["claude-code-2.1.197-429.jsonl", "claude-code-2.1.332-429.jsonl"])
def test_claude_code_api_rate_limit_row_is_a_limit_without_a_reset(name):
    found = get("claude-code").limit_from(records(name), epoch("2026-12-02T14:20:00"))
    assert found is not None
    assert (found.which, found.label, found.reset_at) == ("rate_limit", "rate", None)
    assert "Request rejected (429)" in found.text


@pytest.mark.parametrize("text,which,label,reset", [
    ("You've hit your session limit · resets 3pm (UTC)", "five_hour", "5-hour", "2026-12-02T15:00:00"),
    ("You've hit your session limit · resets 3:30pm (UTC)", "five_hour", "5-hour", "2026-12-02T15:31:00"),
    ("You've hit your weekly limit · resets Dec 5, 9am (UTC)", "seven_day", "weekly", "2026-12-05T09:00:00"),
    ("You've hit your Opus limit · resets Jan 3, 2027, 10am (UTC)", "seven_day_opus", "weekly Opus",
     "2027-01-03T10:00:00"),
    ("You've hit your usage limit · resets 1am (UTC)", "usage", "usage", "2026-12-03T01:00:00"),
])
def test_claude_code_plan_texts_name_the_limit_and_its_reset(text, which, label, reset):
    found = get("claude-code").limit_from(records("claude-code-2.1.332-429.jsonl", with_text(text)),
                                          epoch("2026-12-02T14:20:00"))
    assert (found.which, found.label) == (which, label)
    assert found.reset_at == epoch(reset)


def test_claude_code_a_turn_that_went_on_after_the_limit_is_no_limit():
    rows = records("claude-code-2.1.197-429.jsonl")
    later = json.dumps({"type": "user", "message": {"role": "user", "content": "go on"}}).encode()
    rows.append(Record(source_id=1, generation=1, offset=99, raw=later))
    assert get("claude-code").limit_from(rows, epoch("2026-12-02T14:20:00")) is None


@pytest.fixture
def utc_here(monkeypatch):
    """The machine's zone is UTC, as it was when the rows were captured (Codex prints a local time)."""
    import time

    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def test_codex_usage_limit_reached_reads_the_local_reset_time(utc_here):
    # captured at 14:16:16 UTC; the server's reset was 14:16:46; Codex printed "2:16 PM"
    found = get("codex").limit_from(records("codex-0.171.0-usage-limit-reached.jsonl"),
                                    epoch("2026-12-02T14:16:16"))
    assert (found.which, found.label) == ("usage_limit_exceeded", "usage")
    assert "try again at" in found.text
    assert epoch("2026-12-02T14:16:46") <= found.reset_at <= epoch("2026-12-02T14:17:00")


def test_codex_rate_limit_exceeded_is_a_limit_without_a_reset():
    found = get("codex").limit_from(records("codex-0.171.0-rate-limit-exceeded.jsonl"),
                                    epoch("2026-12-02T14:16:30"))
    assert (found.which, found.label, found.reset_at) == ("rate_limit", "rate", None)


def test_codex_a_turn_that_completed_is_no_limit():
    def ok(line: bytes) -> bytes:
        obj = json.loads(line)
        if obj.get("payload", {}).get("type") == "task_complete":
            obj["payload"]["error"] = None
        return json.dumps(obj).encode()
    assert get("codex").limit_from(records("codex-0.171.0-usage-limit-reached.jsonl", ok),
                                   epoch("2026-12-02T14:16:30")) is None


def last_message_edit(change):
    """An edit of the last `message` line or row of a Pi or OpenCode capture: change(message)."""
    def edit(lines: list[bytes]) -> list[bytes]:
        at = max(i for i, line in enumerate(lines) if b'"type":"message"' in line or b'"table": "message"' in line)
        obj = json.loads(lines[at])
        if "table" in obj:
            data = json.loads(obj["data"])
            change(data)
            obj["data"] = json.dumps(data)
        else:
            change(obj["message"])
        return [*lines[:at], json.dumps(obj).encode(), *lines[at + 1:]]
    return edit


def capture(name: str, edit=None) -> list[Record]:
    lines = (FIXTURES / name).read_bytes().splitlines()
    lines = edit(lines) if edit else lines
    return [Record(source_id=1, generation=1, offset=i, raw=line) for i, line in enumerate(lines)]


@pytest.mark.parametrize("name", ["pi-0.73.1-anthropic-429.jsonl", "pi-1.6.0-anthropic-429.jsonl"])
def test_pi_messages_api_429_is_a_rate_limit_without_a_reset(name):
    found = get("pi").limit_from(capture(name), epoch("2026-12-02T17:30:00"))
    assert (found.which, found.label, found.reset_at) == ("rate_limit", "rate", None)
    assert "rate_limit_error" in found.text


@pytest.mark.parametrize("name,told", [("pi-0.73.1-openai-429.jsonl", 1), ("pi-1.6.0-openai-429.jsonl", 400)])
def test_pi_chat_completions_429_resets_when_its_body_said(name, told):
    rows = capture(name)
    last = json.loads(rows[-1].raw)["message"]
    found = get("pi").limit_from(rows, epoch("2026-12-02T17:30:00"))
    assert (found.which, found.label) == ("rate_limit", "rate")
    assert found.reset_at == pytest.approx(last["timestamp"] / 1000 + told)


def test_pi_other_errors_and_turns_that_went_on_are_no_limit():
    def server_error(message):
        message["errorMessage"] = "500 {\"type\":\"error\",\"error\":{\"type\":\"api_error\"}}"

    def answered(message):
        message.update(stopReason="stop", content=[{"type": "text", "text": "All done."}])
        message.pop("errorMessage")
    for change in (server_error, answered):
        assert get("pi").limit_from(capture("pi-1.6.0-anthropic-429.jsonl", last_message_edit(change)), 0.0) is None


def test_opencode_messages_api_429_names_the_unified_limit_and_its_reset():
    found = get("opencode").limit_from(capture("opencode-1.18.33-anthropic-429.jsonl"), 0.0)
    assert (found.which, found.label) == ("five_hour", "5-hour")
    assert found.reset_at == 1796232441.0  # the `anthropic-ratelimit-unified-reset` header the server sent


def test_opencode_chat_completions_429_resets_after_its_retry_after():
    rows = capture("opencode-1.18.33-openai-429.jsonl")
    message = json.loads([json.loads(r.raw) for r in rows if b'"table": "message"' in r.raw][-1]["data"])
    found = get("opencode").limit_from(rows, 0.0)
    assert (found.which, found.label) == ("rate_limit", "rate")
    assert found.reset_at == message["time"]["completed"] / 1000 + 2  # retry-after: 2


def test_opencode_other_errors_and_answers_are_no_limit():
    def server_error(message):
        message["error"]["data"].update(statusCode=500, responseBody='{"error": {"type": "server_error"}}')

    def answered(message):
        message.pop("error")
        message["finish"] = "stop"
    for change in (server_error, answered):
        rows = capture("opencode-1.18.33-openai-429.jsonl", last_message_edit(change))
        assert get("opencode").limit_from(rows, 0.0) is None


@pytest.mark.parametrize("text,seconds", [("Please try again in 20s.", 20), ("try again in 1m30s", 90),
                                          ("try again in 640ms", 0.64), ("Please try again later.", None)])
def test_wait_told_reads_openai_try_again_in(text, seconds):
    assert wait_told(text) == (pytest.approx(seconds) if seconds is not None else None)


def test_retry_after_reads_seconds_and_http_dates():
    assert retry_after("2", 100.0) == 102.0
    assert retry_after("Wed, 02 Dec 2026 17:27:19 GMT", 0.0) == epoch("2026-12-02T17:27:19")
    assert retry_after("soon", 0.0) is None


@pytest.mark.parametrize("text,now,expected", [
    ("try again at 2:16 PM.", "2026-12-02T14:16:16", "2026-12-02T14:17:00"),
    ("try again at 11:58 AM.", "2026-12-02T14:00:00", "2026-12-03T11:59:00"),  # passed today: tomorrow
    ("try again at Dec 5 3:04 PM.", "2026-12-02T14:00:00", "2026-12-05T15:05:00"),
])
def test_reset_after_reads_codex_clock_times(text, now, expected):
    assert reset_after(text, ("try again at",), epoch(now), UTC) == epoch(expected)


def test_reset_after_reads_the_named_zone_over_the_local_one():
    paris = ZoneInfo("Europe/Paris")
    got = reset_after("resets 3pm (Europe/Paris)", ("resets",), epoch("2026-12-02T10:00:00"), UTC)
    assert got == epoch("2026-12-02T15:00:00", paris)


def test_reset_after_without_a_time_is_none():
    assert reset_after("Please try again later.", ("try again at", "resets"), 0.0, UTC) is None
