"""Where snapshots live: the `ws_objects` and `ws_snapshots` tables of a world (the local log,
migrations m025/m026; a team world, through its ws_* calls). One small class per kind of world, with the
same methods, so the snapshotter, restore and sync never care which one they hold."""

from __future__ import annotations

import zlib
from dataclasses import asdict, dataclass, fields

from ..errors import NativeStateError
from .objects import BadObject, decode, verified

SNAPSHOT_COLUMNS = ["session_id", "seq", "at", "turn", "step", "reason", "root", "head",
                    "branch", "files", "bytes", "skipped"]


@dataclass
class Snapshot:
    session_id: str
    seq: int
    at: str
    turn: int | None  # the turn (1-based prompt count) the step belongs to
    step: str | None  # the tool call id whose result ended the step; None at a turn end
    reason: str  # tool | turn_end | attempt_end
    root: str  # hash of the top tree
    head: str | None = None  # git HEAD commit, when the cwd is a git work tree
    branch: str | None = None
    files: int = 0
    bytes: int = 0  # total size of the files listed
    skipped: int = 0  # files listed whose content is not stored (secret or large)

    def row(self) -> tuple:
        return tuple(getattr(self, c) for c in SNAPSHOT_COLUMNS)

    def to_dict(self) -> dict:
        return asdict(self)


class MissingObject(NativeStateError):
    pass


class DamagedObject(NativeStateError):
    hint = "the snapshot is damaged or was not written by dh: restore another one"


def checked_object(digest: str, kind: str, codec: int, data: bytes) -> bytes:
    """The decoded object, its hash checked (every read, every pull)."""
    try:
        return verified(digest, kind, decode(bytes(data), codec))
    except (BadObject, zlib.error) as exc:
        raise DamagedObject(f"refusing the workspace object {digest[:12]}: {exc}") from None


def store_for(world):
    """The workspace store of `world`: a team world's (it has ws_* calls), else the log's."""
    if hasattr(world, "ws_known"):
        return WorldStore(world)
    return SqliteStore(world)


class SqliteStore:
    def __init__(self, world):
        self.world = world

    def known(self, hashes: list[str]) -> set[str]:
        out: set[str] = set()
        for i in range(0, len(hashes), 500):
            part = hashes[i:i + 500]
            out.update(r[0] for r in self.world.conn.execute(
                f"SELECT hash FROM ws_objects WHERE hash IN ({','.join('?' * len(part))})", part))
        return out

    def put(self, objects: list[tuple], snapshots: list[Snapshot]) -> int:
        """Objects (hash, kind, size, codec, data) and snapshot rows, in one transaction."""
        with self.world._write() as conn:
            added = conn.executemany("INSERT OR IGNORE INTO ws_objects (hash, kind, size, codec,"
                                     " data) VALUES (?, ?, ?, ?, ?)", objects).rowcount
            conn.executemany(f"INSERT OR IGNORE INTO ws_snapshots ({', '.join(SNAPSHOT_COLUMNS)})"
                             f" VALUES ({', '.join('?' * len(SNAPSHOT_COLUMNS))})",
                             [s.row() for s in snapshots])
        return max(added, 0)

    def next_seq(self, session_id: str) -> int:
        row = self.world.conn.execute("SELECT max(seq) FROM ws_snapshots WHERE session_id = ?",
                                      [session_id]).fetchone()
        return (row[0] or 0) + 1

    def last(self, session_id: str) -> tuple | None:
        row = self.world.conn.execute("SELECT root, head FROM ws_snapshots WHERE session_id = ?"
                                      " ORDER BY seq DESC LIMIT 1", [session_id]).fetchone()
        return tuple(row) if row else None

    def snapshots(self, session_id: str, after_seq: int = 0) -> list[Snapshot]:
        rows = self.world.conn.execute(
            f"SELECT {', '.join(SNAPSHOT_COLUMNS)} FROM ws_snapshots WHERE session_id = ?"
            " AND seq > ? ORDER BY seq", [session_id, after_seq]).fetchall()
        return [Snapshot(*r) for r in rows]

    def rows(self, hashes: list[str]) -> list[tuple]:
        out = []
        for i in range(0, len(hashes), 500):
            part = hashes[i:i + 500]
            out += self.world.conn.execute(
                "SELECT hash, kind, size, codec, data FROM ws_objects WHERE hash IN"
                f" ({','.join('?' * len(part))})", part).fetchall()
        return out

    def get(self, digest: str) -> bytes:
        row = self.world.conn.execute("SELECT kind, codec, data FROM ws_objects WHERE hash = ?",
                                      [digest]).fetchone()
        if row is None:
            raise MissingObject(f"the workspace object {digest[:12]} is not in the log",
                                hint="pull the session again: dh world pull postgres SESSION")
        return checked_object(digest, *row)


class WorldStore:
    """The store of a team world: its rows through the world's ws_* calls (TeamWorld)."""

    def __init__(self, world):
        self.world = world

    def known(self, hashes: list[str]) -> set[str]:
        return self.world.ws_known(hashes)

    def put(self, objects: list[tuple], snapshots: list[Snapshot]) -> int:
        return self.world.ws_put(objects, [s.row() for s in snapshots])

    def snapshots(self, session_id: str, after_seq: int = 0) -> list[Snapshot]:
        return [Snapshot(*r) for r in self.world.ws_snapshot_rows(session_id, after_seq)]

    def rows(self, hashes: list[str]) -> list[tuple]:
        return self.world.ws_object_rows(hashes)

    def get(self, digest: str) -> bytes:
        rows = self.rows([digest])
        if not rows:
            raise MissingObject(f"the workspace object {digest[:12]} is not in the world")
        return checked_object(digest, rows[0][1], rows[0][3], rows[0][4])


assert [f.name for f in fields(Snapshot)] == SNAPSHOT_COLUMNS
