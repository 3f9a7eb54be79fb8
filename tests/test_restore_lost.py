"""`dh restore` (resume/restore_lost.py, stores/restore_files.py, stores/lost.py) over the
fake harnesses: what counts as lost, what is written back where, what is never touched. The
real programs' proof (each harness resumes the restored session itself) is
tests/e2e/test_restore_real.py."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from dh_cli.wrappers import get

from .helpers.restore_runs import rig, run_session, stamp  # noqa: F401 (rig: a fixture)

FILE_HARNESSES = ("claude-code", "codex", "pi")


def restore(rig, *args: str) -> tuple[int, object]:
    done = rig.dh("restore", *args, "--json")
    return done.returncode, json.loads(done.stdout or b"null")


@pytest.mark.parametrize("harness", FILE_HARNESSES)
def test_a_lost_file_is_named_then_put_back_and_the_kept_session_is_untouched(rig, harness):
    lost, lost_file = run_session(rig, harness)
    kept, kept_file = run_session(rig, harness)
    logged = lost_file.read_bytes()
    os.utime(lost_file, (1, 1))  # an old file: the restored one must not keep its time
    lost_file.unlink()
    before = stamp(kept_file)
    code, listed = restore(rig, "--lost", "--dry-run")
    assert code == 0 and [(r["session"], r["why"], r["status"]) for r in listed] == [
        (lost["id"], "gone", "would restore")]
    assert not lost_file.exists()  # the dry run wrote nothing
    code, done = restore(rig, "--lost", "--yes")
    assert code == 0 and [(r["session"], r["status"]) for r in done] == [(lost["id"], "restored")]
    assert lost_file.read_bytes() == logged  # where the harness wrote it, byte-exact
    assert lost_file.stat().st_mtime > 1e9  # a fresh time: the next cleanup keeps it
    assert stamp(kept_file) == before  # the session the harness kept: bytes and mtime
    after = stamp(lost_file)
    assert restore(rig, "--lost", "--yes") == (0, [])  # twice: nothing to do
    assert restore(rig, lost["id"])[1][0]["status"] == "present"
    assert stamp(lost_file) == after


def test_a_file_cut_shorter_is_completed_and_a_longer_one_is_left(rig):
    session, main = run_session(rig, "claude-code")
    logged = main.read_bytes()
    main.write_bytes(logged[:100])
    code, done = restore(rig, session["id"])
    assert code == 0 and done[0]["why"] == "shorter" and done[0]["status"] == "restored"
    assert main.read_bytes() == logged
    main.write_bytes(logged + b'{"type":"later"}\n')  # the harness went on without dh
    assert restore(rig, session["id"])[1][0]["status"] == "present"
    assert main.read_bytes().endswith(b'{"type":"later"}\n')


def test_a_file_that_differs_is_replaced_only_when_forced_and_kept_beside(rig):
    session, main = run_session(rig, "codex")
    logged = main.read_bytes()
    other = b'{"type":"other"}\n'
    main.write_bytes(other)
    code, done = restore(rig, session["id"])
    assert code == 1 and done[0]["status"] == "failed" and "--force" in done[0]["error"]
    assert main.read_bytes() == other
    code, done = restore(rig, session["id"], "--force")
    assert code == 0 and done[0]["status"] == "replaced"
    assert main.read_bytes() == logged
    kept = Path(done[0]["files"][0]["kept"])
    assert kept.parent == main.parent and kept.read_bytes() == other
    assert not kept.name.endswith(".jsonl")  # never read as a session by the harness


def test_restoring_many_asks_or_needs_yes(rig):
    _, main = run_session(rig, "pi")
    main.unlink()
    refused = rig.dh("restore", "--lost")
    assert refused.returncode != 0 and b"--yes" in refused.stderr
    assert not main.exists()


def test_the_log_list_and_bare_dh_say_which_session_the_harness_lost(rig):
    lost, main = run_session(rig, "claude-code")
    kept, _ = run_session(rig, "claude-code")
    main.unlink()
    rows = {r["id"]: r for r in json.loads(rig.dh("log", "list", "--json").stdout)}
    assert rows[lost["id"]]["lost"] == "gone"
    assert rows[lost["id"]]["restore"] == f"dh restore {rows[lost['id']]['prefix']}"
    assert rows[kept["id"]]["lost"] is None
    text = rig.dh("log", "list").stdout.decode()
    assert f"bring it back: dh restore {rows[lost['id']]['prefix']}" in text
    bare = rig.dh().stdout.decode()
    assert "lost by their harness" in bare and f"dh restore {lost['id']}" in bare
    restore(rig, "--lost", "--yes")
    assert "lost by their harness" not in rig.dh().stdout.decode()


def test_opencode_rows_deleted_by_opencode_come_back_through_its_import(rig):
    lost, _ = run_session(rig, "opencode")
    kept, db = run_session(rig, "opencode")
    opencode = rig.env.get("DH_OPENCODE_BIN", "opencode").split()
    subprocess.run([*opencode, "session", "delete", lost["harness_session_id"]], cwd=rig.proj,
                   env=rig.env, check=True, capture_output=True)
    code, listed = restore(rig, "--lost", "--dry-run")
    assert [(r["session"], r["status"]) for r in listed] == [(lost["id"], "would restore")]
    assert not _in_db(db, lost["harness_session_id"])
    code, done = restore(rig, "--lost", "--yes")
    assert code == 0 and done[0]["files"][0]["via"] == "opencode import"
    assert _in_db(db, lost["harness_session_id"]) and _in_db(db, kept["harness_session_id"])
    assert restore(rig, "--lost", "--yes") == (0, [])


def _in_db(db: Path, native_id: str) -> bool:
    from dh_cli.stores.opencode_restore import session_in_db

    return session_in_db(db, native_id)


def test_a_source_path_that_leaves_the_home_is_refused(rig):
    session, main = run_session(rig, "claude-code")
    main.unlink()
    world = rig.world()
    world.conn.execute("UPDATE sources SET relpath = '../../escaped.jsonl' WHERE session_id = ?",
                       [session["id"]])
    world.conn.commit()
    world.close()
    code, done = restore(rig, session["id"])
    assert code == 1 and done[0]["status"] == "failed" and "refusing" in done[0]["error"]
    assert not (rig.tmp / "escaped.jsonl").exists()


def test_claude_s_project_folder_is_found_not_recomputed(tmp_path):
    """The transcript's folder is gone; another folder holds transcripts of the same cwd (a
    long path's hashed slug): the session goes there."""
    restore_relpath = get("claude").restore_relpath
    projects = tmp_path / "projects"
    (projects / "-work-long-abc123").mkdir(parents=True)
    (projects / "-work-long-abc123" / "other.jsonl").write_text(
        json.dumps({"type": "user", "sessionId": "x", "cwd": "/work/long"}) + "\n")
    moved = restore_relpath(tmp_path, "projects/-work-long/s.jsonl", "/work/long")
    assert moved == "projects/-work-long-abc123/s.jsonl"
    assert restore_relpath(tmp_path, "projects/-work-long/s/subagents/a.jsonl", "/work/long") \
        == "projects/-work-long-abc123/s/subagents/a.jsonl"
    assert restore_relpath(tmp_path, "projects/-else/s.jsonl", "/else") == "projects/-else/s.jsonl"
    (projects / "-work-long").mkdir()  # the folder it was written in exists: kept
    assert restore_relpath(tmp_path, "projects/-work-long/s.jsonl", "/work/long") \
        == "projects/-work-long/s.jsonl"


