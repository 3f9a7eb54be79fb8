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
