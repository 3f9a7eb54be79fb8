"""The shared mirror syncs every session with news in one transaction
(dh_cli/mirror/shared_sessions.py). A write that fails in the middle of a round rolls back
the sessions synced before it too: each then starts again from what the log holds, and the
next round logs every line exactly once. In-process, over real Pi-format files written by the
load writer (tests/fakes/pi_writer.py)."""

from __future__ import annotations

import json

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

from dh_cli.mirror.shared_sessions import GroupWorld, Held, SessionMirrors
from dh_cli.mirror.shared_wire import PROTOCOL
from dh_cli.resume.rebuild import source_bytes
from dh_cli.worlds.local import LocalWorld

WRITER = Path(__file__).resolve().parent / "fakes" / "pi_writer.py"


def pi_file(folder: Path, records: int) -> Path:
    native = folder / "session.jsonl"
    subprocess.run([sys.executable, str(WRITER), "--session", str(native)], check=True, cwd=folder.parent,
                   env={**os.environ, "DH_WRITER_RATE": "100000", "DH_WRITER_RECORDS": str(records)})
    return native


def two_sessions(tmp_path: Path, records: int):
    """A log with two Pi sessions of `records` and one more lines, held by one SessionMirrors:
    (db, world, native files, sessions, mirrors, held, what their clients were told)."""
    db = tmp_path / "dh.db"
    world = LocalWorld(db)
    natives = [pi_file(tmp_path / f"s{n}", records + n) for n in range(2)]
    sessions = [world.create_session("pi", home=str(p.parent), cwd=str(p.parent), native_path=str(p))
                for p in natives]
    told = []
    mirrors = SessionMirrors(db, lambda held, folder: None, lambda held, data: told.append(json.loads(data)))
    held = [Held({"version": PROTOCOL, "session": s.id, "wrapper": "pi", "dirs": []}, owner=None) for s in sessions]
    mirrors.held.update(held)
    return db, world, natives, sessions, mirrors, held, told


def test_a_failed_round_rolls_back_every_session_and_the_next_logs_each_line_once(tmp_path, monkeypatch):
    db, world, natives, sessions, mirrors, held, told = two_sessions(tmp_path, 20)
    real, calls = GroupWorld.commit, []

    def second_fails(self, source, records, *args, **kwargs):
        calls.append(source.session_id)
        if len(calls) == 2:
            raise sqlite3.OperationalError("database or disk is full")
        return real(self, source, records, *args, **kwargs)

    monkeypatch.setattr(GroupWorld, "commit", second_fails)
    assert mirrors.sync(held) == []
    assert calls == [sessions[0].id, sessions[1].id]
    assert logged(db) == 0  # the first session's records went with the round
    assert all(h.failing for h in held) and all(h.mirror is None for h in held)
    assert sum("keeps trying to log it" in m["text"] for m in told) == 2
    monkeypatch.setattr(GroupWorld, "commit", real)
    for h in held:
        h.due = 0.0
    assert mirrors.sync(held) == []
    for item, native in zip(sessions, natives):
        (source,) = world.sources(item.id)
        assert source_bytes(world, source) == native.read_bytes()
        assert world.source_stats(source.id)[1] == native.read_bytes().count(b"\n")
        assert [e.type for e in world.events(item.id)].count("log_write_failed") == 1
    assert not any(h.failing for h in held)
    assert sum("can be written again" in m["text"] for m in told) == 2
    mirrors.reset()
    world.close()


def logged(db: Path) -> int:
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT COUNT(*) FROM records").fetchone()[0]


def test_a_session_that_fails_by_itself_is_let_go_and_fails_no_other(tmp_path, monkeypatch):
    """One session's own failure (here: a record the log refuses) rolls the round back and
    lets that session go, for its client to take back; no session is marked failing, and the
    next round logs the other session's lines once."""
    db, world, natives, sessions, mirrors, held, told = two_sessions(tmp_path, 10)
    real = GroupWorld.commit

    def first_refused(self, source, records, *args, **kwargs):
        added = real(self, source, records, *args, **kwargs)  # written, then refused
        if source.session_id == sessions[0].id:
            raise sqlite3.IntegrityError("UNIQUE constraint failed")
        return added

    monkeypatch.setattr(GroupWorld, "commit", first_refused)
    assert mirrors.sync(held) == [held[0]]
    assert not any(h.failing for h in held) and told == []
    assert held[1].due == 0.0  # again at once
    assert mirrors.sync(held[1:]) == []
    assert world.sources(sessions[0].id) == []  # its source went with the round
    (kept,) = world.sources(sessions[1].id)
    assert source_bytes(world, kept) == natives[1].read_bytes()
    assert world.source_stats(kept.id)[1] == natives[1].read_bytes().count(b"\n")
    mirrors.reset()
    world.close()


def test_what_a_client_sends_is_checked_before_it_is_used(tmp_path):
    """A hold names strings that can name files, the protocol's version, and a native id of
    the harness's shape (it becomes a file pattern); anything else is refused."""
    good = {"version": PROTOCOL, "session": "s", "wrapper": "pi", "dirs": [str(tmp_path)]}
    Held(good, owner=None)
    bad = [{**good, "version": PROTOCOL - 1}, {**good, "session": ["s"]}, {**good, "dirs": str(tmp_path)},
           {**good, "dirs": ["\ud800"]}, {**good, "dirs": ["a\0b"]}, {**good, "native_id": "*"},
           {**good, "native_id": 7}, {**good, "wrapper": "nope"}]
    for message in bad:
        try:
            Held(message, owner=None)
        except Exception:  # noqa: BLE001 - the server closes the connection on any of them
            continue
        raise AssertionError(f"accepted {message}")
