"""What sessions cost: every model call priced from genai-prices' table (cache reads and
writes at their own rates), the same dollars ccusage reports for the same tokens."""

import json
import os
import shutil
import subprocess
from decimal import Decimal
from pathlib import Path

import pytest

from tests.require import skip_if_missing

from dh_cli.pricing import Pricer
from dh_cli.tokens import Usage, counts
from dh_cli.wrappers.claude import claude_usage
from dh_cli.wrappers.codex import codex_usage

from .conftest import FIXTURES, fixture_home, scenarios
from .fakes.transcripts import write_claude_transcript, write_streamed_turn
from .helpers.ccusage import CCUSAGE

# Published per-million-token prices of claude-opus-4-8 (the model of every Claude Code fixture):
# input $5, output $25, cache read $0.50, cache write (5 min) $6.25 -- the figures in
# genai-prices 0.2.3's data (checked below, so a change of the table shows here), the ones
# ccusage 20.0.24 --offline applies (it printed $0.0007 for basic and $0.00105 for
# subagent-tasks; $164.82081 for a 100 MB synthetic transcript with 16.8M cache-read tokens, the
# same as dh), and the ones behind Claude Code's own `total_cost_usd` in the fixtures' result
# lines ($0.0007 for basic: 40 in x $5 + 20 out x $25 per million).
OPUS = {"input": 5, "output": 25, "cache_read": 0.5, "cache_write": 6.25}


def native_usage(home: Path) -> list[dict]:
    """Each Claude model call's usage read from the native files, once per message id
    (Claude Code writes a message as one line per content block, each with the usage)."""
    seen, calls = set(), []
    for path in sorted(home.glob("projects/**/*.jsonl")):
        for line in path.read_text().splitlines():
            row = json.loads(line)
            message = row.get("message") if isinstance(row.get("message"), dict) else {}
            if row.get("type") == "assistant" and "usage" in message and message["id"] not in seen:
                seen.add(message["id"])
                if message.get("model") != "<synthetic>":
                    calls.append(message["usage"])
    return calls


def expected_usd(calls: list[dict]) -> float:
    return sum(u["input_tokens"] * OPUS["input"] + u["output_tokens"] * OPUS["output"]
               + u.get("cache_read_input_tokens", 0) * OPUS["cache_read"]
               + u.get("cache_creation_input_tokens", 0) * OPUS["cache_write"] for u in calls) / 1e6


def test_the_price_table_holds_the_published_opus_prices():
    from genai_prices import data_snapshot

    _, model = data_snapshot.get_snapshot().find_provider_model("claude-opus-4-8", None, None, None)
    price = model.prices if not isinstance(model.prices, list) else model.prices[-1].prices
    assert (price.input_mtok, price.output_mtok, price.cache_read_mtok, price.cache_write_mtok) == \
        tuple(Decimal(str(OPUS[k])) for k in ("input", "output", "cache_read", "cache_write"))


def harness_cost(scenario: str) -> float | None:
    """What Claude Code itself says the runs cost (`total_cost_usd` of each run's result
    line, from its own price table); None when a killed run printed no result."""
    runs = sorted((FIXTURES / "claude-code" / scenario).glob("run*.stdout.jsonl"))
    results = [json.loads(line) for run in runs for line in run.read_text().splitlines()
               if '"type":"result"' in line]
    return sum(r["total_cost_usd"] for r in results) if len(results) == len(runs) else None


@pytest.mark.parametrize("scenario", scenarios("claude-code"))
def test_real_claude_sessions_cost_what_the_published_prices_give(scenario, tmp_path, run_dh):
    home = fixture_home("claude-code", scenario, tmp_path)
    assert run_dh("import", "claude", "--all", "--home", str(home)).exit_code == 0
    (listed,) = json.loads(run_dh("log", "list", "--json").stdout)
    shown = json.loads(run_dh("log", "show", listed["id"], "--json").stdout)["totals"]["cost"]
    expected = harness_cost(scenario) or expected_usd(native_usage(home))
    assert expected > 0
    assert listed["cost"] == pytest.approx(expected, rel=0.01)
    assert shown["usd"] == pytest.approx(expected, rel=0.01) and shown["unpriced_calls"] == 0


def _ccusage(config_dir: Path) -> dict:
    assert CCUSAGE, "ccusage is not installed: .ci/run installs it into ~/.cache/dh-e2e/ccusage"
    done = subprocess.run([str(CCUSAGE), "session", "--json", "--offline"], capture_output=True,
                          text=True, timeout=120, env={**os.environ, "CLAUDE_CONFIG_DIR": str(config_dir)})
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)["totals"]


