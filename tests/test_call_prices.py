"""Each model call's price is in the log itself (`model_calls.price_usd`), where a plain
sqlite3 (no function of dh's registered), sqlite-utils or datasette reads it: the same dollars
`dh log cost --json` reports, on the real fixtures of every harness and on the logs captured
around each real release killed and resumed (priced by the migration that added the column)."""

import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from dh_cli.pricing import table_signature

from .conftest import fixture_home, scenarios
from .fakes.transcripts import codex_with_cache_and_reasoning, write_streamed_turn
from .helpers import harnesses

RESUMED = sorted((Path(__file__).parent / "fixtures" / "resumed").glob("*.db"))
PER_SESSION = ("SELECT session_id, SUM(price_usd), COUNT(price_usd), COUNT(*) FROM model_calls"
               " GROUP BY session_id")


def plain_prices(db: Path) -> dict:
    """{session id: (USD, priced calls, calls)} as stdlib sqlite3 reads the view."""
    with sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro", uri=True) as conn:
        return {row[0]: row[1:] for row in conn.execute(PER_SESSION)}


def dh_costs(run_dh) -> dict:
    """{session id: (USD or None, priced calls, calls)} from `dh log cost --by session --json`."""
    done = run_dh("log", "cost", "--by", "session", "--json")
    assert done.exit_code == 0, done.output
    return {r["session"]: (r["usd"], r["calls"] - r["unpriced_calls"], r["calls"])
            for r in json.loads(done.stdout)["rows"]}


def assert_same(db: Path, run_dh) -> int:
    """The view's prices are dh's, session by session; returns the number of priced sessions."""
    ours, theirs = plain_prices(db), dh_costs(run_dh)
    assert set(ours) == set(theirs) and ours
    for session, (usd, priced, calls) in theirs.items():
        assert ours[session][1:] == (priced, calls), session
        assert ours[session][0] == (None if usd is None else pytest.approx(usd, abs=1e-6)), session
    return sum(1 for usd, *_ in theirs.values() if usd)


def test_model_calls_hold_the_price_dh_log_cost_reports(tmp_path, run_dh, dh_home):
    for harness in harnesses.ALL:
        for scenario in scenarios(harness):
            (tmp_path / harness / scenario).mkdir(parents=True)
            native = fixture_home(harness, scenario, tmp_path / harness / scenario)
            assert run_dh("import", harness, "--all", "--home", str(native)).exit_code == 0
    # priced models with every token kind: 1-hour cache writes and a streamed message (Claude
    # Code), cached input and reasoning (Codex on gpt-5)
    claude = tmp_path / "streamed"
    write_streamed_turn(claude / "projects" / "-p" / "6a1d3b7e-2c4f-4e8a-9b0d-1f2e3a4b5c6d.jsonl")
    codex = fixture_home("codex", "basic", tmp_path / "gpt-5")
    codex_with_cache_and_reasoning(codex)
    for harness, native in [("claude-code", claude), ("codex", codex)]:
        assert run_dh("import", harness, "--all", "--home", str(native)).exit_code == 0
    assert assert_same(dh_home / "dh.db", run_dh) >= len(scenarios("claude-code")) + 2


@pytest.mark.parametrize("captured", RESUMED, ids=[p.stem for p in RESUMED])
def test_a_log_written_before_the_price_column_is_priced(captured, run_dh, dh_home):
    dh_home.mkdir()
    shutil.copy(captured, dh_home / "dh.db")
    assert run_dh("log", "list").exit_code == 0  # migrates
    priced = assert_same(dh_home / "dh.db", run_dh)
    assert priced == (1 if captured.stem.startswith("claude-code") else 0)


def test_calls_are_priced_again_when_another_price_table_is_installed(tmp_path, run_dh, dh_home):
    home = fixture_home("claude-code", "basic", tmp_path)
    assert run_dh("import", "claude-code", "--all", "--home", str(home)).exit_code == 0
    db = dh_home / "dh.db"
    with sqlite3.connect(db) as conn:  # as a log priced by an older table would hold them
        conn.execute("UPDATE records SET price_usd = 1.0 WHERE tokens_in IS NOT NULL")
        conn.execute("UPDATE price_table SET signature = 'another table'")
    assert {usd for usd, *_ in plain_prices(db).values()} == {4.0}
    assert run_dh("log", "list").exit_code == 0  # opens the log: priced by today's table
    assert assert_same(db, run_dh) == 1
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT signature FROM price_table").fetchall() == [(table_signature(),)]
