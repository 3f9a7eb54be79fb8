"""Where snapshots live: the `ws_objects` and `ws_snapshots` of a world, through its ws_* calls
(the local log: worlds/local_workspace.py; a team world: team/protocol.py). One store for every
world, so the snapshotter, restore and sync never care which one they hold."""

from __future__ import annotations

import zlib
from dataclasses import asdict, dataclass, fields

from ..errors import NativeStateError
from ..worlds.local_workspace import SNAPSHOT_COLUMNS
from .objects import BadObject, decode, verified


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


def store_for(world) -> WorkspaceStore:
    return WorkspaceStore(world)


class WorkspaceStore:
    """A world's snapshots and objects as Snapshot rows and checked bytes. next_seq and last are
    the snapshotter's, which writes only to the local log (LocalWorld.ws_next_seq, ws_last)."""

    def __init__(self, world):
        self.world = world

    def known(self, hashes: list[str]) -> set[str]:
        return self.world.ws_known(hashes)

    def put(self, objects: list[tuple], snapshots: list[Snapshot]) -> int:
        """Objects (hash, kind, size, codec, data) and snapshot rows, in one transaction."""
        return self.world.ws_put(objects, [s.row() for s in snapshots])

    def next_seq(self, session_id: str) -> int:
        return self.world.ws_next_seq(session_id)

    def last(self, session_id: str) -> tuple | None:
        return self.world.ws_last(session_id)

    def snapshots(self, session_id: str, after_seq: int = 0) -> list[Snapshot]:
        return [Snapshot(*r) for r in self.world.ws_snapshot_rows(session_id, after_seq)]

    def rows(self, hashes: list[str]) -> list[tuple]:
        return self.world.ws_object_rows(hashes)

    def get(self, digest: str) -> bytes:
        rows = self.rows([digest])
        if not rows:
            raise MissingObject(f"the workspace object {digest[:12]} is not in the {self.world.name} world",
                                hint="copy the session again from where it is whole (dh world push or pull)")
        return checked_object(digest, rows[0][1], rows[0][3], rows[0][4])


assert [f.name for f in fields(Snapshot)] == SNAPSHOT_COLUMNS
