"""What was kept at a kill: which of the script's replies had reached the harness's own state
(or, once the harness home is lost, dh's log), and which the model server had delivered.

A reply the server delivered but that never reached the harness's state was lost inside the
harness (it died between reading the answer and writing it down): asking for it again is the
only way on, and is not dh paying twice. A reply that had reached the state must never be
asked for again. A reply is known by its last part: its tool call's id (`toolu_00N` on the
Anthropic API, `call_00N` on OpenAI's, as the fake model server names them), or the final
text."""

from __future__ import annotations

import shutil
import sqlite3
import tempfile
from dataclasses import dataclass
from pathlib import Path

from tests.helpers.harness_home import lose_the_home as lose_home

REPLIES = 9
FINAL_TEXT = "All done."

# where each harness keeps its sessions, relative to the rig's HOME
SESSION_GLOBS = {"claude-code": [".claude/projects/**/*.jsonl"],
                 "codex": [".codex/sessions/**/*.jsonl"],
                 "pi": ["pi-agent/sessions/**/*.jsonl"]}
OPENCODE_DB = ".local/share/opencode/opencode.db"
# what the harness keeps, relative to HOME, and the config files in it the rig wrote
CONFIG = {"codex": [".codex/config.toml"], "pi": ["pi-agent/models.json"],
          "claude-code": [".claude/.claude.json", ".claude/settings.json"]}  # the TUI's seed


def markers(index: int) -> tuple[bytes, ...]:
    if index == REPLIES - 1:
        return (FINAL_TEXT.encode(),)
    return (f"toolu_{index:03d}".encode(), f"call_{index:03d}".encode())


@dataclass
class Snapshot:
    kept: set[int]  # reply indexes whose answer was in the state
    delivered: dict[int, int]  # reply index -> completed deliveries so far
    in_flight: set[int]  # replies asked for and still being answered when the kill came

    def lost(self) -> set[int]:
        """Delivered, yet not in the state: the harness (or the lost home) dropped it; or
        still on its way, to a harness that was gone (the server may finish writing a reply
        into a dead connection's socket buffer, and count it delivered)."""
        return {i for i, n in self.delivered.items() if n and i not in self.kept} | \
            (self.in_flight - self.kept)


def in_flight(server) -> set[int]:
    log = server.log
    ended = {e["seq"] for e in log if e["event"] != "request"}
    return {e["reply_index"] for e in log if e["event"] == "request" and e["kind"] == "main"
            and e["reply_index"] is not None and e["seq"] not in ended}


def _kept_in(data: bytes, harness: str) -> set[int]:
    kept = {i for i in range(REPLIES) if any(m in data for m in markers(i))}
    if harness == "codex" and not _received_whole(data):
        kept.discard(REPLIES - 1)
    return kept


def _received_whole(data: bytes) -> bool:
    """Codex writes each item of a response as it arrives and the response's usage
    (`token_count`) once its last frame has come. The server counts a reply delivered just
    before it sends that frame, so a kill in between finds the final text written and the
    response still on its way (seen once in 60 pinned cases under a load of 7: the answer
    at .307 s, no usage 1.5 s later at the kill): Codex never had it whole."""
    at = data.find(FINAL_TEXT.encode())
    return at >= 0 and b'"token_count"' in data[at:]


def native(rig, harness: str, server) -> Snapshot:
    delivered, flying = server.completed_counts(), in_flight(server)
    return Snapshot(_kept_in(native_bytes(rig.tmp, harness), harness), delivered, flying)


def native_bytes(home: Path, harness: str) -> bytes:
    if harness == "opencode":
        return _opencode_bytes(home / OPENCODE_DB)
    return b"".join(p.read_bytes() for g in SESSION_GLOBS[harness] for p in sorted(home.glob(g)))


def _opencode_bytes(db: Path) -> bytes:
    """The committed rows only: a copy of the database and its WAL opened by SQLite, which
    leaves out frames a killed writer had not committed."""
    if not db.exists():
        return b""
    with tempfile.TemporaryDirectory() as tmp:
        for suffix in ("", "-wal"):
            if Path(f"{db}{suffix}").exists():
                shutil.copy(f"{db}{suffix}", Path(tmp) / f"opencode.db{suffix}")
        conn = sqlite3.connect(Path(tmp) / "opencode.db")
        try:
            # a kill in OpenCode's first second finds its database made and not yet migrated
            # (seen: 1.4 s in, "no such table: message"): it holds no reply yet
            made = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            rows = [r[0] for table in ("message", "part") if table in made
                    for r in conn.execute(f"SELECT data FROM {table}")]  # noqa: S608 - fixed names
        finally:
            conn.close()
    return "\n".join(str(r) for r in rows).encode()


def logged(rig, harness: str, server) -> Snapshot:
    """After the home is lost, dh's log is all there is."""
    world = rig.world()
    try:
        data = b"".join(r.raw or b"" for s in world.list_sessions() for r in world.records(s["id"]))
    finally:
        world.close()
    return Snapshot(_kept_in(data, harness), server.completed_counts(), in_flight(server))


def lose_the_home(rig, harness: str) -> None:
    """Everything the harness keeps is deleted, but for the config files the rig wrote."""
    lose_home(rig.tmp, harness, CONFIG.get(harness, []))