def doctor_cleanup(rig) -> dict:
    checks = json.loads(rig.dh("doctor", "--json").stdout)
    return next(c for c in checks if c["name"] == "claude-code cleanup")


def test_doctor_warns_before_claude_s_cleanup_deletes_sessions_of_the_log(rig):
    old, main = run_session(rig, "claude-code")
    fresh, _ = run_session(rig, "claude-code")
    assert doctor_cleanup(rig)["status"] == "ok"
    aged = time.time() - 25 * 86400  # 30-day default: deleted in 5 days
    os.utime(main, (aged, aged))
    check = doctor_cleanup(rig)
    assert check["status"] == "warn" and check["details"]["sessions"] == [old["id"]]
    assert check["details"]["days"] == 30 and "cleanupPeriodDays" in check["message"]
    settings = rig.tmp / ".claude" / "settings.json"
    settings.write_text(json.dumps({"cleanupPeriodDays": 90}))
    assert doctor_cleanup(rig)["status"] == "ok"
    settings.write_text(json.dumps({"cleanupPeriodDays": 20}))
    assert doctor_cleanup(rig)["details"]["sessions"] == [old["id"]]
    assert fresh["id"] not in doctor_cleanup(rig)["details"]["sessions"]


@pytest.mark.parametrize("harness, hidden", [("claude-code", "started with -p"),
                                             ("codex", "started by `codex exec`"), ("pi", None)])
def test_the_log_list_says_when_the_harness_s_picker_hides_a_session(rig, harness, hidden):
    session, _ = run_session(rig, harness)
    (row,) = json.loads(rig.dh("log", "list", "--json").stdout)
    assert (row["hidden"] or "").startswith(hidden or "") and bool(row["hidden"]) == bool(hidden)
    text = rig.dh("log", "list").stdout.decode()
    assert ("not in " in text) == bool(hidden)


def test_dh_serve_s_list_says_which_session_the_harness_lost(rig):
    import httpx

    from .helpers.serve import Served

    lost, main = run_session(rig, "codex")
    main.unlink()
    served = Served(rig.env)
    try:
        page = httpx.get(served.base + "/", headers=served.headers, timeout=30).text
    finally:
        served.stop()
    assert "its harness lost it: dh restore " + lost["id"][:4] in page


def test_claude_s_side_files_come_back_with_the_transcript(rig):
    session, main = run_session(rig, "claude-code")
    side = main.with_suffix("") / "subagents" / "agent-a1.jsonl"
    side.parent.mkdir(parents=True)
    side.write_text(json.dumps({"type": "user", "sessionId": session["harness_session_id"],
                                "isSidechain": True, "uuid": "u1",
                                "message": {"role": "user", "content": "hi"}}) + "\n")
    assert rig.dh("import", "claude", "--all", "--home", str(rig.tmp / ".claude")).returncode == 0
    logged = side.read_bytes(), main.read_bytes()
    main.unlink()
    side.unlink()
    side.parent.rmdir()
    code, done = restore(rig, "--lost", "--yes")
    assert code == 0 and {f["status"] for f in done[0]["files"]} == {"restored"}
    assert (side.read_bytes(), main.read_bytes()) == logged
