"""What a resume is likely to re-cache (before `dh resume`) and what each resume's first call
cost, on a real Claude Code session (tests/fixtures/real), and the line a hand-run `dh resume`
says, through the CLI with the fake harness; the e2e case with a server that reports cache
writes of both TTLs is tests/e2e/test_limits_real.py."""

import json
import sqlite3
from pathlib import Path

import pytest

from dh_cli.logviews.costs import costs, zone
from dh_cli.logviews.render import money
from dh_cli.logviews.resumecost import _input_cost, _split, likely_recache
from dh_cli.tokens import Usage
from dh_cli.pricing import Pricer
from dh_cli.worlds.local import LocalWorld
from dh_cli.wrappers import get

from .conftest import fixture_home
from .fakes.model_server import FakeModelServer
from .helpers.prices import input_price
from .helpers.resumed_logs import CAPTURED, PRICED, resumed_home
from .rig import SCRIPT, Rig, dh


@pytest.fixture
def imported(tmp_path, run_dh, monkeypatch):
    monkeypatch.setenv("DH_HOME", str(tmp_path / "dh-home"))
    home = fixture_home("claude-code", "basic", tmp_path)
    assert run_dh("import", "claude", "--all", "--home", str(home)).exit_code == 0
    world = LocalWorld(tmp_path / "dh-home" / "dh.db")
    (session,) = world.list_sessions()
    calls = [r for r in world.records(session["id"]) if r.tokens_in is not None]
    return world, session, calls


def test_a_resume_within_the_cache_lifetime_is_likely_to_recache_nothing(imported):
    world, session, calls = imported
    assert likely_recache(world, session["id"], "claude-code", calls[-1].ts + 299_000) is None


def test_a_resume_past_the_cache_lifetime_would_write_the_last_calls_whole_input(imported):
    world, session, calls = imported
    last = calls[-1]
    likely = likely_recache(world, session["id"], "claude-code", last.ts + 301_000)
    usage = json.loads(last.raw)["message"]["usage"]
    tokens = usage["input_tokens"] + usage["cache_read_input_tokens"] + usage["cache_creation_input_tokens"]
    assert likely["tokens"] == tokens and likely["ttl"] == 300
    assert likely["usd"] == pytest.approx(Pricer().cost(last.model, Usage(cache_write=tokens)))


def test_a_resumes_first_call_is_split_by_each_cache_ttl():
    row = {"type": "assistant", "message": {"model": "claude-opus-4-8", "id": "m", "content": [], "usage": {
        "input_tokens": 12, "output_tokens": 3, "cache_read_input_tokens": 7, "cache_creation_input_tokens": 30,
        "cache_creation": {"ephemeral_5m_input_tokens": 10, "ephemeral_1h_input_tokens": 20}}}}
    split = _split(get("claude-code"), json.dumps(row).encode())
    assert split == {"uncached": 12, "cache_write_5m": 10, "cache_write_1h": 20, "cache_read": 7}
    # the input alone is priced: 12 x $5 + 7 x $0.50 + 10 x $6.25 + 20 x $10 per million
    assert _input_cost(Pricer(), "claude-opus-4-8", split) == pytest.approx(326.0e-6)


# the turn's last call read most of the conversation from the cache: 152k tokens of input in all
LAST_CALL = {"input": 2_000, "cache_read": 150_000, "output": 5}
AGED_MS = 10 * 60 * 1000  # past the 5-minute cache


@pytest.fixture
def rig(tmp_path):
    replies = [*SCRIPT["replies"][:-1], dict(SCRIPT["replies"][-1], usage=LAST_CALL)]
    server = FakeModelServer({"replies": replies}).start()
    yield Rig(tmp_path, server)
    server.stop()


