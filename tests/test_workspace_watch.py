"""The snapshot thread looks at the log every POLL (at once when the mirror says it committed),
and its follower queries the records only after another connection committed."""

import threading

from dh_cli import wrappers
from dh_cli.workspace.scan import Rules
from dh_cli.mirror.session import SessionMirror
from dh_cli.workspace.watch import NEW_RECORDS, POLL, RecordFollower, WorkspaceWatcher
from dh_cli.worlds.local import LocalWorld


def test_the_follower_looks_for_records_only_after_another_connection_committed(tmp_path):
    db = tmp_path / "dh.db"
    writer = LocalWorld(db)
    session = writer.create_session("pi", home=str(tmp_path), harness_session_id="s1")
    reader = LocalWorld(db)
    follower = RecordFollower(reader, wrappers.get("pi"), session.id, {})
    assert follower.committed()  # the first look always queries
    assert not follower.committed()  # nothing committed since: no query
    writer.add_event(session.id, "note", {"text": "a commit elsewhere"})
    assert follower.committed()
    assert not follower.committed()
    reader.close()
    writer.close()


def test_the_watcher_looks_every_poll_even_when_the_mirror_says_nothing(tmp_path):
    # the shared mirror tells its client of commits at most once a second: a step's snapshot
    # waited for that word (up to a second: bench/bench_snapshot_lag.py)
    committed = threading.Event()
    watcher = WorkspaceWatcher(tmp_path / "dh.db", wrappers.get("pi"), "s", str(tmp_path),
                               rules=Rules(max_size=1, secrets=(), max_files=1), committed=committed)
    looks = []
    looker = threading.Thread(target=lambda: looks.append(watcher._next_look()))
    looker.start()
    looker.join(timeout=30)
    assert not looker.is_alive() and looks == [False]  # a look with no word from the mirror
    committed.set()
    assert watcher._next_look() is False and not committed.is_set()  # one look for the word
    watcher.stop_event.set()
    committed.set()  # what stop() does
    assert watcher._next_look() is True


USER = '{"type":"message","id":"%s","parentId":null,"message":{"role":"user","content":"go"}}\n'


def test_the_follower_reads_each_new_record_of_the_main_file_once_and_a_rewrite_from_its_start(tmp_path):
    db = tmp_path / "dh.db"
    writer = LocalWorld(db)
    session = writer.create_session("pi", home=str(tmp_path), harness_session_id="s1")
    main, side = tmp_path / "main.jsonl", tmp_path / "side.jsonl"
    for path in (main, side):
        writer.add_source(session.id, "jsonl", path.name, str(path))
    mirror = SessionMirror(writer, wrappers.get("pi"), session)
    follower = RecordFollower(LocalWorld(db), wrappers.get("pi"), session.id, {})

    def look(**lines) -> list[str]:
        for name, ids in lines.items():
            with open(tmp_path / f"{name}.jsonl", "a") as f:
                f.write("".join(USER % i for i in ids))
        mirror.sync()
        return [parsed.native_id for parsed in follower.new()]

    assert look(main=["a", "b"], side=["x"]) == ["a", "b"]  # the side file is not the turn's
    assert look(main=["c"]) == ["c"]
    assert look() == []
    main.write_text(USER % "a2")  # rewritten: a new generation, read from its start
    assert look(main=["b2"]) == ["a2", "b2"]
    assert look(main=["c2"], side=["y"]) == ["c2"]


def test_the_follower_seeks_to_its_place_in_the_log_index(tmp_path):
    # by id, SQLite read every record of the source at each look: the cost grew with the session
    world = LocalWorld(tmp_path / "dh.db")
    plan = " ".join(row[3] for row in world.conn.execute("EXPLAIN QUERY PLAN " + NEW_RECORDS,
                                                          [1, 0, -1, 0]))
    assert "idx_records_source_id_generation_offset (source_id=? AND generation=? AND offset>?)" in plan
    assert "TEMP B-TREE" not in plan
