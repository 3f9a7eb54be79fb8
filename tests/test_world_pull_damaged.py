"""One damaged thing in a team world stops only its own session: a record row with a codec no
dh knows, one whose packed bytes do not decode, one whose columns have the wrong types (Redis
keeps them as JSON; PostgreSQL's schema refuses them), a workspace tree whose bytes are not
a tree, one whose bytes are not what its hash says. `dh world pull` takes every other session
whole, says in one line each which session it could not take and why, leaves no part of a
damaged session in the log, and exits 7 ("pulled with failures"). Proven on the real
PostgreSQL and Redis servers, through the real CLI."""

from __future__ import annotations

import json

import orjson
import pytest

from dh_cli.models import Event, Record, Session, Source
from dh_cli.team.sync import pull
from dh_cli.workspace.objects import BLOB, FILE, TREE, TreeEntry, blob_hash, tree_bytes, tree_hash
from dh_cli.workspace.store import Snapshot, store_for
from dh_cli.worlds.local import LocalWorld
from dh_cli.worlds.rows import RECORD_COLUMNS, stored_rows

from .helpers.cli import dh
from .helpers.team_worlds import Team, pg_url, redis_url, team  # noqa: F401  (fixtures)

LINES = 4
FILE_BYTES = b"print('kept')\n"


def a_session(world, sid: str, created: str) -> Source:
    """A pi session of LINES records, written to the world as a team member's push would."""
    world.put_session(Session(id=sid, harness="pi", state="exited", created_at=created, updated_at=created))
    source = world.put_source(Source(0, sid, "jsonl", f"sessions/{sid}.jsonl"))
    world.append_rows(stored_rows(source, [Record(source.id, 0, i * 10, b'{"i":%d}\n' % i)
                                           for i in range(LINES)]))
    return source


def a_snapshot(world, sid: str, root: tuple, extra: list[tuple] = ()) -> None:
    """A snapshot of sid whose root tree is the object row `root` (hash, kind, size, codec,
    data), written straight to the world's tables: a hostile member chose the bytes."""
    snap = Snapshot(sid, 1, "2026-12-01T00:00:00Z", 1, "call-1", "tool", root[0], files=1)
    world.ws_put([*extra, root], [snap.row()])


def good_tree() -> tuple[tuple, list[tuple]]:
    data = tree_bytes([TreeEntry("main.py", FILE, 0o644, blob_hash(FILE_BYTES), len(FILE_BYTES))])
    blob = (blob_hash(FILE_BYTES), BLOB, len(FILE_BYTES), 0, FILE_BYTES)
    return (tree_hash(data), TREE, len(data), 0, data), [blob]


def garbage_tree() -> tuple:
    """Bytes whose hash is right but which are no tree: only parsing them finds out."""
    data = b"dhtree1\n" + b"\xff" * 7
    return (tree_hash(data), TREE, len(data), 0, data)


def forged_tree() -> tuple:
    """A tree's name over other bytes."""
    data = tree_bytes([])
    return (tree_hash(b"another tree"), TREE, len(data), 0, data)


def damage_row(world, source: Source, how: str) -> None:
    """Replace the world's second record of `source` with a damaged one."""
    codec, raw = {"codec": (99, b'{"i":1}\n'), "packed": (2, b"\x40\x00\x00\x00garbage")}.get(how, (0, b""))
    if how == "types":  # Redis: the row's columns as JSON, the wrong JSON types in them
        head = [None] * (len(RECORD_COLUMNS) - 4)
        head[RECORD_COLUMNS.index("tokens_in") - 4] = "lots"
        world.client.hset(f"dh:rd:{source.id}", b"0:10", orjson.dumps(head) + b"\n" + b'{"i":1}\n')
        return
    if world.name == "postgres":
        world.conn.execute('UPDATE dh.records SET codec = %s, raw = %s WHERE source_id = %s'
                           ' AND "offset" = 10', [codec, raw, source.id])
    else:
        head = [codec] + [None] * (len(RECORD_COLUMNS) - 5)
        world.client.hset(f"dh:rd:{source.id}", b"0:10", orjson.dumps(head) + b"\n" + raw)


def damage_event(world, sid: str) -> None:
    """An event of sid whose details are no JSON object (PostgreSQL), that is no JSON (Redis)."""
    world.append_events([Event(sid, 1, "2026-12-01T00:00:00Z", 1, "run", None, {})])
    if world.name == "postgres":
        world.conn.execute("UPDATE dh.events SET details = '[1, 2' WHERE session_id = %s", [sid])
    else:
        world.client.hset(f"dh:events:{sid}", "1", b"[not json")


# PostgreSQL's schema refuses these: its columns are typed
REDIS_ONLY = ("types", "session row", "source row")


