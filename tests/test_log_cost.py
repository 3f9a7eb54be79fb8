"""`dh log cost`: by day (in a time zone), session, model and harness, across every harness in
one table, with the tokens and dollars the real ccusage (20.0.24) reports for the same files:
Claude Code with a message streamed as rows of growing usage and 1-hour cache writes, Codex
with cached input and reasoning tokens, OpenCode (its real fixtures, and calls to priced models
with cache reads, cache writes and reasoning)."""

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.require import skip_if_missing
from tests.rig import dh

from .conftest import fixture_home, scenarios
from .fakes.transcripts import (codex_with_cache_and_reasoning, opencode_with_cache_and_reasoning,
                                write_streamed_turn)
from .helpers import harnesses
from .helpers.ccusage import CCUSAGE

needs_ccusage = skip_if_missing(CCUSAGE is None,  # required (CI): fail, never skip
                                "ccusage is not installed (npm install --prefix ~/.cache/dh-e2e/ccusage"
                                " ccusage@20.0.24 @ccusage/ccusage-linux-x64@20.0.24)")
STREAMED = "6a1d3b7e-2c4f-4e8a-9b0d-1f2e3a4b5c6d"


def ccusage(agent: str, report: str, env: dict, tz: str) -> dict:
    done = subprocess.run([str(CCUSAGE), agent, report, "--json", "--offline", "-z", tz],
                          capture_output=True, text=True, timeout=120, env={**os.environ, **env})
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def dh_cost(run_dh, *args: str) -> dict:
    done = run_dh("log", "cost", "--json", *args)
    assert done.exit_code == 0, done.output
    return json.loads(done.stdout)


def claude_home(tmp_path: Path) -> Path:
    """The real `basic` session (2026-11-29) and a streamed message at 23:50 UTC on 2026-12-01,
    which is 2026-12-02 in Tokyo."""
    home = fixture_home("claude-code", "basic", tmp_path)
    write_streamed_turn(home / "projects" / "-p" / f"{STREAMED}.jsonl")
    return home


def same_tokens(ours: dict, theirs: dict) -> None:
    t = ours["tokens"]
    assert (t["input"], t["cache_read"], t["cache_write"] + t["cache_write_1h"], t["output"]) == (
        theirs["inputTokens"], theirs["cacheReadTokens"], theirs["cacheCreationTokens"], theirs["outputTokens"])


@needs_ccusage
@pytest.mark.parametrize("tz", ["UTC", "Asia/Tokyo"])
def test_claude_days_and_sessions_agree_with_ccusage(tmp_path, run_dh, tz):
    home = claude_home(tmp_path)
    assert run_dh("import", "claude", "--all", "--home", str(home)).exit_code == 0
    env = {"CLAUDE_CONFIG_DIR": str(home)}
    days = {d["date"]: d for d in ccusage("claude", "daily", env, tz)["daily"]}
    ours = dh_cost(run_dh, "--tz", tz)
    assert [r["day"] for r in ours["rows"]] == sorted(days)
    assert ("2026-12-02" if tz == "Asia/Tokyo" else "2026-12-01") in days
    for row in ours["rows"]:
        same_tokens(row, days[row["day"]])
        assert row["usd"] == pytest.approx(days[row["day"]]["totalCost"], rel=1e-6)
    sessions = {s["sessionId"]: s for s in ccusage("claude", "session", env, tz)["sessions"]}
    by_session = dh_cost(run_dh, "--by", "session")["rows"]
    assert {r["native_id"] for r in by_session} == set(sessions) and STREAMED in sessions
    for row in by_session:
        same_tokens(row, sessions[row["native_id"]])
        assert row["usd"] == pytest.approx(sessions[row["native_id"]]["totalCost"], rel=1e-6)
    streamed = next(r for r in by_session if r["native_id"] == STREAMED)
    assert streamed["tokens"]["output"] == 502 and streamed["tokens"]["cache_write_1h"] == 2000


def codex_home(tmp_path: Path, run_dh) -> Path:
    """The real `basic` Codex session, its calls given cached input and reasoning, imported."""
    home = fixture_home("codex", "basic", tmp_path)
    codex_with_cache_and_reasoning(home)
    assert run_dh("import", "codex", "--all", "--home", str(home)).exit_code == 0
    return home


