"""Session identity without the harness's stdout (issue 13): the native session a launched
harness creates is found under its home by cwd and launch time (Codex's TUI and OpenCode's
print no id), sessions that were there before or that another dh session owns are never
taken, and the live mirror's inotify watch reaches files in folders made after it started
(Codex's sessions/YYYY/MM/DD/). The real TUIs: tests/e2e/test_identity_real.py."""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path

import pytest

from dh_cli.mirror import inotify
from dh_cli.mirror.live import Launch
from dh_cli.wrappers import get

THREAD = "01a230d4-d124-7fc3-b3a6-e74324331d04"
OTHER = "01a230d4-0000-7fc3-b3a6-e74324331d04"


def write_rollout(home: Path, thread: str, cwd: Path) -> Path:
    folder = home / "sessions" / time.strftime("%Y/%m/%d")
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"rollout-{time.strftime('%Y-%m-%dT%H-%M-%S')}-{thread}.jsonl"
    meta = {"timestamp": "t", "ordinal": 0, "type": "session_meta",
            "payload": {"id": thread, "session_id": thread, "cwd": str(cwd)}}
    path.write_text(json.dumps(meta) + "\n")
    return path


def test_codex_finds_the_rollout_the_launched_harness_created(tmp_path):
    codex, home, cwd = get("codex"), tmp_path / ".codex", tmp_path / "proj"
    cwd.mkdir()
    write_rollout(home, OTHER, cwd)  # there before the launch
    launch = Launch.of(codex, home, str(cwd))
    assert OTHER in launch.before
    assert codex.launched_session(home, str(cwd), launch.since, launch.before, False) is None
    write_rollout(home, "01a230d4-1111-7fc3-b3a6-e74324331d04", tmp_path)  # another folder
    path = write_rollout(home, THREAD, cwd)
    found = codex.launched_session(home, str(cwd), launch.since, launch.before, False)
    assert found.harness_session_id == THREAD and found.sources[0].path == path
    # owned by another dh session: never taken
    assert codex.launched_session(home, str(cwd), launch.since, launch.before, False,
                                  claimed=lambda sid: sid == THREAD) is None


def make_opencode_db(db: Path, wal: bool = True) -> sqlite3.Connection:
    """A database with OpenCode's session table, in WAL mode as OpenCode keeps it."""
    db.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(db)
    if wal:
        conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("CREATE TABLE session (id text PRIMARY KEY, directory text NOT NULL,"
                 " time_created integer NOT NULL, time_updated integer NOT NULL)")
    return conn


def add_row(conn, sid: str, directory: Path, ms: int) -> None:
    conn.execute("INSERT OR REPLACE INTO session VALUES (?, ?, ?, ?)", [sid, str(directory), ms, ms])
    conn.commit()


def test_opencode_finds_the_new_session_row_for_the_cwd(tmp_path):
    opencode, cwd = get("opencode"), tmp_path / "proj"
    cwd.mkdir()
    db = tmp_path / "data" / "opencode.db"
    assert opencode.launched_session(db, str(cwd), time.time(), {}, False) is None  # no db yet
    conn = make_opencode_db(db)
    old = int(time.time() * 1000) - 60_000
    add_row(conn, "ses_old", cwd, old)
    launch = Launch.of(opencode, db, str(cwd))
    assert launch.before == {"ses_old": old}
    now = int(time.time() * 1000)
    add_row(conn, "ses_elsewhere", tmp_path, now)
    assert opencode.launched_session(db, str(cwd), launch.since, launch.before, False) is None
    add_row(conn, "ses_new", cwd, now + 1)
    found = opencode.launched_session(db, str(cwd), launch.since, launch.before, False)
    assert found.harness_session_id == "ses_new" and found.sources[0].kind == "opencode"


def test_a_database_opencode_has_not_switched_to_wal_yet_is_not_opened(tmp_path):
    """OpenCode makes its database WAL at its start, before it sets a busy timeout: a read
    in that moment would make it fail ("database is locked"). dh waits for the header."""
    opencode, cwd = get("opencode"), tmp_path / "proj"
    cwd.mkdir()
    db = tmp_path / "opencode.db"
    conn = make_opencode_db(db, wal=False)
    launch = Launch.of(opencode, db, str(cwd))
    add_row(conn, "ses_new", cwd, int(time.time() * 1000) + 1)
    assert opencode.launched_session(db, str(cwd), launch.since, launch.before, False) is None
    conn.execute("PRAGMA journal_mode=WAL")
    found = opencode.launched_session(db, str(cwd), launch.since, launch.before, False)
    assert found.harness_session_id == "ses_new"


def test_a_harness_told_to_continue_is_matched_by_the_session_it_writes(tmp_path):
    """`opencode --continue` picks a session itself: the one whose row changed after launch."""
    opencode, cwd = get("opencode"), tmp_path / "proj"
    cwd.mkdir()
    db = tmp_path / "opencode.db"
    conn = make_opencode_db(db)
    old = int(time.time() * 1000) - 60_000
    add_row(conn, "ses_a", cwd, old)
    add_row(conn, "ses_b", cwd, old)
    launch = Launch.of(opencode, db, str(cwd), resuming=True)
    assert opencode.launched_session(db, str(cwd), launch.since, launch.before, True) is None
    conn.execute("UPDATE session SET time_updated = ? WHERE id = 'ses_b'", [int(time.time() * 1000)])
    conn.commit()
    found = opencode.launched_session(db, str(cwd), launch.since, launch.before, True)
    assert found.harness_session_id == "ses_b"
    # a new launch (not resuming) never takes a session that was there before
    assert opencode.launched_session(db, str(cwd), launch.since, launch.before, False) is None


@pytest.mark.skipif(not inotify.available(), reason="inotify is Linux only")
def test_the_watch_follows_folders_made_after_it_started(tmp_path):
    """Codex makes sessions/YYYY/MM/DD/ and writes the rollout three folders down: each
    append there must wake the watcher, not only the creation of the first folder."""
    root = tmp_path / "sessions"
    root.mkdir()
    watcher = inotify.Inotify(str(root))
    try:
        nested = root / "2026" / "12" / "01"
        nested.mkdir(parents=True)  # in one go: the inner folders exist before their watch
        assert watcher.wait(2.0)
        while watcher.wait(0.2):
            pass
        rollout = nested / "rollout.jsonl"
        with open(rollout, "ab") as handle:
            handle.write(b"{}\n")
            handle.flush()
            assert watcher.wait(2.0), "an append three folders down woke nothing"
            while watcher.wait(0.1):
                pass
            handle.write(b"{}\n")
            handle.flush()
            assert watcher.wait(2.0)
        assert len(watcher.folders) == 4
    finally:
        watcher.close()


def test_codex_watches_todays_dated_folder(tmp_path):
    codex, home = get("codex"), tmp_path / ".codex"
    assert codex.watch_folders(home) == [home / "sessions"]
    write_rollout(home, THREAD, tmp_path)
    folders = codex.watch_folders(home)
    assert folders[-1] == home / "sessions" / time.strftime("%Y/%m/%d") and len(folders) == 4
