"""The snapshot thread's follower queries the records only after another connection committed."""

from dh_cli import wrappers
from dh_cli.workspace.watch import RecordFollower
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