def same_codex_tokens(tokens: dict, theirs: dict) -> None:
    """ccusage's Codex input is the uncached part, as dh's; reasoning is inside the output."""
    assert (tokens["input"], tokens["cache_read"], tokens["output"], tokens["reasoning"]) == (
        theirs["inputTokens"], theirs["cacheReadTokens"], theirs["outputTokens"],
        theirs["reasoningOutputTokens"])


@needs_ccusage
def test_codex_cached_input_and_reasoning_agree_with_ccusage(tmp_path, run_dh):
    home = codex_home(tmp_path, run_dh)
    theirs = ccusage("codex", "daily", {"CODEX_HOME": str(home)}, "UTC")
    (day,) = theirs["daily"]
    (row,) = dh_cost(run_dh, "--tz", "UTC")["rows"]
    same_tokens(row, day)
    assert row["tokens"]["reasoning"] == day["reasoningOutputTokens"] == 80
    assert (row["tokens"]["input"], row["tokens"]["cache_read"]) == (4000, 8000)  # not 12,000 in
    assert row["usd"] == pytest.approx(day["costUSD"], rel=1e-6) and row["usd"] > 0
    (listed,) = json.loads(run_dh("log", "list", "--json").stdout)
    assert listed["tokens"]["input"] + listed["tokens"]["cache_read"] + listed["tokens"]["output"] \
        == day["totalTokens"] == 12_200
    assert "12.2k" in run_dh("log", "list").stdout.split()  # TOKENS: 20.2k with the cache counted twice


@needs_ccusage
def test_codex_sessions_and_the_log_view_agree_with_ccusage(tmp_path, run_dh):
    """ccusage's session report, and the calls `dh log show --json` lists one by one: the
    cached input counted once (as cache reads, not again as input) and the reasoning shown."""
    home = codex_home(tmp_path, run_dh)
    (theirs,) = ccusage("codex", "session", {"CODEX_HOME": str(home)}, "UTC")["sessions"]
    (row,) = dh_cost(run_dh, "--by", "session")["rows"]
    assert theirs["sessionId"].endswith(row["native_id"]), (theirs["sessionId"], row)
    same_codex_tokens(row["tokens"], theirs)
    assert row["tokens"]["total"] == theirs["totalTokens"] == 12_200
    assert row["usd"] == pytest.approx(theirs["costUSD"], rel=1e-6) and row["usd"] > 0
    shown = json.loads(run_dh("log", "show", row["session"], "--json").stdout)
    calls = [i for i in shown["items"] if i["type"] == "model_call"]
    summed = {kind: sum(c["tokens"][kind] for c in calls)
              for kind in ("input", "cache_read", "output", "reasoning")}
    same_codex_tokens(summed, theirs)
    same_codex_tokens(shown["totals"], theirs)
    assert all(c["tokens"]["cache_read"] > 0 and c["tokens"]["reasoning"] > 0 for c in calls), calls
    assert sum(c["cost_usd"] for c in calls) == pytest.approx(theirs["costUSD"], rel=1e-6)


