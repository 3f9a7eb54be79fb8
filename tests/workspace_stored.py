"""Everything a log or a world holds, as searchable bytes: the files of the log as they are
on disk, and every stored object and record decoded (a deflated or LZ4 copy of a file would
hide it from a plain grep of the database), and for a team world every row it holds: for
PostgreSQL every row of every table of the `dh` schema as text (bytea shows as hex, so a
search looks for both forms), for Redis every value of every `dh:` key."""

from __future__ import annotations

from pathlib import Path

from dh_cli.workspace.objects import decode
from dh_cli.worlds.local import STORED_RAW, decode_raw


def log_bytes(world) -> list[bytes]:
    """The local log: its files, its objects and its records, decoded."""
    files = Path(world.path).parent.glob(Path(world.path).name + "*")
    out = [p.read_bytes() for p in files if p.is_file()]  # not the shared mirror's socket
    out += [decode(bytes(d), c) for d, c in world.conn.execute("SELECT data, codec FROM ws_objects")]
    out += [decode_raw(r, c) for r, c in world.conn.execute(f"SELECT {STORED_RAW}, codec FROM records")]
    return out


def world_bytes(remote) -> list[bytes]:
    """A team world's rows, objects and records decoded, as its test server reads them
    (tests/helpers/team_worlds.py)."""
    from tests.helpers.team_worlds import server_of

    return server_of(remote.name).stored_bytes(remote)


def postgres_bytes(remote) -> list[bytes]:
    """A PostgreSQL world: every row of every table of the `dh` schema as text, and every
    workspace object and record decoded."""
    tables = remote._rows("SELECT table_name FROM information_schema.tables WHERE table_schema = 'dh'")
    out = [str(row[0]).encode() for (name,) in tables
           for row in remote._rows(f'SELECT t::text FROM dh."{name}" t')]
    out += [decode(bytes(d), c) for d, c in remote._rows("SELECT data, codec FROM dh.ws_objects")]
    out += [decode_raw(bytes(r), c) for r, c in remote._rows("SELECT raw, codec FROM dh.records")]
    return out


def holds(chunks: list[bytes], needle: bytes) -> bool:
    hexed = needle.hex().encode()
    return any(needle in c or hexed in c for c in chunks)


def redis_world_bytes(remote) -> list[bytes]:
    return redis_bytes(remote.client)


def redis_bytes(client) -> list[bytes]:
    """A Redis world: every key and value under `dh:` as stored, and every workspace object
    (`dh:ws_objects`) and record (`dh:rd:<source>`) decoded from its codec."""
    out = []
    for key in client.scan_iter(match=b"dh:*", count=1000):
        values = _redis_values(client, key)
        out += [key, *values]
        if key == b"dh:ws_objects":
            out += [_decoded(v, lambda head, data: decode(data, head[2])) for v in client.hvals(key)]
        elif key.startswith(b"dh:rd:"):
            out += [_decoded(v, lambda head, raw: decode_raw(raw, head[0])) for v in client.hvals(key)]
    return out


def _redis_values(client, key: bytes) -> list[bytes]:
    kind = client.type(key)
    if kind == b"hash":
        return [x for pair in client.hgetall(key).items() for x in pair]
    if kind == b"zset":
        return client.zrange(key, 0, -1)
    if kind == b"string":
        return [client.get(key)]
    if kind == b"set":
        return list(client.smembers(key))
    if kind == b"list":
        return client.lrange(key, 0, -1)
    return []


def _decoded(value: bytes, decoder) -> bytes:
    """A `head\ndata` value (head a JSON list) decoded by decoder(head, data)."""
    import orjson

    head, data = value.split(b"\n", 1)
    return decoder(orjson.loads(head), data)