@skip_if_missing(CCUSAGE is None,  # required (CI): fail, never skip
                 "ccusage is not installed (npm install --prefix"
                    " ~/.cache/dh-e2e/ccusage ccusage@20.0.24 @ccusage/ccusage-linux-x64@20.0.24)")
def test_costs_equal_what_ccusage_reports(tmp_path, run_dh, monkeypatch):
    """The real ccusage over the same files: the real fixtures, and a transcript with cache reads."""
    big = tmp_path / "synthetic"
    write_claude_transcript(big / "projects" / "-p" / "5f0c2a9e-1b7d-4c3e-9a61-2d8f0e4b7c15.jsonl", 2 << 20)
    homes = {s: fixture_home("claude-code", s, tmp_path / s) for s in scenarios("claude-code")}
    homes["synthetic"] = big
    pricer = Pricer()
    for name, home in homes.items():
        monkeypatch.setenv("DH_HOME", str(tmp_path / "logs" / name))  # killed-resumed extends killed
        assert run_dh("import", "claude", "--all", "--home", str(home)).exit_code == 0
        (session,) = json.loads(run_dh("log", "list", "--json").stdout)
        theirs, ours = _ccusage(home), session["tokens"]
        # the same pricing: ccusage's dollars for its tokens are ours for those tokens
        same = {"input": theirs["inputTokens"], "output": theirs["outputTokens"],
                "cache_read": theirs["cacheReadTokens"], "cache_write": theirs["cacheCreationTokens"]}
        assert pricer.cost("claude-opus-4-8", same) == pytest.approx(theirs["totalCost"], rel=0.01)
        if name == "multiturn":
            # the mock served each of the 3 launches the same message ids, and ccusage counts
            # an id once: it sees 2 of the 6 calls. dh counts all 6, as Claude Code's own
            # result lines do (3 x $0.00035).
            assert (theirs["inputTokens"], ours["input"]) == (20, 60)
            assert session["cost"] == pytest.approx(harness_cost(name), rel=0.01)
            continue
        assert (ours["input"], ours["output"], ours["cache_read"]) == (
            theirs["inputTokens"], theirs["outputTokens"], theirs["cacheReadTokens"]), name
        assert session["cost"] == pytest.approx(theirs["totalCost"], rel=0.01), name


@skip_if_missing(CCUSAGE is None,  # required (CI): fail, never skip
                 "ccusage is not installed (npm install --prefix"
                    " ~/.cache/dh-e2e/ccusage ccusage@20.0.24 @ccusage/ccusage-linux-x64@20.0.24)")
def test_a_streamed_message_with_hour_long_cache_writes_costs_what_ccusage_reports(tmp_path, run_dh):
    """A message streamed as three rows with growing output_tokens counts once, with its final
    usage (502 out, not 10), and its 1-hour cache writes at the 1-hour rate: ccusage's figures."""
    home = tmp_path / "claude"
    write_streamed_turn(home / "projects" / "-p" / "5f0c2a9e-1b7d-4c3e-9a61-2d8f0e4b7c15.jsonl")
    assert run_dh("import", "claude", "--all", "--home", str(home)).exit_code == 0
    (session,) = json.loads(run_dh("log", "list", "--json").stdout)
    theirs, ours = _ccusage(home), session["tokens"]
    assert (ours["input"], ours["output"], ours["cache_read"], ours["cache_write"] + ours["cache_write_1h"]) == (
        theirs["inputTokens"], theirs["outputTokens"], theirs["cacheReadTokens"], theirs["cacheCreationTokens"])
    assert (ours["output"], ours["cache_write_1h"], ours["model_calls"]) == (502, 2000, 1)
    assert session["cost"] == pytest.approx(theirs["totalCost"], rel=1e-6)
    shown = json.loads(run_dh("log", "show", session["id"], "--json").stdout)["totals"]
    assert (shown["output"], shown["cost"]["usd"]) == (502, pytest.approx(theirs["totalCost"], rel=1e-6))
    # and what the published prices give, 1-hour writes at $10 (5-minute ones at $6.25)
    assert session["cost"] == pytest.approx((12 * 5 + 20000 * 0.5 + 1000 * 6.25 + 2000 * 10 + 502 * 25) / 1e6)


