"""Every real fixture round-trips: import, then rebuild, gives the native files back
byte-for-byte (OpenCode: the export JSON equals what `opencode export` printed)."""

import json
import zlib

import lz4.block

import pytest

from dh_cli import wrappers
from dh_cli.mirror.importer import import_sessions
from dh_cli.stores.opencode_export import build_export
from dh_cli.errors import RebuildConflict
from dh_cli.resume.rebuild import rebuild_session
from dh_cli.worlds.local import LocalWorld

from .conftest import FIXTURES, fixture_home, native_files, scenarios
from tests.helpers import harnesses

JSONL_CASES = [(h, s) for h in harnesses.JSONL for s in scenarios(h)]


@pytest.mark.parametrize("harness,scenario", JSONL_CASES)
def test_jsonl_fixture_round_trips_byte_exact(harness, scenario, tmp_path):
    home = fixture_home(harness, scenario, tmp_path)
    world = LocalWorld()
    report = import_sessions(world, wrappers.get(harness), home, all_=True)
    assert report.sessions and report.pending == 0
    out = tmp_path / "rebuilt"
    for item in report.sessions:
        rebuild_session(world, world.get_session(item["id"]), out)
    original = native_files(home)
    assert original, "fixture has no session files"
    assert native_files(out) == original


@pytest.mark.parametrize("scenario", scenarios("opencode"))
def test_opencode_fixture_exports_like_opencode_export(scenario, tmp_path):
    db = fixture_home("opencode", scenario, tmp_path)
    world = LocalWorld()
    report = import_sessions(world, wrappers.get("opencode"), db, all_=True)
    (item,) = report.sessions
    session = world.get_session(item["id"])
    export = build_export(list(world.records(session.id)), session.harness_session_id)
    expected = json.loads((FIXTURES / "opencode" / scenario / "export.json").read_text())
    assert export == expected


def test_opencode_rebuild_writes_export_file(tmp_path):
    db = fixture_home("opencode", "basic", tmp_path)
    world = LocalWorld()
    report = import_sessions(world, wrappers.get("opencode"), db, all_=True)
    files = rebuild_session(world, world.get_session(report.sessions[0]["id"]), tmp_path / "out")
    data = json.loads(files[0].path.read_bytes())
    assert data["info"]["id"] == report.sessions[0]["harness_session_id"]
    expected = json.loads((FIXTURES / "opencode" / "basic" / "export.json").read_text())
    assert data == expected


def test_rebuild_refuses_to_overwrite_a_different_file(tmp_path, run_dh):
    home = fixture_home("pi", "basic", tmp_path)
    assert run_dh("import", "pi", "--all", "--home", str(home)).exit_code == 0
    (session,) = LocalWorld().list_sessions()
    target = next((home / "sessions").glob("*/*.jsonl"))
    original = target.read_bytes()
    target.write_bytes(b"changed\n")
    result = run_dh("log", "rebuild", session["id"])
    assert result.exit_code == 1
    assert "exists and differs from the log" in str(result.exception)
    assert run_dh("log", "rebuild", session["id"], "--force").exit_code == 0
    assert target.read_bytes() == original


def test_a_long_session_rebuilds_in_batches_byte_exact(tmp_path):
    """Thousands of lines, long ones stored compressed (LZ4, and some deflated as older logs
    hold them): the batched rebuild (lines decompressed on helper threads, written with
    writev) gives the file back; a second rebuild finds it unchanged; one changed byte deep
    inside is a conflict, and --force puts it right."""
    from dh_cli.worlds import local

    from .fakes.transcripts import write_claude_transcript

    home = tmp_path / "claude"
    native = home / "projects" / "-p" / "5f0c2a9e-1b7d-4c3e-9a61-2d8f0e4b7c15.jsonl"
    lines = write_claude_transcript(native, 6 << 20)
    assert lines > 3 * local.READ_ROWS  # several batches, so the threaded path runs
    world = LocalWorld()
    session = world.get_session(import_sessions(world, wrappers.get("claude"), home, all_=True)
                                .sessions[0]["id"])
    # long lines packed as logs written before m036 hold them: LZ4, every third raw deflate
    # (as before m006); the rest as text, so that both stored forms are in the stream
    old = world.conn.execute("SELECT id, raw FROM records WHERE length(raw) >= 1024 AND id % 2 = 0"
                             ).fetchall()
    world.conn.executemany("UPDATE records SET raw = NULL, packed = ?, codec = ? WHERE id = ?", [
        (zlib.compress(line.encode(), 1, -12), local.DEFLATE, row_id) if row_id % 3 == 0
        else (lz4.block.compress(line.encode()), local.LZ4, row_id) for row_id, line in old])
    world.conn.commit()
    codecs = dict(world.conn.execute("SELECT codec, COUNT(*) FROM records GROUP BY codec").fetchall())
    assert codecs.get(local.LZ4) and codecs.get(local.DEFLATE) and codecs.get(0)
    (written,) = rebuild_session(world, session, tmp_path / "out")
    assert written.status == "written" and written.path.read_bytes() == native.read_bytes()
    assert written.bytes == native.stat().st_size
    assert rebuild_session(world, session, tmp_path / "out")[0].status == "unchanged"
    data = bytearray(native.read_bytes())
    data[len(data) // 2] ^= 1
    written.path.write_bytes(bytes(data))
    with pytest.raises(RebuildConflict):
        rebuild_session(world, session, tmp_path / "out")
    assert rebuild_session(world, session, tmp_path / "out", force=True)[0].status == "replaced"
    assert written.path.read_bytes() == native.read_bytes()
