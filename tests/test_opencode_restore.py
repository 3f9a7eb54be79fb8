"""The "machine lost" case for OpenCode: its database is gone, and `dh resume` puts the session
back through `opencode import` of the export built from the log (run from the session's cwd),
then resumes it with the whole history. The same runs with the real OpenCode in tests/e2e."""

import json
import shutil

import pytest

from .fakes.model_server import FakeModelServer
from .rig import SCRIPT, Rig


@pytest.fixture
def rig(tmp_path):
    server = FakeModelServer(SCRIPT).start()
    yield Rig(tmp_path, server)
    server.stop()


def test_resume_imports_a_session_missing_from_the_database(rig):
    assert rig.run("opencode").returncode == 0
    (session,) = rig.world().list_sessions()
    shutil.rmtree(rig.tmp / ".local" / "share" / "opencode")
    before = len(rig.server.main_requests())
    resumed = rig.dh("resume", session["id"], "--prompt", "Now summarize.")
    assert resumed.returncode == 0, resumed.stderr.decode()
    (request,) = rig.server.main_requests()[before:]
    assert request["tool_result_ids"] == ["call_000", "call_001", "call_002"]
    assert "Now summarize." in json.dumps(request["body"])
    world = rig.world()
    rebuilt = [e.details for e in world.events(session["id"]) if e.type == "rebuilt"]
    assert rebuilt and rebuilt[0]["via"] == "opencode import"


def test_a_failed_import_is_a_clear_error(rig):
    assert rig.run("opencode").returncode == 0
    (session,) = rig.world().list_sessions()
    shutil.rmtree(rig.tmp / ".local" / "share" / "opencode")
    rig.env["DH_OPENCODE_BIN"] = "false"  # an OpenCode whose import fails
    resumed = rig.dh("resume", session["id"], "--prompt", "Go on.")
    assert resumed.returncode != 0
    assert b"`opencode import` did not restore session" in resumed.stderr


def test_locating_a_session_in_a_missing_database_finds_nothing(tmp_path):
    from dh_cli.wrappers.opencode import OpenCodeWrapper

    assert OpenCodeWrapper().locate(tmp_path / "gone" / "opencode.db", "ses_1", None) is None


def test_the_log_a_killed_opencode_left_is_checkpointed_before_it_starts_again(tmp_path):
    """OpenCode sets its busy timeout only after `PRAGMA journal_mode = WAL`; a WAL left by a
    killed OpenCode would be recovered by whichever connection comes first, and the new
    OpenCode failed with "database is locked" when that was dh's mirror. dh folds it first."""
    import subprocess
    import sqlite3
    import sys

    from dh_cli.stores.opencode_restore import settle_database

    db = tmp_path / "opencode.db"
    writer = ("import os, sqlite3, sys; c = sqlite3.connect(sys.argv[1]); "
              "c.execute('PRAGMA journal_mode=WAL'); c.execute('CREATE TABLE t (x)'); "
              "c.executemany('INSERT INTO t VALUES (?)', [(i,) for i in range(500)]); c.commit(); "
              "os._exit(0)")  # dies without closing: the WAL keeps every frame
    subprocess.run([sys.executable, "-c", writer, str(db)], check=True)
    wal = tmp_path / "opencode.db-wal"
    assert wal.stat().st_size > 0
    settle_database(db)
    assert not wal.exists() or wal.stat().st_size == 0
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    assert conn.execute("SELECT count(*) FROM t").fetchone() == (500,)
    conn.close()
    settle_database(tmp_path / "missing.db")  # nothing to do, no error


def test_a_rebuilt_database_s_parts_keep_their_place_in_the_conversation():
    """`opencode import` stamps each part it inserts with the time of the import; the
    conversation still reads in the order the parts were first written."""
    from dh_cli.models import Record
    from dh_cli.wrappers import get

    def row(table: str, ident: str, created: int, data: dict, **more) -> dict:
        return {"table": table, "id": ident, "time_created": created, "time_updated": created,
                "data": json.dumps(data), **more}

    prompt = row("part", "prt_1", 100, {"type": "text", "text": "Create the files."}, message_id="msg_1")
    rows = [row("message", "msg_1", 99, {"role": "user"}), prompt,
            row("message", "msg_2", 200, {"role": "assistant"}),
            row("part", "prt_2", 210, {"type": "text", "text": "Done."}, message_id="msg_2"),
            dict(prompt, time_created=900, time_updated=900)]  # the import's version
    records = [Record(1, 1, i, json.dumps(r).encode()) for i, r in enumerate(rows)]
    texts = [p.text for p in get("opencode").conversation(records) if p.text]
    assert texts == ["Create the files.", "Done."]


@pytest.mark.parametrize("reason,complete", [("stop", True), ("tool-calls", False)])
def test_a_step_finish_part_finishes_the_turn_before_its_message_does(reason, complete):
    """OpenCode 1.18.33's TUI, killed 2 s after its final answer, left the step-finish part
    (reason stop) and the message still without its own finish: the turn is complete."""
    from dh_cli.models import Record
    from dh_cli.wrappers import get

    def row(table: str, ident: str, created: int, data: dict, **more) -> dict:
        return {"table": table, "id": ident, "time_created": created, "time_updated": created,
                "data": json.dumps(data), **more}

    rows = [row("message", "msg_1", 1, {"role": "user"}),
            row("part", "prt_1", 2, {"type": "text", "text": "Create the files."}, message_id="msg_1"),
            row("message", "msg_2", 3, {"role": "assistant", "time": {"created": 3}}),
            row("part", "prt_2", 4, {"type": "text", "text": "All done."}, message_id="msg_2"),
            row("part", "prt_3", 5, {"type": "step-finish", "reason": reason}, message_id="msg_2")]
    records = [Record(1, 1, i, json.dumps(r).encode()) for i, r in enumerate(rows)]
    wrapper = get("opencode")
    assert wrapper.turn_state(records).complete is complete