def test_a_hand_run_resume_past_the_cache_lifetime_says_what_it_will_likely_re_cache(rig):
    """One line before the resume, priced as 5-minute cache writes of the whole input at the
    published rate (fake_claude's model, claude-opus-4-8); within the lifetime, none."""
    assert rig.run("claude-code").returncode == 0
    (session,) = rig.world().list_sessions()
    with sqlite3.connect(Path(rig.env["DH_HOME"]) / "dh.db") as db:  # the calls made 10 min ago
        db.execute("UPDATE records SET ts = ts - ? WHERE ts IS NOT NULL", [AGED_MS])
    aged = rig.dh("resume", session["id"], "--prompt", "go on")
    assert aged.returncode == 0, aged.stderr.decode()
    lines = [line for line in aged.stderr.decode().splitlines() if "prompt cache" in line]
    usd = input_price("anthropic", "claude-opus-4-8", {"cache_write_5m": 152_000})
    assert len(lines) == 1, aged.stderr.decode()
    assert lines[0].startswith(f"dh: the last model call of session {session['id']} was 10 min ago, "
                               "past its prompt cache (5 min): this resume will likely write about "
                               f"152k tokens to the cache again (${usd:.2f})"), lines
    fresh = rig.dh("resume", session["id"], "--prompt", "go on")
    assert fresh.returncode == 0 and "prompt cache" not in fresh.stderr.decode(), fresh.stderr.decode()


# what `dh log cost` and the cost page say resumes re-cached and saved ---------------------------
def _resumed_log(captured: Path, tmp_path: Path) -> dict:
    return {"DH_HOME": str(resumed_home(captured, tmp_path / "dh-home"))}


@pytest.mark.parametrize("captured", CAPTURED, ids=[p.stem for p in CAPTURED])
def test_log_cost_says_what_each_resume_re_cached_and_saved_as_log_show_does(captured, tmp_path):
    """The cost table prices the resumes from the calls it reads, `dh log show` from every
    record of the session: the same amounts, for each session and in the total."""
    env = _resumed_log(captured, tmp_path)
    (listed,) = json.loads(dh("log", "list", "--json", env=env).stdout)
    shown = json.loads(dh("log", "show", listed["id"], "--json", env=env).stdout)["totals"]["cost"]
    report = json.loads(dh("log", "cost", "--by", "session", "--json", env=env).stdout)
    (row,) = report["rows"]
    assert shown["crashes"] == 1 and (shown["saved_usd"] is None) == (shown["usd"] is None)
    assert row["saved_usd"] == report["totals"]["saved_usd"] == shown["saved_usd"]
    assert row["recache_usd"] == report["totals"]["recache_usd"] == shown["resume_usd"]
    by_day = json.loads(dh("log", "cost", "--json", env=env).stdout)["totals"]
    assert (by_day["saved_usd"], by_day["recache_usd"]) == (row["saved_usd"], row["recache_usd"])


def test_the_cost_table_shows_re_cache_and_saved_only_for_a_log_with_resumes(tmp_path):
    env = _resumed_log(PRICED, tmp_path)
    header, row, total = dh("log", "cost", env=env).stdout.splitlines()
    report = json.loads(dh("log", "cost", "--json", env=env).stdout)["totals"]
    assert report["saved_usd"] > 0 and report["recache_usd"] > 0
    assert header.split()[-2:] == ["RE-CACHE", "SAVED"]
    assert total.split()[-2:] == [money(report["recache_usd"]), money(report["saved_usd"])]
    plain = {"DH_HOME": str(tmp_path / "plain")}
    home = fixture_home("claude-code", "basic", tmp_path)
    assert dh("import", "claude", "--all", "--home", str(home), env=plain).returncode == 0
    assert "SAVED" not in dh("log", "cost", env=plain).stdout


def test_the_costs_of_resumes_read_no_record(tmp_path, monkeypatch):
    """Pricing the resumes reads the calls the table reads anyway and the journal: reading a
    relaunched session's records (its every model call parsed again) is refused here."""
    _resumed_log(PRICED, tmp_path)
    world = LocalWorld(tmp_path / "dh-home" / "dh.db")
    expected = costs(world, ["session"], zone("UTC"))["totals"]
    for name in ("records", "read_rows", "read_records", "raw_lines", "raw_batches"):
        monkeypatch.setattr(LocalWorld, name, lambda *a, **k: pytest.fail("a record was read"))
    assert costs(world, ["session"], zone("UTC"))["totals"] == expected
    assert expected["saved_usd"] > 0 and expected["recache_usd"] > 0
