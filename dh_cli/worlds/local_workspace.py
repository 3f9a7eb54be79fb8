"""The workspace snapshots in the local log (migrations m025/m026): content-addressed objects
in `ws_objects` and one row per snapshot in `ws_snapshots`. The same ws_* calls as a team
world's (team/protocol.py), plus what only the snapshotter of this machine asks (the next
seq, the last snapshot), so dh_cli/workspace/ reads and writes every world alike, without SQL."""

from __future__ import annotations

SNAPSHOT_COLUMNS = ["session_id", "seq", "at", "turn", "step", "reason", "root", "head",
                    "branch", "files", "bytes", "skipped"]
IN_CHUNK = 500  # hashes per `IN (...)`, well under SQLite's 32,766 variables


def _in(hashes: list[str]):
    """(part, "?,?,…") for each chunk of the hashes."""
    for i in range(0, len(hashes), IN_CHUNK):
        part = hashes[i:i + IN_CHUNK]
        yield part, ",".join("?" * len(part))


class LocalWorkspace:
    """Mixed into LocalWorld: needs self.conn and self._write()."""

    def ws_known(self, hashes: list[str]) -> set[str]:
        out: set[str] = set()
        for part, marks in _in(hashes):
            out.update(r[0] for r in self.conn.execute(
                f"SELECT hash FROM ws_objects WHERE hash IN ({marks})", part))
        return out

    def ws_put(self, objects: list[tuple], snapshots: list[tuple]) -> int:
        """Objects (hash, kind, size, codec, data) and snapshot rows (SNAPSHOT_COLUMNS), in one
        transaction; the number of objects that were new."""
        with self._write() as conn:
            added = conn.executemany("INSERT OR IGNORE INTO ws_objects (hash, kind, size, codec,"
                                     " data) VALUES (?, ?, ?, ?, ?)", objects).rowcount
            conn.executemany(f"INSERT OR IGNORE INTO ws_snapshots ({', '.join(SNAPSHOT_COLUMNS)})"
                             f" VALUES ({', '.join('?' * len(SNAPSHOT_COLUMNS))})", snapshots)
        return max(added, 0)

    def ws_snapshot_rows(self, session_id: str, after_seq: int = 0) -> list[tuple]:
        return self.conn.execute(
            f"SELECT {', '.join(SNAPSHOT_COLUMNS)} FROM ws_snapshots WHERE session_id = ?"
            " AND seq > ? ORDER BY seq", [session_id, after_seq]).fetchall()

    def ws_object_rows(self, hashes: list[str]) -> list[tuple]:
        out = []
        for part, marks in _in(hashes):
            out += self.conn.execute("SELECT hash, kind, size, codec, data FROM ws_objects"
                                     f" WHERE hash IN ({marks})", part).fetchall()
        return out

    def ws_next_seq(self, session_id: str) -> int:
        row = self.conn.execute("SELECT max(seq) FROM ws_snapshots WHERE session_id = ?",
                                [session_id]).fetchone()
        return (row[0] or 0) + 1

    def ws_last(self, session_id: str) -> tuple[str, str | None] | None:
        """(root, head) of the session's latest snapshot here."""
        row = self.conn.execute("SELECT root, head FROM ws_snapshots WHERE session_id = ?"
                                " ORDER BY seq DESC LIMIT 1", [session_id]).fetchone()
        return tuple(row) if row else None
