"""Issue 14, finding 5: import identity, concurrency and refusal.

* A session's identity is (harness, native id, home): importing a file by path (absolute,
  relative, through a symlink) and then with --all stores it once.
* Parallel `dh import --all` of 40 sessions makes 40 sessions; the schema migration is
  serialized; a write waits DH_DB_TIMEOUT (30 s by default) for a busy log, not 3 s.
* Files that are not sessions of the named harness are refused with one `Error:` line; a bad
  session among many is skipped with a warning and the rest imported.
* `dh log rm SESSION` removes a session and its records (--yes; refuses off a terminal)."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import time
import uuid
from pathlib import Path

from dh_cli.worlds.local import LocalWorld
from dh_cli.workspace.store import Snapshot, store_for

from .conftest import FIXTURES, fixture_home
from .helpers.cli import dh, one_error


def counts() -> tuple[int, int]:
    world = LocalWorld()
    sessions = world.sessions()
    return len(sessions), sum(world.record_count(s.id) for s in sessions)


def test_by_path_then_all_stores_a_session_once(tmp_path):
    home = fixture_home("pi", "basic", tmp_path)
    native = next(home.rglob("*.jsonl"))
    link = tmp_path / "link.jsonl"
    link.symlink_to(native)
    assert dh("import", "pi", str(native), "--home", str(home)).returncode == 0
    once = counts()
    assert once[0] == 1 and once[1] > 0
    relative = os.path.relpath(native, tmp_path)
    for args in (["import", "pi", relative], ["import", "pi", str(link)],
                 ["import", "pi", "--all", "--home", str(home)]):
        done = dh(*args, cwd=tmp_path, env={"PI_CODING_AGENT_DIR": str(home)})
        assert done.returncode == 0, done.stderr
        assert counts() == once, args


def forty_sessions(home: Path) -> None:
    src = next((FIXTURES / "pi" / "basic" / "pi-agent").rglob("*.jsonl"))
    lines = src.read_bytes().splitlines(keepends=True)
    header = json.loads(lines[0])
    for n in range(40):
        sid = str(uuid.UUID(int=n + 1, version=4))
        folder = home / "sessions" / f"--proj{n}--"
        folder.mkdir(parents=True)
        (folder / f"2026-12-01T00-00-{n:02d}-000Z_{sid}.jsonl").write_bytes(
            (json.dumps({**header, "id": sid}) + "\n").encode() + b"".join(lines[1:]))


def test_three_parallel_imports_of_forty_sessions_make_forty(tmp_path):
    home = tmp_path / "pi-agent"
    forty_sessions(home)
    procs = [dh("import", "pi", "--all", "--home", str(home), wait=False) for _ in range(3)]
    results = [(p.wait(timeout=300), p.stderr.read()) for p in procs]
    assert [code for code, _ in results] == [0, 0, 0], results
    assert counts()[0] == 40


def test_a_busy_log_is_waited_for_as_documented(tmp_path, dh_home):
    """Another process holds the log's write lock for 5 s: an import waits (DH_DB_TIMEOUT
    defaults to 30 s) instead of giving up after a few seconds."""
    home = fixture_home("pi", "basic", tmp_path)
    LocalWorld().close()  # the log exists, migrated
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sqlite3, sys, time\n"
        f"c = sqlite3.connect({str(dh_home / 'dh.db')!r}, isolation_level=None)\n"
        "c.execute('BEGIN IMMEDIATE'); print('held', flush=True); time.sleep(5); c.execute('COMMIT')\n")],
        stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    started = time.monotonic()
    done = dh("import", "pi", "--all", "--home", str(home))
    holder.wait(timeout=30)
    assert done.returncode == 0, done.stderr
    assert time.monotonic() - started >= 4


def test_bad_db_timeouts_and_worlds_are_refused(tmp_path):
    for value in ("-1", "nan", "inf", "soon"):
        one_error(dh("log", "list", env={"DH_DB_TIMEOUT": value}), 2, "DH_DB_TIMEOUT")


def test_files_that_are_not_sessions_of_the_harness_are_refused(tmp_path):
    hostname = tmp_path / "hostname"
    hostname.write_text("myhost\n")
    one_error(dh("import", "codex", str(hostname)), 1, "is not a codex session file")
    claude = next((FIXTURES / "claude-code" / "basic" / "claude-config").rglob("*.jsonl"))
    one_error(dh("import", "pi", str(claude)), 1, "is not a pi session file")
    pi = next((FIXTURES / "pi" / "basic" / "pi-agent").rglob("*.jsonl"))
    one_error(dh("import", "claude", str(pi)), 1, "is not a claude-code session file")
    assert counts() == (0, 0)


def test_a_bad_session_is_skipped_with_a_warning_and_the_rest_imported(tmp_path):
    home = tmp_path / "pi-agent"
    forty_sessions(home)
    bad = sorted(home.rglob("*.jsonl"))[3]
    lines = bad.read_bytes().splitlines(keepends=True)
    header = json.loads(lines[0])
    bad.write_bytes((json.dumps({**header, "id": ["not", "an", "id"]}) + "\n").encode() + b"".join(lines[1:]))
    huge = sorted(home.rglob("*.jsonl"))[7]
    huge.write_bytes((json.dumps({**header, "id": "x" * 100_000}) + "\n").encode() + b"".join(lines[1:]))
    done = dh("import", "pi", "--all", "--home", str(home))
    assert done.returncode == 0, done.stderr
    warnings = [line for line in done.stderr.splitlines() if line.startswith("dh: warning: skipped")]
    assert len(warnings) == 2 and "Traceback" not in done.stderr
    assert all(len(line) < 1000 for line in warnings)
    assert counts()[0] == 38


def test_log_rm_removes_a_session_and_its_records(tmp_path):
    home = fixture_home("pi", "basic", tmp_path)
    assert dh("import", "pi", "--all", "--home", str(home)).returncode == 0
    world = LocalWorld()
    (session,) = world.sessions()
    store_for(world).put([], [Snapshot(session.id, 1, "2026-12-06T05:00:00Z", None, None, "start",
                                       "0" * 64, None, None, 0, 0, 0)])
    one_error(dh("log", "rm", session.id), 2, "without --yes")
    assert counts()[0] == 1
    removed = dh("log", "rm", session.id[:8], "--yes")
    assert removed.returncode == 0 and f"removed session {session.id}" in removed.stdout
    assert counts() == (0, 0)
    with sqlite3.connect(Path(os.environ["DH_HOME"]) / "dh.db") as conn:
        for table in ("sources", "records", "events", "places", "mirrored_paths", "ws_snapshots"):
            assert conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0] == 0, table
    assert dh("import", "pi", "--all", "--home", str(home)).returncode == 0
    assert counts()[0] == 1
    one_error(dh("log", "rm", "no-such-session", "--yes"), 1, "no session")


def test_log_rm_asks_on_a_terminal(tmp_path):
    import pexpect

    home = fixture_home("pi", "basic", tmp_path)
    assert dh("import", "pi", "--all", "--home", str(home)).returncode == 0
    (session,) = LocalWorld().sessions()
    child = pexpect.spawn(sys.executable, ["-m", "dh_cli", "log", "rm", session.id], env=dict(os.environ),
                          encoding="utf-8", timeout=60)
    child.expect(r"Remove session .* from the log\? \[y/N\]")
    child.sendline("n")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 1 and counts()[0] == 1
    child = pexpect.spawn(sys.executable, ["-m", "dh_cli", "log", "rm", session.id], env=dict(os.environ),
                          encoding="utf-8", timeout=60)
    child.expect(r"\[y/N\]")
    child.sendline("y")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0 and counts()[0] == 0
