"""The typed Log protocol (dh_cli/worlds/log.py) and the local log that implements it: every
method the protocol names exists on LocalWorld with the same parameters, and a key the log
refuses comes out as a dh error, not as sqlite3's."""

from __future__ import annotations

import inspect
from dataclasses import replace

import pytest

from dh_cli.errors import LogConflict, LogDbError
from dh_cli.worlds.base import World
from dh_cli.worlds.local import LocalWorld
from dh_cli.worlds.log import Log


def _members(protocol) -> list[str]:
    names = set()
    for klass in protocol.__mro__:
        if klass is object or klass.__name__ in ("Protocol", "Generic"):
            continue
        names |= {n for n, v in vars(klass).items() if not n.startswith("_") and callable(v)}
    return sorted(names)


def _params(function) -> list[tuple]:
    return [(p.name, p.kind, p.default) for p in inspect.signature(function).parameters.values()]


@pytest.mark.parametrize("name", _members(Log))
def test_local_world_has_every_log_method_with_its_parameters(name):
    assert hasattr(LocalWorld, name), f"LocalWorld has no {name}"
    assert _params(getattr(LocalWorld, name)) == _params(getattr(Log, name))


def test_log_is_a_world_and_names_what_the_mirror_and_resume_use():
    assert World in Log.__mro__
    members = _members(Log)
    assert len(members) == len(set(members))
    for name in ("commit", "add_source", "session_for_native", "raw_batches", "add_event",
                 "update_session", "find_by_native", "be_patient"):
        assert name in members
    assert "path" in Log.__annotations__


def test_a_source_moved_onto_a_taken_relpath_is_a_log_conflict(tmp_path):
    world = LocalWorld(tmp_path / "dh.db")
    session = world.create_session("pi")
    first = world.add_source(session.id, "jsonl", "a.jsonl", None)
    world.add_source(session.id, "jsonl", "b.jsonl", None)
    moved = replace(first, relpath="b.jsonl")
    with pytest.raises(LogConflict) as raised:
        world.commit(moved, [], [("source_moved", {"to": "b.jsonl"})], moved=True)
    assert isinstance(raised.value, LogDbError) and raised.value.exit_code == 3
    # the whole transaction was rolled back: no event, the source kept its relpath
    assert world.events(session.id) == []
    assert [s.relpath for s in world.sources(session.id)] == ["a.jsonl", "b.jsonl"]
    assert not world.conn.in_transaction


def test_schema_state_and_session_count_answer_without_the_connection(tmp_path):
    world = LocalWorld(tmp_path / "dh.db")
    applied, pending = world.schema_state()
    assert applied and pending == []
    assert world.session_count() == 0
    world.create_session("pi")
    assert world.session_count() == 1


def test_the_logs_workspace_calls_are_the_team_worlds_so_one_store_serves_both():
    """workspace/store.py holds one store for every world: what it calls on the log must be
    what a team world offers, parameter by parameter."""
    from dh_cli.team.protocol import TeamWorld

    shared = [n for n in _members(Log) if n.startswith("ws_") and n in _members(TeamWorld)]
    assert sorted(shared) == ["ws_known", "ws_object_rows", "ws_put", "ws_snapshot_rows"]
    for name in shared:
        assert _params(getattr(Log, name)) == _params(getattr(TeamWorld, name)), name
