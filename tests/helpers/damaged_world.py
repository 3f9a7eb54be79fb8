"""A team world with damaged rows in it, written straight to the real server as a hostile or
broken team member could: record rows with a codec no dh knows, packed bytes that do not
decode, columns of the wrong types (Redis), workspace trees that are no trees, events that
are no JSON, session and source rows that are no rows dh wrote (Redis)."""

from __future__ import annotations

import orjson

from dh_cli.models import Event, Record, Session, Source
from dh_cli.workspace.objects import BLOB, FILE, TREE, TreeEntry, blob_hash, tree_bytes, tree_hash
from dh_cli.workspace.store import Snapshot
from dh_cli.worlds.rows import RECORD_COLUMNS, stored_rows

LINES = 4
FILE_BYTES = b"print('kept')\n"


def a_session(world, sid: str, created: str, relpath: str | None = None) -> Source:
    """A pi session of LINES records, written to the world as a team member's push would
    (its one source at `relpath`, or named after it)."""
    world.put_session(Session(id=sid, harness="pi", state="exited", created_at=created, updated_at=created))
    source = world.put_source(Source(0, sid, "jsonl", relpath or f"sessions/{sid}.jsonl"))
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


def set_row(world, source: Source, offset: int, codec: int, raw: bytes) -> None:
    """The world's record of `source` at `offset` replaced by these stored bytes."""
    if world.name == "postgres":
        world.conn.execute('UPDATE dh.records SET codec = %s, raw = %s WHERE source_id = %s'
                           ' AND "offset" = %s', [codec, raw, source.id, offset])
    else:
        head = [codec] + [None] * (len(RECORD_COLUMNS) - 5)
        world.client.hset(f"dh:rd:{source.id}", b"0:%d" % offset, orjson.dumps(head) + b"\n" + raw)
