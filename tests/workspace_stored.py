"""Everything a log or a world holds, as searchable bytes: the files of the log as they are
on disk, and every stored object and record decoded (a deflated or LZ4 copy of a file would
hide it from a plain grep of the database), and for PostgreSQL every row of every table of
the `dh` schema as text (bytea shows as hex, so a search looks for both forms)."""

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
    """A PostgreSQL world: every row of the dh schema as text, objects and records decoded."""
    tables = remote._rows("SELECT table_name FROM information_schema.tables WHERE table_schema = 'dh'")
    out = [str(row[0]).encode() for (name,) in tables
           for row in remote._rows(f'SELECT t::text FROM dh."{name}" t')]
    out += [decode(bytes(d), c) for d, c in remote._rows("SELECT data, codec FROM dh.ws_objects")]
    out += [decode_raw(bytes(r), c) for r, c in remote._rows("SELECT raw, codec FROM dh.records")]
    return out


def holds(chunks: list[bytes], needle: bytes) -> bool:
    hexed = needle.hex().encode()
    return any(needle in c or hexed in c for c in chunks)
