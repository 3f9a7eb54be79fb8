"""Bad input, beyond the tailer's and the log database's own cases (test_tailer.py,
test_db.py): files cut, replaced or turned into something else while tailed, records of the
wrong shape, odd line endings, OpenCode databases that are locked, half-copied or foreign, a
log that is read-only, and bad command lines, config and references.

Each case ends in one of two ways: a clear one-line `Error:` with a non-zero exit code and no
traceback (run as a real `python -m dh_cli` process), or the native bytes kept exactly and the
oddity flagged where `dh log show` shows it. Never a traceback, never a dropped record.
Permission cases run in a child process that has dropped root (uid 65534)."""

from __future__ import annotations

import copy
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from dh_cli import wrappers
from dh_cli.logviews.logview import build_view
from dh_cli.mirror.session import SessionMirror
from dh_cli.resume.rebuild import source_bytes
from dh_cli.worlds.local import LocalWorld

from .conftest import FIXTURES, build_opencode_db, fixture_home
from .rig import dh
from tests.helpers import harnesses
from tests.helpers.cli import one_error
from tests.helpers.nobody import (NOBODY, as_nobody, cli, nobody_dir,  # noqa: F401 (a fixture)
                                  subprocess_free_cli)


def line(text: str, role: str = "user") -> bytes:
    return (json.dumps({"type": "message", "id": text[:8].ljust(8, "0"), "parentId": None,
                        "message": {"role": role, "content": text}}, separators=(",", ":"))
            + "\n").encode()


L1, L2, L3, L4 = (line(f"line {n} " + "x" * 40) for n in range(1, 5))



def logged(world, session) -> bytes:
    (source,) = world.sources(session.id)
    return source_bytes(world, source)


def generations(world, session) -> dict[int, bytes]:
    out: dict[int, bytes] = {}
    for record in world.records(session.id):
        out[record.generation] = out.get(record.generation, b"") + record.raw
    return out


def event_types(world, session) -> list[str]:
    return [e.type for e in world.events(session.id)]


def flags(world, session) -> list[str | None]:
    return [r.flags for r in world.records(session.id)]



# files cut, replaced or turned into something else while tailed -----------------------------
def test_truncated_in_the_middle_of_a_record_while_tailed(tail):
    """Truncated into its second line: a new generation starts (the old one stays whole), the
    cut line waits as a torn tail, and the file's later growth is logged."""
    path, sync, world, session = tail
    path.write_bytes(L1 + L2 + L3)
    sync()
    os.truncate(path, len(L1) + 10)
    result = sync()
    assert result.rewritten and result.pending == 10
    assert generations(world, session) == {0: L1 + L2 + L3, 1: L1}
    with open(path, "ab") as handle:
        handle.write(L2[10:] + L4)
    sync()
    assert logged(world, session) == path.read_bytes() == L1 + L2 + L4
    rewrite = [e for e in world.events(session.id) if e.type == "source_rewritten"]
    assert rewrite[0].details["reason"] == "shrunk"
    assert any(e["type"] == "source_rewritten" for e in build_view(world, session).events)


def test_torn_tail_cut_back_by_the_harness_is_no_rewrite(tail):
    """A harness that drops its own torn last line and writes on: nothing was committed from
    that line, so the file still extends the log."""
    path, sync, world, session = tail
    path.write_bytes(L1 + L2[:30])
    assert sync().pending == 30
    os.truncate(path, len(L1))
    with open(path, "ab") as handle:
        handle.write(L3)
    result = sync()
    assert (result.added, result.rewritten, result.pending) == (1, False, 0)
    assert logged(world, session) == path.read_bytes() == L1 + L3
    assert list(generations(world, session)) == [0]


def _numbered(marker: str, count: int = 120) -> bytes:
    return b"".join(line(f"{marker}{n:04d} " + "y" * 150) for n in range(count))


