"""A file source's model calls decided while its records stream (stores/jsonl.py
counted_calls) are the calls the log's `model_calls` view counts: on every real fixture of
the harnesses whose sessions are files, and on the cases of the rule made by hand."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from dh_cli.logviews.logview import call_totals
from dh_cli.models import Record
from dh_cli.pricing import calls_cost
from dh_cli.stores.jsonl import counted_calls
from dh_cli.worlds.local import LocalWorld
from tests.fakes.many_sessions import ROOT, import_fixtures

from .conftest import fixture_home


def _record(offset: int, msg_id: str | None = None, usage: bool = False, opens: bool = False) -> Record:
    return Record(1, 0, offset, b"{}", msg_id=msg_id, tokens_in=5 if usage else None,
                  turn_start=1 if opens else None)


FLAT = ("claude-opus-4-8", "gpt-5")  # priced flat: the header's cost comes from their sums
CASES = [
    _record(0, opens=True),
    _record(10, "m1", usage=True), _record(20), _record(30, "m1", usage=True),  # streamed
    _record(40), _record(50, "m2", usage=True),
    _record(60, "m2", opens=True),  # a turn's opening row with the same id: m2 not counted
    _record(70, None, usage=True), _record(80, None, usage=True),  # no id: each counts
    _record(90, "m3", usage=True), _record(100, "m4", usage=True), _record(110),
    _record(120, "m3", usage=True),  # m3 again, apart: counted again (OpenCode: only here)
]


def test_a_message_streamed_as_several_rows_counts_once_as_its_last_row():
    decided = list(counted_calls(iter(CASES)))
    assert [r.offset for r, _ in decided] == [r.offset for r in CASES]  # order kept, none lost
    assert [r.offset for r, counted in decided if counted] == [30, 70, 80, 90, 100, 120]


def test_one_sessions_calls_read_apart_are_the_views_on_the_cases_of_the_rule(tmp_path: Path):
    """A file source (with an older generation that differs) and an OpenCode source, where a
    message's last version wins."""
    world = LocalWorld(tmp_path / "dh.db")
    conn = world.conn
    conn.execute("INSERT INTO sessions (id, harness, state, created_at, updated_at)"
                 " VALUES ('s', 'claude-code', 'imported', '2026-01-01', '2026-01-01')")
    for source_id, kind in ((1, "jsonl"), (2, "opencode")):
        conn.execute("INSERT INTO sources (id, session_id, kind, relpath) VALUES (?, 's', ?, ?)",
                     [source_id, kind, f"{kind}.x"])
        for generation in (0, 1):
            conn.executemany(
                'INSERT INTO records (session_id, source_id, generation, "offset", raw, msg_id,'
                " model, tokens_in, tokens_out, turn_start) VALUES ('s', ?, ?, ?, '{}', ?, ?, ?, ?, ?)",
                [(source_id, generation, r.offset, r.msg_id, FLAT[r.offset % 20 // 10], r.tokens_in,
                  r.offset, r.turn_start)
                 for r in (CASES[3:] if generation else CASES[:4])])
    conn.commit()
    view = conn.execute(
        "SELECT model, COALESCE(tokens_in, 0), COALESCE(tokens_cache_read, 0),"
        " COALESCE(tokens_cache_write, 0), tokens_cache_write_1h, COALESCE(tokens_out, 0),"
        " tokens_reasoning, source_id FROM model_calls WHERE session_id = 's' ORDER BY record_id").fetchall()
    assert list(world.model_call_tokens("s")) == [row[:-1] for row in view]
    assert call_totals(world, "s") == {**world.token_totals("s"),
                                       "cost": calls_cost([row[:-1] for row in view])}
    assert call_totals(world, "s")["cost"]["usd"] > 0  # priced from the sums of two models
    by_source = {n: [row[5] for row in view if row[-1] == n] for n in (1, 2)}  # output = offset
    assert by_source == {1: [30, 70, 80, 90, 100, 120], 2: [30, 70, 80, 100, 120]}


def test_the_calls_decided_on_the_way_are_the_views_on_every_real_fixture(tmp_path: Path):
    import_fixtures(tmp_path)
    world = LocalWorld(tmp_path / "dh.db")
    checked, streamed = 0, 0
    for (source_id, session_id) in world.conn.execute(
            "SELECT id, session_id FROM sources WHERE kind = 'jsonl'").fetchall():
        top = world.latest_generation(source_id)
        decided = list(counted_calls(world.records(session_id, source_id, generation=top)))
        view = {row[0] for row in world.conn.execute(
            'SELECT "offset" FROM model_calls WHERE source_id = ?', [source_id])}
        assert {r.offset for r, counted in decided if counted} == view, source_id
        checked += bool(view)
        streamed += any(r.tokens_in is not None and not counted for r, counted in decided)
    assert checked >= 6  # claude, codex and pi sessions with calls
    assert streamed  # the fixtures hold messages streamed as several rows



def test_one_sessions_calls_read_apart_are_the_views_on_every_real_fixture(tmp_path: Path):
    import_fixtures(tmp_path)
    env = {**os.environ, "DH_HOME": str(tmp_path), "PYTHONPATH": str(ROOT)}
    for scenario in ("basic", "multiturn", "killed-resumed"):  # OpenCode: a message's last version
        db = fixture_home("opencode", scenario, tmp_path)
        subprocess.run([sys.executable, "-m", "dh_cli", "import", "opencode", "--all", "--home",
                        str(db)], env=env, check=True, cwd=ROOT, stdout=subprocess.DEVNULL)
    world = LocalWorld(tmp_path / "dh.db")
    harnesses = set()
    for session_id, harness in world.conn.execute("SELECT id, harness FROM sessions").fetchall():
        view = world.conn.execute(
            "SELECT model, COALESCE(tokens_in, 0), COALESCE(tokens_cache_read, 0),"
            " COALESCE(tokens_cache_write, 0), tokens_cache_write_1h, COALESCE(tokens_out, 0),"
            " tokens_reasoning FROM model_calls WHERE session_id = ? ORDER BY record_id",
            [session_id]).fetchall()
        assert list(world.model_call_tokens(session_id)) == view, (harness, session_id)
        assert world.calls_by_session([session_id]) == ({session_id: view} if view else {})
        sums = world.conn.execute(
            "SELECT model, COUNT(*), SUM(COALESCE(tokens_in, 0)), SUM(COALESCE(tokens_cache_read, 0)),"
            " SUM(COALESCE(tokens_cache_write, 0)), SUM(tokens_cache_write_1h),"
            " SUM(COALESCE(tokens_out, 0)), SUM(tokens_reasoning) FROM model_calls"
            " WHERE session_id = ? GROUP BY model ORDER BY MIN(record_id)", [session_id]).fetchall()
        assert world.call_sums([session_id]) == ({session_id: sums} if sums else {})  # the list's
        # the header's totals and cost: from the sums, the same as from the view's every call
        assert call_totals(world, session_id) == {**world.token_totals(session_id),
                                                  "cost": calls_cost(view)}
        if view:
            harnesses.add(harness)
    assert harnesses == {"claude-code", "codex", "opencode", "pi"}