@needs_ccusage
def test_pi_tokens_agree_with_ccusage(tmp_path, run_dh):
    """Pi's own model (mock-claude) has no price anywhere: the tokens agree, and dh says the
    calls are unpriced where ccusage says $0."""
    home = fixture_home("pi", "basic", tmp_path)
    assert run_dh("import", "pi", "--all", "--home", str(home)).exit_code == 0
    done = subprocess.run([str(CCUSAGE), "pi", "session", "--json", "--offline", "--pi-path",
                           str(home / "sessions")], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    theirs, ours = json.loads(done.stdout)["totals"], dh_cost(run_dh, "--by", "session")["totals"]
    same_tokens(ours, theirs)
    assert ours["tokens"]["total"] == theirs["totalTokens"] > 0
    assert ours["usd"] is None and ours["unpriced_calls"] == ours["calls"] > 0


def opencode_same_tokens(ours: dict, theirs: dict) -> None:
    """ccusage counts OpenCode's output as OpenCode writes it, the reasoning left out (and
    priced apart at the output rate); dh's output holds it."""
    t = ours["tokens"]
    assert (t["input"], t["cache_read"], t["cache_write"] + t["cache_write_1h"], t["output"] - t["reasoning"],
            t["total"]) == (theirs["inputTokens"], theirs["cacheReadTokens"], theirs["cacheCreationTokens"],
                            theirs["outputTokens"], theirs["totalTokens"])


def opencode_same_cost(ours: dict, theirs: dict) -> None:
    if theirs["totalCost"]:
        assert ours["usd"] == pytest.approx(theirs["totalCost"], rel=1e-6)
    else:  # the fixtures' mock-model: no price anywhere; dh says so where ccusage says $0
        assert ours["usd"] is None and ours["unpriced_calls"] == ours["calls"] > 0


@needs_ccusage
@pytest.mark.parametrize("scenario", scenarios("opencode") + ["priced"])
def test_opencode_days_and_sessions_agree_with_ccusage(scenario, tmp_path, run_dh):
    """The real OpenCode fixtures (and one of them as calls to priced models with cache reads,
    cache writes and reasoning): ccusage's `opencode` reports read the same database."""
    data = tmp_path / "opencode"
    data.mkdir()
    db = fixture_home("opencode", "multiturn" if scenario == "priced" else scenario, data)
    db = db.rename(data / "opencode.db")  # where ccusage looks, under OPENCODE_DATA_DIR
    if scenario == "priced":
        opencode_with_cache_and_reasoning(db)
    assert run_dh("import", "opencode", "--all", "--home", str(db)).exit_code == 0
    env = {"OPENCODE_DATA_DIR": str(data)}
    days = {d["date"]: d for d in ccusage("opencode", "daily", env, "UTC")["daily"]}
    ours = dh_cost(run_dh, "--tz", "UTC")
    assert [r["day"] for r in ours["rows"]] == sorted(days) and days
    for row in ours["rows"]:
        opencode_same_tokens(row, days[row["day"]])
        opencode_same_cost(row, days[row["day"]])
    sessions = {s["sessionId"]: s for s in ccusage("opencode", "session", env, "UTC")["sessions"]}
    by_session = dh_cost(run_dh, "--by", "session")["rows"]
    assert {r["native_id"] for r in by_session} == set(sessions)
    for row in by_session:
        opencode_same_tokens(row, sessions[row["native_id"]])
        opencode_same_cost(row, sessions[row["native_id"]])
    if scenario == "priced":
        assert ours["totals"]["usd"] > 0 and ours["totals"]["tokens"]["reasoning"] > 0
        assert ours["totals"]["tokens"]["cache_write"] > 0


def test_every_harness_in_one_table(tmp_path, run_dh):
    for harness in harnesses.ALL:
        (tmp_path / harness).mkdir()
        home = fixture_home(harness, "basic", tmp_path / harness)
        assert run_dh("import", harness, "--all", "--home", str(home)).exit_code == 0
    report = dh_cost(run_dh, "--by", "harness", "--by", "model")
    assert {r["harness"] for r in report["rows"]} == {"claude-code", "codex", "opencode", "pi"}
    listed = json.loads(run_dh("log", "list", "--json").stdout)
    assert report["totals"]["calls"] == sum(s["tokens"]["model_calls"] for s in listed)
    assert report["totals"]["tokens"]["total"] == sum(
        s["tokens"]["input"] + s["tokens"]["cache_read"] + s["tokens"]["cache_write"]
        + s["tokens"]["cache_write_1h"] + s["tokens"]["output"] for s in listed)
    claude = next(r for r in report["rows"] if r["harness"] == "claude-code")
    assert claude["usd"] > 0 and claude["unpriced_calls"] == 0
    text = run_dh("log", "cost", "--by", "harness").stdout
    assert text.splitlines()[0].split()[:3] == ["HARNESS", "CALLS", "IN"]
    assert [line.split()[0] for line in text.splitlines()[1:]] == ["claude-code", "codex", "opencode",
                                                                   "pi", "total"]


def test_an_unknown_time_zone_is_one_error_line(tmp_path):
    done = dh("log", "cost", "--tz", "Nowhere/Else", env={"DH_HOME": str(tmp_path)})
    assert done.returncode == 2 and done.stderr.splitlines() == [
        "Error: unknown time zone: 'Nowhere/Else' (hint: give an IANA name, e.g. Europe/Paris or UTC)"]