@pytest.mark.parametrize("new", ["same_size_other_middle", "shorter", "longer_other_head"])
def test_replaced_by_a_new_file_with_other_content(tail, new):
    """Replaced (a new inode, as by an editor or a rename over it) with different content: a
    new generation, however small the difference and wherever it is, and the old one kept.
    Only the first and last 4 KiB are fingerprinted on every sync, so a change in the
    middle is found by comparing the new file with the log in full."""
    path, sync, world, session = tail
    old = _numbered("m")
    path.write_bytes(old)
    sync()
    replacement = {"same_size_other_middle": old.replace(b"m0060", b"M0060"),
                   "shorter": old[:len(old) // 3], "longer_other_head": _numbered("h", 200)}[new]
    tmp = path.with_name("s.jsonl.new")
    tmp.write_bytes(replacement)
    os.replace(tmp, path)
    assert sync().rewritten
    assert generations(world, session) == {0: old, 1: replacement}
    assert logged(world, session) == path.read_bytes()
    assert "source_rewritten" in event_types(world, session)


def test_symlink_loop_at_the_session_path(tail):
    path, sync, world, session = tail
    os.symlink(path, path)
    assert sync().missing
    (event,) = world.events(session.id)
    assert event.type == "source_unreadable" and "symbolic links" in event.details["error"]
    path.unlink()
    path.write_bytes(L1)
    assert sync().added == 1
    assert event_types(world, session)[-1] == "source_back"


def test_fifo_at_the_session_path_does_not_block_the_mirror(tail):
    path, sync, world, session = tail
    os.mkfifo(path)
    done: list = []
    worker = threading.Thread(target=lambda: done.append(sync()), daemon=True)
    worker.start()
    worker.join(10)
    assert done and done[0].missing, "the mirror blocked opening a FIFO"
    (event,) = world.events(session.id)
    assert event.type == "source_unreadable" and event.details["error"] == "not a regular file"
    one_error(dh("import", "pi", str(path), timeout=30), 1, "is not a regular file")


def _unreadable_folder_scenario(folder: Path) -> dict:
    """Runs as uid 65534: the session's folder loses its permissions while it is tailed."""
    os.environ["DH_HOME"] = str(folder / "dh-home")
    sessions = folder / "sessions"
    sessions.mkdir()
    path = sessions / "s.jsonl"
    path.write_bytes(L1 + L2)
    world = LocalWorld()
    session = world.create_session("pi", home=str(folder), harness_session_id="s1")
    world.add_source(session.id, "jsonl", "sessions/s.jsonl", str(path))
    sync = SessionMirror(world, wrappers.get("pi"), session).sync
    seen = {"first": sync().added}
    sessions.chmod(0)
    seen["denied"] = sync().missing
    seen["events"] = [(e.type, e.details.get("error")) for e in world.events(session.id)]
    sessions.chmod(0o755)
    with open(path, "ab") as handle:
        handle.write(L3)
    seen["after"] = sync().added
    seen["logged_is_native"] = logged(world, session) == path.read_bytes()
    seen["last_event"] = event_types(world, session)[-1]
    print(json.dumps(seen))
    return 0


def test_session_folder_without_permission_is_flagged_then_caught_up(nobody_dir):
    code, out = as_nobody(_unreadable_folder_scenario, nobody_dir)
    assert code == 0, out
    seen = json.loads(out.strip().splitlines()[-1])
    assert seen["first"] == 2 and seen["denied"]
    assert seen["events"] == [["source_unreadable", "Permission denied"]]
    assert seen["after"] == 1 and seen["logged_is_native"] and seen["last_event"] == "source_back"


def test_import_from_a_folder_without_permission_is_one_error(nobody_dir):
    folder = nobody_dir / "sessions"
    folder.mkdir()
    (folder / "s.jsonl").write_bytes(L1)
    folder.chmod(0)
    os.chown(folder, 0, 0)
    code, out = as_nobody(lambda: (os.environ.update(DH_HOME=str(nobody_dir / "dh")),
                                   cli("import", "pi", str(folder / "s.jsonl")))[-1])
    assert code == 1, out
    assert out.strip() == f"Error: cannot read {folder / 's.jsonl'}: Permission denied"


# records of an unexpected shape ---------------------------------------------------------------
@pytest.mark.parametrize("bad", [b"[1,2]\n", b'"just text"\n', b"42\n", b"null\n", b"true\n"])
def test_json_that_is_not_an_object_is_kept_and_flagged(tail, bad):
    path, sync, world, session = tail
    path.write_bytes(L1 + bad + L2)
    assert sync().added == 3
    assert logged(world, session) == path.read_bytes()
    assert flags(world, session) == [None, "not_object", None]
    assert [i["flags"] for i in build_view(world, session).items if i["type"] == "flagged"] == [["not_object"]]


def test_crlf_line_endings_are_kept_byte_exact_and_read(tail):
    path, sync, world, session = tail
    crlf = b"".join(x[:-1] + b"\r\n" for x in (L1, L2, L3))
    path.write_bytes(crlf)
    assert sync().added == 3
    assert logged(world, session) == crlf
    assert [r.raw[-2:] for r in world.records(session.id)] == [b"\r\n"] * 3
    assert flags(world, session) == [None] * 3
    assert [r.kind for r in world.records(session.id)] == ["user"] * 3
    assert [i["type"] for i in build_view(world, session).items] == ["prompt"] * 3


def test_blank_lines_and_a_byte_order_mark_are_kept_and_flagged(tail):
    path, sync, world, session = tail
    data = b"\xef\xbb\xbf" + L1 + b"\n" + b"  \t\r\n" + L2
    path.write_bytes(data)
    assert sync().added == 4
    assert logged(world, session) == data
    assert flags(world, session) == ["bad_json", "bad_json", "bad_json", None]


def test_nesting_deep_enough_to_crash_a_json_parser_is_kept_and_flagged(tail):
    """A million nested arrays overflow the C stack of orjson (a segfault) and json.loads
    raises RecursionError: dh flags such a line without parsing it."""
    path, sync, world, session = tail
    deep = b'{"x":' + b"[" * 1_000_000 + b"]" * 1_000_000 + b"}\n"
    path.write_bytes(L1 + deep + L2)
    assert sync().added == 3
    assert logged(world, session) == path.read_bytes()
    assert flags(world, session) == [None, "too_deep", None]


def test_many_tiny_lines(tail):
    path, sync, world, session = tail
    data = b"{}\n" * 300_000
    path.write_bytes(data)
    assert sync().added == 300_000
    assert world.record_count(session.id) == 300_000
    assert logged(world, session) == data


def test_a_50_mb_line_without_its_newline_waits_then_is_logged_whole(tail):
    path, sync, world, session = tail
    start = b'{"type":"custom","data":"' + b"z" * (50 << 20)
    path.write_bytes(L1 + start)
    result = sync()
    assert (result.added, result.pending) == (1, len(start))
    assert logged(world, session) == L1
    with open(path, "ab") as handle:
        handle.write(b'"}\n')
    assert sync().added == 1
    assert logged(world, session) == path.read_bytes()


# damaged fields, per harness: every record kept, the odd ones flagged, nothing crashes -------
WEIRD = [[], {"k": [None]}, 10 ** 30, "text", -1.5, True]


def _damage(obj, rng, depth=0):
    """Replace a few leaves and subtrees of obj by values of another type."""
    if isinstance(obj, dict) and obj:
        for key in rng.sample(sorted(obj), min(len(obj), 3)):
            obj[key] = copy.deepcopy(rng.choice(WEIRD)) if rng.random() < 0.5 or depth > 3 \
                else _damage(obj[key], rng, depth + 1)
    elif isinstance(obj, list) and obj:
        index = rng.randrange(len(obj))
        obj[index] = _damage(obj[index], rng, depth + 1)
    else:
        return copy.deepcopy(rng.choice(WEIRD))
    return obj


def _damaged_lines(path: Path, seed: int) -> bytes:
    import random

    rng = random.Random(seed)
    out = []
    for raw in path.read_bytes().splitlines(keepends=True):
        obj = json.loads(raw)
        for _ in range(8):  # each line, and seven damaged copies of it
            out.append(raw)
            raw = (json.dumps(_damage(copy.deepcopy(obj), rng)) + "\n").encode()
    return b"".join(out)


@pytest.mark.parametrize("harness", harnesses.JSONL)
def test_damaged_fields_in_every_record_of_a_real_session(harness, tmp_path, run_dh):
    """Ids that are lists, token counts that are text or beyond 64 bits, a message that is a
    string: each such line of a real session is logged as written and flagged `bad_field`
    (or `bad_shape`); `dh log show` and `dh log export` still work."""
    home = fixture_home(harness, "multiturn", tmp_path)
    native = max((p for p in home.rglob("*.jsonl")), key=lambda p: p.stat().st_size)
    native.write_bytes(_damaged_lines(native, seed=7))
    assert run_dh("import", harness, str(native)).exit_code == 0
    world = LocalWorld()
    (session,) = world.list_sessions()
    source = world.sources(session["id"])[0]
    assert source_bytes(world, source) == native.read_bytes()
    got = [r.flags or "" for r in world.records(session["id"])]
    assert sum("bad_field" in f or "bad_shape" in f for f in got) > len(got) // 3
    shown = run_dh("log", "show", session["id"], "--json")
    assert shown.exit_code == 0
    assert any(i["type"] == "flagged" for i in json.loads(shown.stdout)["items"])
    assert run_dh("log", "show", session["id"]).exit_code == 0
    for fmt in ("md", "html", "jsonl"):
        assert run_dh("log", "export", session["id"], "--format", fmt).exit_code == 0


def test_damaged_fields_in_opencode_rows(tmp_path, run_dh):
    import random

    rng = random.Random(3)
    src = FIXTURES / "opencode" / "multiturn"
    rows = [json.loads(x) for x in (src / "db" / "rows.jsonl").read_text().splitlines()]
    for row in rows:
        if row["table"] in ("message", "part") and rng.random() < 0.7:
            row["data"] = json.dumps(_damage(json.loads(row["data"]), rng))
    fake = tmp_path / "src"
    (fake / "db").mkdir(parents=True)
    shutil.copy(src / "db" / "opencode.db.schema.sql", fake / "db")
    (fake / "db" / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    db = build_opencode_db(fake, tmp_path / "opencode.db")
    assert run_dh("import", "opencode", "--all", "--home", str(db)).exit_code == 0
    (session,) = LocalWorld().list_sessions()
    assert session["records"] == len(rows)
    assert run_dh("log", "show", session["id"], "--json").exit_code == 0
    assert run_dh("log", "export", session["id"], "--format", "md").exit_code == 0


# dh import / run / resume / log with bad paths, references and settings ---------------------
def test_import_of_a_path_that_does_not_exist(tmp_path):
    one_error(dh("import", "pi", str(tmp_path / "nope.jsonl")), 1, "does not exist")


def test_import_of_a_directory(tmp_path):
    (tmp_path / "dir.jsonl").mkdir()
    one_error(dh("import", "pi", str(tmp_path / "dir.jsonl")), 1, "is not a regular file")


def test_import_of_a_symlink_loop(tmp_path):
    loop = tmp_path / "loop.jsonl"
    os.symlink(loop, loop)
    one_error(dh("import", "claude", str(loop)), 1, "Too many levels of symbolic links")


def test_import_from_a_home_that_does_not_exist(tmp_path):
    one_error(dh("import", "codex", "--all", "--home", str(tmp_path / "no-such-home")), 1,
              "does not exist")


def test_import_of_an_empty_session_file(tmp_path):
    """An empty file is a session with nothing in it yet: imported, no record, no error."""
    path = tmp_path / "2026-12-01T00-00-00-000Z_01a2264b-8750-762a-918b-d8a8a906ba5f.jsonl"
    path.write_bytes(b"")  # named as Pi names it: the id comes from the name until the header
    result = dh("import", "pi", str(path), "--json")
    assert result.returncode == 0 and json.loads(result.stdout)["records_added"] == 0
    (session,) = json.loads(dh("log", "list", "--json").stdout)
    view = json.loads(dh("log", "show", session["id"], "--json").stdout)
    assert view["sources"][0]["records"] == 0 and view["items"] == []


def test_import_of_a_file_of_only_a_partial_line(tmp_path):
    """Nothing is complete yet: nothing is logged, the torn bytes are reported as pending
    (by `dh import` and in `dh log show`), and the line is logged once it ends."""
    path = tmp_path / "2026-12-01T00-00-00-000Z_01a2264b-8750-762a-918b-d8a8a906ba5f.jsonl"
    header = (json.dumps({"type": "session", "version": 3, "id": "01a2264b-8750-762a-918b-d8a8a906ba5f",
                          "timestamp": "2026-12-01T00:00:00.000Z", "cwd": str(tmp_path)}) + "\n").encode()
    path.write_bytes(header[:25])  # Pi's header, cut: a Pi session still being written
    first = dh("import", "pi", str(path))
    assert first.returncode == 0 and "25 byte(s) of torn last lines left pending" in first.stderr
    (session,) = json.loads(dh("log", "list", "--json").stdout)
    view = json.loads(dh("log", "show", session["id"], "--json").stdout)
    assert (view["sources"][0]["records"], view["sources"][0]["pending_bytes"]) == (0, 25)
    path.write_bytes(header)
    assert json.loads(dh("import", "pi", str(path), "--json").stdout)["records_added"] == 1


@pytest.mark.parametrize("argv", [["run", "aider", "--", "-p", "x"], ["import", "aider", "--all"],
                                  ["log", "list", "--harness", "aider"]])
def test_unknown_harness_name(argv):
    one_error(dh(*argv), 2, "unknown harness 'aider'")


def _marker_harness(tmp_path) -> dict:
    """A `pi` that only leaves a marker: proves whether dh launched anything."""
    script = tmp_path / "pi-marker"
    script.write_text(f"#!/bin/sh\ntouch {tmp_path / 'launched'}\n")
    script.chmod(0o755)
    return {"DH_PI_BIN": str(script), "PI_CODING_AGENT_DIR": str(tmp_path / "pi-agent")}


def test_malformed_config_stops_dh_run_before_anything_starts(tmp_path):
    config = tmp_path / "xdg-config" / "dh" / "config.toml"  # conftest's XDG_CONFIG_HOME
    config.parent.mkdir(parents=True)
    config.write_text("[restart]\nmax_restarts = \n")
    one_error(dh("run", "pi", "--", "-p", "x", env=_marker_harness(tmp_path)), 2,
              f"malformed TOML in {config}")
    assert not (tmp_path / "launched").exists()
    assert json.loads(dh("log", "list", "--json").stdout) == []


def test_malformed_replay_on_run_and_resume(tmp_path):
    env = _marker_harness(tmp_path)
    one_error(dh("run", "pi", "--replay", "bash=maybe", "--", "-p", "x", env=env), 2,
              "bad --replay value 'bash=maybe'")
    assert not (tmp_path / "launched").exists()
    dh("import", "pi", "--all", "--home", str(fixture_home("pi", "killed", tmp_path)))
    (session,) = json.loads(dh("log", "list", "--json").stdout)
    one_error(dh("resume", session["id"], "--replay", "=safe", env=env), 2, "bad --replay value")
    assert not (tmp_path / "launched").exists()


@pytest.mark.parametrize("argv", [["resume", "01a2264b"], ["log", "rebuild", "01a2264b"],
                                  ["log", "export", "01a2264b"]])
def test_a_session_reference_matching_several_sessions(tmp_path, argv):
    for scenario in ("basic", "multiturn"):  # both Pi ids start with 01a2264b
        dh("import", "pi", "--all", "--home", str(fixture_home("pi", scenario, tmp_path)))
    one_error(dh(*argv, env=_marker_harness(tmp_path)), 2, "'01a2264b' matches 2 sessions")
    assert not (tmp_path / "launched").exists()


def test_a_session_of_a_harness_this_dh_does_not_know(tmp_path):
    """A log written by a newer dh (or pulled) may hold a harness this one lacks: listing
    works; showing or resuming it is one clear error."""
    session = LocalWorld().create_session("aider", harness_session_id="a1", state="imported")
    listed = dh("log", "list", "--json")
    assert listed.returncode == 0 and json.loads(listed.stdout)[0]["harness"] == "aider"
    one_error(dh("log", "show", session.id), 2, "unknown harness 'aider'")
    one_error(dh("resume", session.id), 2, "unknown harness 'aider'")


def test_a_bad_db_timeout_value():
    one_error(dh("log", "list", env={"DH_DB_TIMEOUT": "soon"}), 2, "DH_DB_TIMEOUT")


def test_dh_home_that_is_a_file(tmp_path):
    (tmp_path / "file").write_text("x")
    one_error(dh("log", "list", env={"DH_HOME": str(tmp_path / "file")}), 3, "is not a folder")


def test_rebuild_to_a_folder_under_a_file(tmp_path):
    dh("import", "pi", "--all", "--home", str(fixture_home("pi", "basic", tmp_path)))
    (session,) = json.loads(dh("log", "list", "--json").stdout)
    (tmp_path / "file").write_text("x")
    one_error(dh("log", "rebuild", session["id"], "--to", str(tmp_path / "file" / "sub")), 1,
              "cannot write")


# OpenCode's database: locked, half copied, foreign ---------------------------------------------
def _opencode_tail(tmp_path, journal: str):
    db = build_opencode_db(FIXTURES / "opencode" / "basic", tmp_path / "opencode.db")
    conn = sqlite3.connect(db)
    conn.execute(f"PRAGMA journal_mode={journal}")
    conn.close()
    wrapper = wrappers.get("opencode")
    world = LocalWorld()
    (native,) = wrapper.discover(db)
    session = world.create_session("opencode", harness_session_id=native.harness_session_id,
                                   home=str(db))
    mirror = SessionMirror(world, wrapper, session)
    mirror.track(native)
    mirror.sync()
    return db, native.harness_session_id, mirror, world, session


def _add_part(conn, session_id: str) -> None:
    now = int(time.time() * 1000)
    message = conn.execute("SELECT id FROM message WHERE session_id = ? LIMIT 1", [session_id]).fetchone()[0]
    conn.execute("INSERT INTO part (id, message_id, session_id, time_created, time_updated, data)"
                 " VALUES (?, ?, ?, ?, ?, ?)",
                 [f"prt_dhtest{now}", message, session_id, now, now,
                  json.dumps({"type": "text", "text": "written while locked"})])


def test_opencode_db_locked_by_a_writer_in_wal_mode(tmp_path):
    """OpenCode keeps its database in WAL: a writer holding the lock (BEGIN EXCLUSIVE) never
    stops dh's read-only mirror, which sees what is committed and catches up after."""
    db, sid, mirror, world, session = _opencode_tail(tmp_path, "WAL")
    before = world.record_count(session.id)
    writer = sqlite3.connect(db, isolation_level=None)
    writer.execute("BEGIN EXCLUSIVE")
    _add_part(writer, sid)
    # read, not blocked: a blocked reader would give up after its busy timeout (missing)
    assert not mirror.sync().missing
    assert world.record_count(session.id) == before  # not committed yet: not visible
    writer.execute("COMMIT")
    assert mirror.sync().added == 1
    assert "source_unreadable" not in event_types(world, session)


@pytest.mark.timing  # the give-up comes within its short timeout (5 s)
def test_opencode_db_locked_by_a_writer_in_rollback_journal_mode(tmp_path):
    """With a rollback journal an exclusive writer does block readers: the mirror gives up
    after its short timeout, flags the source, and catches up once the lock is released."""
    db, sid, mirror, world, session = _opencode_tail(tmp_path, "DELETE")
    writer = sqlite3.connect(db, isolation_level=None)
    writer.execute("BEGIN EXCLUSIVE")
    _add_part(writer, sid)
    started = time.monotonic()
    assert mirror.sync().missing
    assert time.monotonic() - started < 5
    event = world.events(session.id)[-1]
    assert event.type == "source_unreadable" and "locked" in event.details["error"]
    writer.execute("COMMIT")
    assert mirror.sync().added == 1
    assert event_types(world, session)[-1] == "source_back"


def test_opencode_db_in_wal_copied_without_its_wal_file(tmp_path):
    """A copy of opencode.db taken while recent commits sat in opencode.db-wal: dh reads what
    the main file holds, without an error, and leaves the copy as it was."""
    db = build_opencode_db(FIXTURES / "opencode" / "multiturn", tmp_path / "live.db")
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA wal_autocheckpoint=0")
    (sid,) = conn.execute("SELECT id FROM session").fetchone()
    _add_part(conn, sid)  # committed, but only in live.db-wal
    copy_dir = tmp_path / "copy"
    copy_dir.mkdir()
    shutil.copy(db, copy_dir / "opencode.db")
    conn.close()
    assert not (copy_dir / "opencode.db-wal").exists()
    result = dh("import", "opencode", "--all", "--home", str(copy_dir / "opencode.db"), "--json")
    assert result.returncode == 0, result.stderr
    rows = (FIXTURES / "opencode" / "multiturn" / "db" / "rows.jsonl").read_text().splitlines()
    assert json.loads(result.stdout)["records_added"] == len(rows)


def test_opencode_db_of_an_unknown_schema(tmp_path):
    other = tmp_path / "other.db"
    conn = sqlite3.connect(other)
    conn.execute("CREATE TABLE conversations (id TEXT)")
    conn.commit()
    conn.close()
    one_error(dh("import", "opencode", "--all", "--home", str(other)), 1, "unknown OpenCode schema")


def test_opencode_db_whose_schema_changes_under_the_mirror(tmp_path):
    db, sid, mirror, world, session = _opencode_tail(tmp_path, "WAL")
    conn = sqlite3.connect(db)
    conn.execute("ALTER TABLE session RENAME TO session_v2")
    conn.commit()
    assert mirror.sync().missing
    assert "unknown OpenCode schema" in world.events(session.id)[-1].details["error"]
    assert world.record_count(session.id) > 0  # what was logged stays


def test_opencode_db_that_is_not_a_database(tmp_path):
    junk = tmp_path / "opencode.db"
    junk.write_bytes(b"not sqlite at all\n" * 200)
    one_error(dh("import", "opencode", "--all", "--home", str(junk)), 1, "file is not a database")


# the log database ------------------------------------------------------------------------------
def _read_only_log(folder: Path, home: str) -> int:
    os.environ["DH_HOME"] = str(folder / "dh-home")
    listed = subprocess_free_cli("log", "list", "--json")
    imported = subprocess_free_cli("import", "pi", "--all", "--home", home)
    print(json.dumps({"list": listed, "import": imported}))
    return 0



def test_read_only_log_can_be_read_but_not_written(nobody_dir, tmp_path):
    home = nobody_dir / "pi-home"
    shutil.copytree(fixture_home("pi", "basic", tmp_path), home)
    os.environ["DH_HOME"] = str(nobody_dir / "dh-home")
    LocalWorld().close()
    for path in [nobody_dir / "dh-home", *(nobody_dir / "dh-home").iterdir(), *home.rglob("*")]:
        os.chown(path, NOBODY, NOBODY)
    (nobody_dir / "dh-home" / "dh.db").chmod(0o400)
    code, out = as_nobody(_read_only_log, nobody_dir, str(home))
    assert code == 0, out
    seen = json.loads(out.strip().splitlines()[-1])
    assert seen["list"][0] == 0 and json.loads(seen["list"][1]) == []
    code, _, err = seen["import"]
    assert code == 3, err
    (only,) = err.strip().splitlines()
    assert only.startswith("Error: cannot write the log") and "Traceback" not in err


def test_readers_are_not_blocked_by_a_writer_holding_the_log(tmp_path):
    dh("import", "pi", "--all", "--home", str(fixture_home("pi", "basic", tmp_path)))
    holder = sqlite3.connect(LocalWorld().path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    holder.execute("UPDATE sessions SET state = 'x'")
    try:
        listed = dh("log", "list", "--json", env={"DH_DB_TIMEOUT": "1"})
        (session,) = json.loads(listed.stdout)
        assert dh("log", "show", session["id"], env={"DH_DB_TIMEOUT": "1"}).returncode == 0
        assert session["state"] == "imported"  # the writer's change is not visible yet
    finally:
        holder.execute("ROLLBACK")


# a session file deleted while `dh run` mirrors it ---------------------------------------------
def test_session_file_deleted_during_dh_run(tmp_path):
    """Pi's file is deleted mid-turn (the model reply stalls meanwhile); Pi writes on into a
    new file. The log keeps every record it had read, flags the deletion, logs the new file as
    a new generation, and dh run ends normally (nothing to resume: the turn completed)."""
    from .fakes.model_server import FakeModelServer
    from .rig import HEADLESS_ARGS, SCRIPT, Rig

    script = {"replies": [SCRIPT["replies"][0], dict(SCRIPT["replies"][1], delay_s=4, delay_times=1),
                          *SCRIPT["replies"][2:]]}
    server = FakeModelServer(script).start()
    try:
        rig = Rig(tmp_path, server)
        proc = subprocess.Popen([sys.executable, "-m", "dh_cli", "run", "pi", "--",
                                 *HEADLESS_ARGS["pi"]("Create the files.")], cwd=rig.proj,
                                env=rig.env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE)
        server.wait_for(lambda log: any(e.get("reply_index") == 1 for e in log), timeout=30)
        (native,) = (tmp_path / "pi-agent" / "sessions").rglob("*.jsonl")
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:  # until the mirror has the records written so far
            world = rig.world()
            sessions = world.list_sessions()
            if sessions and sessions[0]["records"] == len(native.read_bytes().splitlines()):
                break
            time.sleep(0.1)
        before = native.read_bytes()
        native.unlink()
        out, err = proc.communicate(timeout=90)
    finally:
        server.stop()
    assert proc.returncode == 0, err.decode()
    assert b"Traceback" not in err
    world = rig.world()
    (session,) = world.list_sessions()
    gens = generations(world, world.get_session(session["id"]))
    assert gens[0] == before  # nothing that was read is lost
    assert gens[max(gens)] == native.read_bytes()  # the new file, as written
    # flagged as deleted if the mirror looked while the file was gone; as rewritten always
    events = world.events(session["id"])
    assert [e for e in events if e.type == "source_rewritten"]
    assert {e.type for e in events} <= {"run", "launch", "launched", "exited", "state", "source_deleted",
                                        "source_back", "source_rewritten"}
    text = dh("log", "show", session["id"], env={"DH_HOME": rig.env["DH_HOME"]})
    assert text.returncode == 0
