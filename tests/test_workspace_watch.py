"""The snapshot thread wakes only after the mirror committed, and its follower queries the
records only after another connection committed."""

import threading

from dh_cli import wrappers
from dh_cli.workspace.scan import Rules
from dh_cli.workspace.watch import POLL, RecordFollower, WorkspaceWatcher
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


def test_the_watcher_looks_only_once_the_mirror_committed_and_stops_at_once(tmp_path):
    committed = threading.Event()
    watcher = WorkspaceWatcher(tmp_path / "dh.db", wrappers.get("pi"), "s", str(tmp_path),
                               rules=Rules(max_size=1, secrets=(), max_files=1), committed=committed)
    looks = []
    looker = threading.Thread(target=lambda: looks.append(watcher._next_look()))
    looker.start()
    looker.join(timeout=2 * POLL + 0.5)
    assert looker.is_alive() and looks == []  # nothing committed: no look, however long
    committed.set()
    looker.join(timeout=30)
    assert looks == [False] and not committed.is_set()  # one look for the commit, not the end
    watcher.stop_event.set()
    committed.set()  # what stop() does
    assert watcher._next_look() is True
