"""`dh log list` reads what it shows of a session from the session's digest (issue 30,
"Scale": the model_calls view asked once per session made the list quadratic, and read for
every session it was most of a list of 10,000): the view is read again only for a session
whose records changed since. The totals and costs it shows are those of the per-session
reads: the view's count of each call (an OpenCode message's last version, a source's latest
generation) and `session_cost`."""

from __future__ import annotations

import sqlite3

from dh_cli.logviews.sessionlist import ListFilter, list_sessions, short_prefixes
import pytest

from dh_cli.pricing import Pricer, session_cost
from dh_cli.tokens import Usage
from dh_cli.worlds.local import LocalWorld

from .conftest import fixture_home


def _import_all(run_dh, tmp_path) -> None:
    for harness, fixture, scenario in (("claude", "claude-code", "subagent-tasks"),
                                       ("codex", "codex", "multiturn"), ("pi", "pi", "multiturn"),
                                       ("opencode", "opencode", "multiturn")):
        home = fixture_home(fixture, scenario, tmp_path)
        assert run_dh("import", harness, "--all", "--home", str(home)).exit_code == 0


def _view_calls(world, session_id: str) -> list[tuple]:
    """The calls as the model_calls view (the log's documented query) counts them."""
    return list(world.model_call_tokens(session_id))


def _log_an_update_of_an_opencode_message(world) -> None:
    """The message row of an OpenCode call logged again through the log's own insert, with
    more tokens, as OpenCode updates a message while it streams."""
    from dh_cli.worlds.local_records import insert_rows
    from dh_cli.worlds.rows import RECORD_COLUMNS, select_list

    row = list(world.conn.execute(
        f"SELECT {select_list()} FROM records WHERE id = (SELECT MAX(r.id) FROM records r JOIN"
        " sessions s ON s.id = r.session_id WHERE s.harness = 'opencode' AND r.tokens_in IS NOT NULL)").fetchone())
    row[RECORD_COLUMNS.index("offset")] += 100000
    row[RECORD_COLUMNS.index("tokens_out")] += 7
    with world._write() as conn:
        assert insert_rows(conn, [tuple(row)]) == 1


def _call_by_call(calls: list[tuple]) -> float | None:
    """The calls priced one by one (the list prices a flat-priced model's calls summed)."""
    pricer, costs = Pricer(), []
    for model, *counted in calls:
        costs.append(pricer.cost(model, Usage(*(c or 0 for c in counted))))
    known = [c for c in costs if c is not None]
    return round(sum(known), 6) if known else None


def test_the_list_counts_each_call_as_the_view_does(run_dh, tmp_path):
    _import_all(run_dh, tmp_path)
    world = LocalWorld()
    _log_an_update_of_an_opencode_message(world)
    listed = list_sessions(world, ListFilter())
    assert {row["harness"] for row in listed} == {"claude-code", "codex", "pi", "opencode"}
    for row in listed:
        calls = _view_calls(world, row["id"])
        assert calls, row["harness"]
        assert row["tokens"] == world.token_totals(row["id"])
        assert row["tokens"]["model_calls"] == len(calls)
        assert row["cost"] == session_cost(world, row["id"])["usd"]
        expected = _call_by_call(calls)
        assert (row["cost"] is None) == (expected is None)
        assert expected is None or row["cost"] == pytest.approx(expected, abs=1e-6)


def test_a_rewritten_source_counts_only_its_latest_generation(run_dh, tmp_path):
    _import_all(run_dh, tmp_path)
    world = LocalWorld()
    (session,) = [r for r in list_sessions(world, ListFilter()) if r["harness"] == "pi"]
    before = session["tokens"]["model_calls"]
    conn = sqlite3.connect(world.path)
    conn.execute("UPDATE records SET generation = 1 WHERE session_id = ? AND \"offset\" >"
                 " (SELECT MIN(\"offset\") FROM records WHERE session_id = ? AND tokens_in IS NOT NULL)",
                 [session["id"], session["id"]])
    conn.commit()
    (after,) = [r for r in list_sessions(world, ListFilter()) if r["harness"] == "pi"]
    assert after["tokens"]["model_calls"] == len(_view_calls(world, session["id"])) == before - 1


def test_a_limited_list_reads_only_its_sessions_and_agrees(run_dh, tmp_path):
    _import_all(run_dh, tmp_path)
    world = LocalWorld()
    everything = list_sessions(world, ListFilter())
    first_two = list_sessions(world, ListFilter(limit=2))
    assert first_two == everything[:2]


def test_prefixes_asked_for_some_sessions_are_theirs_in_the_full_table(run_dh, tmp_path):
    _import_all(run_dh, tmp_path)
    world = LocalWorld()
    every = short_prefixes(world)
    some = sorted(every)[:2]
    assert short_prefixes(world, some) == {sid: every[sid] for sid in some}


def _statements(world, action) -> list[str]:
    """The SQL statements `action` ran on the world's connection, values bound."""
    ran: list[str] = []
    world.conn.set_trace_callback(ran.append)
    try:
        action()
    finally:
        world.conn.set_trace_callback(None)
    return ran


def _reads_calls(statement: str) -> bool:
    """A read of model calls: the view, or one session's own (worlds/local_views.py)."""
    return "model_calls" in statement or "LEAD(r.msg_id)" in statement


def test_a_list_reads_model_calls_only_of_sessions_whose_records_changed(run_dh, tmp_path):
    _import_all(run_dh, tmp_path)
    world = LocalWorld()
    first = list_sessions(world, ListFilter())
    again = _statements(world, lambda: list_sessions(world, ListFilter()))
    assert not [s for s in again if _reads_calls(s) or "packed" in s]  # no call, no record read
    _log_an_update_of_an_opencode_message(world)
    (changed,) = world.conn.execute("SELECT session_id FROM records ORDER BY id DESC LIMIT 1").fetchone()
    listed: list = []
    after = _statements(world, lambda: listed.extend(list_sessions(world, ListFilter())))
    calls_read = [s for s in after if _reads_calls(s)]
    assert calls_read and all(changed in s for s in calls_read)
    assert not [s for s in calls_read for r in first if r["id"] != changed and r["id"] in s]
    for row in listed:
        assert row["tokens"] == world.token_totals(row["id"])
        assert row["cost"] == session_cost(world, row["id"])["usd"]


def test_a_read_only_log_is_listed_alike_and_left_as_it_is(run_dh, tmp_path):
    _import_all(run_dh, tmp_path)
    reader = LocalWorld(read_only=True)
    listed = list_sessions(reader, ListFilter())
    assert reader.conn.execute("SELECT COUNT(*) FROM session_digests").fetchone()[0] == 0
    assert listed == list_sessions(LocalWorld(), ListFilter())


def test_the_native_files_of_some_sessions_are_theirs_in_the_whole_logs(run_dh, tmp_path):
    """A page of the list looks up where its own sessions' harness files are (to tell which
    the harness lost): the same as the whole log's lookup says of them."""
    _import_all(run_dh, tmp_path)
    world = LocalWorld()
    everything = world.native_mains()
    some = sorted(everything)[:2]
    assert len(everything) > 2 and world.native_mains(some) == {sid: everything[sid] for sid in some}
    assert world.native_mains([]) == {}