def damaged_world(remote) -> dict[str, str]:
    """Sessions in creation order, the damaged ones between good ones; id -> what is wrong."""
    made = {}
    for n, how in enumerate(["good", "codec", "packed", "types", "garbage tree", "forged tree", "event",
                             "session row", "source row", "good"]):
        if how in REDIS_ONLY and remote.name != "redis":
            continue
        sid = f"1sess{n}{how[0]}aaaaaaa"
        source = a_session(remote, sid, f"2026-01-{n + 1:02d}T00:00:00.000Z")
        if how in ("codec", "packed", "types"):
            damage_row(remote, source, how)
        if how == "event":
            damage_event(remote, sid)
        if how == "session row":
            remote.client.hset("dh:sessions", sid, b'["%s", 7]' % sid.encode())
        if how == "source row":
            remote.client.hset(f"dh:sources:{sid}", source.relpath, b"{}")
        root, extra = good_tree()
        if how == "garbage tree":
            root, extra = garbage_tree(), []
        elif how == "forged tree":
            root, extra = forged_tree(), []
        a_snapshot(remote, sid, root, extra)
        made[sid] = how
    return made


def test_a_damaged_row_or_tree_stops_only_its_session(tmp_path, team: Team, monkeypatch):
    remote = team.open()
    try:
        made = damaged_world(remote)
    finally:
        remote.close()
    monkeypatch.setenv("DH_HOME", str(tmp_path / "other-machine"))
    done = dh("world", "pull", team.name, "--url", team.url)
    assert done.returncode == 7, (done.returncode, done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    damaged = [sid for sid, how in made.items() if how != "good"]
    for sid in damaged:  # one line each, naming the session
        said = [line for line in lines if sid in line]
        assert len(said) == 1 and "not pulled" in said[0], (sid, lines)
    assert lines[-1].startswith("Error: ") and f"{len(damaged)} of {len(made)}" in lines[-1], lines
    assert len(lines) == len(damaged) + 1, lines
    local = LocalWorld()
    for sid, how in made.items():
        if how == "good":  # whole: every record, its snapshot and the file it reaches
            assert local.record_count(sid) == LINES
            snaps = store_for(local).snapshots(sid)
            assert [s.seq for s in snaps] == [1]
        else:  # nothing of it: never half a session that looks whole
            with pytest.raises(Exception):
                local.get_session(sid)
    # the reasons say what was wrong
    text = "\n".join(lines)
    assert "codec 99" in text and "0:10" in text
    assert "tree" in text and "event" in text
    # and the world's listing still shows every session, the damaged ones too
    listed = dh("world", "status", team.name, "--url", team.url, "--json")
    assert listed.returncode == 0, listed.stderr
    assert {row["session_id"] for row in json.loads(listed.stdout)} == set(made)


def test_pull_of_one_damaged_session_raises(tmp_path, team: Team, monkeypatch):
    """`dh resume --world` and the worker pull one session: damage refuses it, one error,
    and leaves nothing of it here."""
    remote = team.open()
    try:
        sid = next(s for s, how in damaged_world(remote).items() if how == "packed")
        monkeypatch.setenv("DH_HOME", str(tmp_path / "other-machine"))
        from dh_cli.errors import DhError

        with pytest.raises(DhError, match=sid):
            pull(remote, LocalWorld(), [sid])
    finally:
        remote.close()
    with pytest.raises(Exception):
        LocalWorld().get_session(sid)


def set_row(world, source: Source, offset: int, codec: int, raw: bytes) -> None:
    """The world's record of `source` at `offset` replaced by these stored bytes."""
    if world.name == "postgres":
        world.conn.execute('UPDATE dh.records SET codec = %s, raw = %s WHERE source_id = %s'
                           ' AND "offset" = %s', [codec, raw, source.id, offset])
    else:
        head = [codec] + [None] * (len(RECORD_COLUMNS) - 5)
        world.client.hset(f"dh:rd:{source.id}", b"0:%d" % offset, orjson.dumps(head) + b"\n" + raw)


def test_a_session_already_here_keeps_what_it_had(tmp_path, team: Team, monkeypatch):
    """Sessions pulled before, whose world copy was damaged since: where the two copies are
    compared (the last record this log holds), or in a copy that diverged (stored here as a
    generation of its own, every row checked as any pulled row is). Each is named, keeps
    the records it had, and the session after them is pulled."""
    remote = team.open()
    try:
        compared = a_session(remote, "1sessAcompared", "2026-01-01T00:00:00.000Z")
        forked = a_session(remote, "1sessBdiverged", "2026-01-02T00:00:00.000Z")
        monkeypatch.setenv("DH_HOME", str(tmp_path / "other-machine"))
        assert pull(remote, LocalWorld()).records == 2 * LINES
        set_row(remote, compared, (LINES - 1) * 10, 99, b'{"i":3}\n')
        set_row(remote, forked, (LINES - 1) * 10, 0, b'{"i":"went on elsewhere"}\n')
        set_row(remote, forked, 10, 99, b'{"i":1}\n')
        a_session(remote, "1sessClater", "2026-01-03T00:00:00.000Z")
    finally:
        remote.close()
    done = dh("world", "pull", team.name, "--url", team.url)
    assert done.returncode == 7, (done.returncode, done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert [line for line in lines if "1sessAcompared" in line and "0:30" in line and "codec 99" in line]
    assert [line for line in lines if "1sessBdiverged" in line and "0:10" in line and "codec 99" in line]
    assert len(lines) == 3 and "Traceback" not in done.stderr, lines
    local = LocalWorld()
    assert [local.record_count(sid) for sid in ("1sessAcompared", "1sessBdiverged", "1sessClater")] \
        == [LINES, LINES, LINES]
    shown = dh("log", "show", "1sessBdiverged")
    assert shown.returncode == 0, shown.stderr