def test_cache_reads_and_writes_are_priced_as_such():
    pricer = Pricer()
    # Anthropic counts cached tokens apart from input_tokens; 1-hour writes cost $10, not $6.25
    usage = claude_usage({"input_tokens": 1000, "output_tokens": 100, "cache_read_input_tokens": 10_000,
                          "cache_creation_input_tokens": 3000,
                          "cache_creation": {"ephemeral_5m_input_tokens": 2000,
                                             "ephemeral_1h_input_tokens": 1000}})
    assert usage == counts(input=1000, cache_read=10_000, cache_write=2000, cache_write_1h=1000, output=100)
    assert pricer.cost("claude-opus-4-8", usage) == pytest.approx(
        (1000 * 5 + 100 * 25 + 10_000 * 0.5 + 2000 * 6.25 + 1000 * 10) / 1e6)
    # OpenAI (Codex) counts them inside input_tokens, and reasoning inside output_tokens; its
    # wrapper takes them out once. gpt-5: $1.25 in, $0.125 cached, $10 out
    usage = codex_usage({"input_tokens": 10_000, "cached_input_tokens": 8000, "output_tokens": 100,
                         "reasoning_output_tokens": 64})
    assert usage == counts(input=2000, cache_read=8000, output=100, reasoning=64)
    assert pricer.cost("gpt-5", usage) == pytest.approx((2000 * 1.25 + 8000 * 0.125 + 100 * 10) / 1e6)
    # a model priced in tiers (by prompt size) goes through the table's own calculation
    tiered = pricer.cost("claude-sonnet-4-5", counts(input=1000, output=100, cache_read=500,
                                                     cache_write=200, cache_write_1h=100))
    assert tiered == pytest.approx((1000 * 3 + 500 * 0.3 + 200 * 3.75 + 100 * 6 + 100 * 15) / 1e6)
    assert pricer.cost("claude-opus-4-8[1m]", {"input": 10, "output": 5}) == pytest.approx(175e-6)
    assert pricer.cost("mock-model", {"input": 10, "output": 5}) is None


def test_reasoning_priced_apart_is_priced_at_its_own_rate():
    """genai-prices prices sonar-deep-research's reasoning at $3 a million, the rest of its output
    at $8 and its input at $2: reasoning, inside output in dh's kinds, is taken out at its rate."""
    import datetime as dt

    from genai_prices import data_snapshot

    from dh_cli import pricing

    _, info = data_snapshot.get_snapshot().find_provider_model("sonar-deep-research", None, "perplexity", None)
    pricer = pricing.Pricer()
    pricer._found["sonar-deep-research"] = pricing._rates(info.get_prices(dt.datetime.now(dt.timezone.utc)))
    usage = counts(input=1000, output=1000, reasoning=400)
    assert pricer.cost("sonar-deep-research", usage) == pytest.approx((1000 * 2 + 600 * 8 + 400 * 3) / 1e6)
    assert pricer.cost("sonar-deep-research", counts(input=1000, output=1000)) == pytest.approx(10e-3)
    # a damaged count (more reasoning than output) prices, never raises
    assert pricer.cost("sonar-deep-research", counts(output=10, reasoning=50)) is not None


def test_a_model_the_table_does_not_know_is_no_cost_not_zero(tmp_path, run_dh):
    home = fixture_home("codex", "basic", tmp_path)  # its mock server names the model mock-model
    run_dh("import", "codex", "--all", "--home", str(home))
    (listed,) = json.loads(run_dh("log", "list", "--json").stdout)
    assert listed["cost"] is None
    text = run_dh("log", "show", listed["id"]).stdout
    assert "cost: - (4 call(s) of a model the price table does not know: mock-model)" in text


def test_remembered_prices_are_the_tables_and_are_read_back_for_the_same_table(tmp_path):
    kept, usage = tmp_path / "model-prices.json", Usage(40, 300, 1000, 200, 20, 0)
    table = Pricer().cost("claude-opus-4-8", usage)
    assert Pricer(remember=kept).cost("claude-opus-4-8", usage) == table
    assert Pricer(remember=kept).cost("mock-model", usage) is None
    written = json.loads(kept.read_text())
    assert set(written["models"]) == {"claude-opus-4-8", "mock-model"}
    # what a later list prices with is the file's (doubled here to tell it from the table's)
    written["models"]["claude-opus-4-8"] = [str(2 * Decimal(r)) for r in written["models"]["claude-opus-4-8"]]
    kept.write_text(json.dumps(written))
    assert Pricer(remember=kept).cost("claude-opus-4-8", usage) == pytest.approx(2 * table)
    kept.write_text(json.dumps({**written, "table": "another table, or another hour"}))
    assert Pricer(remember=kept).cost("claude-opus-4-8", usage) == table
