"""The local log's schema, as named migrations. Shipped migrations are never edited: a change
is a new function appended at the end with the next number."""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sqlite_utils import Database, Migrations

# Importing sqlite_utils takes longer than the rest of dh's start-up, and a log that is up to
# date needs none of it: the applied names are read with plain SQL, and sqlite_utils'
# `Migrations` is built only when one is pending.
MIGRATIONS: list = []
SET_NAME = "dh"


def migration(fn):
    MIGRATIONS.append(fn)
    return fn


@migration
def m001_sessions(db: Database) -> None:
    # One row per logical session under dh, across every relaunch of the harness.
    db["sessions"].create(
        {
            "id": str, "harness": str, "harness_session_id": str, "harness_version": str,
            "cwd": str, "home": str, "native_path": str, "project_key": str, "argv": str,
            "host": str, "state": str, "attempts": int, "created_at": str, "updated_at": str,
        },
        pk="id",
        not_null={"harness", "state", "created_at", "updated_at"},
        defaults={"state": "new", "attempts": 0},
    )
    db["sessions"].create_index(["harness", "harness_session_id"])


@migration
def m002_sources(db: Database) -> None:
    # A native file (or store) tracked for a session. `offset` is what is committed: every
    # complete record before it is in `records`; bytes after it are re-read next time.
    db["sources"].create(
        {
            "id": int, "session_id": str, "kind": str, "relpath": str, "path": str,
            "generation": int, "offset": int, "size": int, "inode": int, "head_hash": str,
            "tail_hash": str, "pending": int, "status": str, "updated_at": str,
        },
        pk="id",
        foreign_keys=[("session_id", "sessions", "id")],
        not_null={"session_id", "kind", "relpath"},
        defaults={"generation": 0, "offset": 0, "pending": 0, "status": "live"},
    )
    db["sources"].create_index(["session_id", "relpath"], unique=True)


@migration
def m003_records(db: Database) -> None:
    # Native records byte-exact in `raw` (deflated when `codec` is 1: large JSON lines shrink
    # 2-3x, which keeps the log smaller than the native files), plus columns extracted for
    # queries; `ts` is epoch milliseconds. The natural key (source, generation, offset) makes
    # every append idempotent.
    db["records"].create(
        {
            "id": int, "source_id": int, "generation": int, "offset": int, "raw": bytes,
            "codec": int, "kind": str, "native_id": str, "parent_id": str, "role": str,
            "tool_name": str, "tool_call_id": str, "model": str, "msg_id": str, "tokens_in": int,
            "tokens_out": int, "tokens_cache_read": int, "tokens_cache_write": int,
            "ts": int, "flags": str,
        },
        pk="id",
        not_null={"source_id", "generation", "offset", "raw"},
    )
    db["records"].create_index(["source_id", "generation", "offset"], unique=True)


@migration
def m004_events(db: Database) -> None:
    # dh's own journal: an intent before each action, an outcome after.
    db["events"].create(
        {
            "session_id": str, "seq": int, "at": str, "attempt": int, "type": str,
            "phase": str, "details": str,
        },
        pk=("session_id", "seq"),
        not_null={"type", "at"},
    )


@migration
def m005_records_kind_index(db: Database) -> None:
    # `raw` comes before the extracted columns, so for a long line SQLite walks its overflow
    # pages to reach `kind`: counting a session's tool results or finding its last prompt read
    # the whole session (66 ms for 100 MB, paid on every relaunch). This index answers both.
    db["records"].create_index(["source_id", "generation", "kind", "offset"],
                               index_name="records_by_kind")


@migration
def m006_codecs(db: Database) -> None:
    # Long lines are stored LZ4-compressed from here on (codec 2; see worlds/local.py). The
    # table names each codec a record may carry, and a dh older than this migration refuses
    # the log ("written by a newer dh") instead of handing back compressed bytes as native.
    db["codecs"].insert_all([
        {"id": 0, "name": "stored as written"},
        {"id": 1, "name": "raw deflate, 4 KiB window"},
        {"id": 2, "name": "LZ4 block, uncompressed size first"},
    ], pk="id")


@migration
def m025_workspace_objects(db: Database) -> None:
    # Workspace snapshots (dh_cli/workspace/): content-addressed blobs and per-folder trees,
    # named by their sha256, so a file shared by a hundred snapshots is stored once.
    db.execute("CREATE TABLE ws_objects (hash TEXT PRIMARY KEY, kind TEXT NOT NULL,"
               " size INTEGER NOT NULL, codec INTEGER NOT NULL, data BLOB NOT NULL) WITHOUT ROWID")


@migration
def m026_workspace_snapshots(db: Database) -> None:
    # One row per snapshot of a session's cwd: after a tool call that may write, at a turn's
    # end. `root` names the top tree in ws_objects; seq orders a session's snapshots.
    db.execute("CREATE TABLE ws_snapshots (session_id TEXT NOT NULL REFERENCES sessions (id),"
               " seq INTEGER NOT NULL, at TEXT NOT NULL, turn INTEGER, step TEXT,"
               " reason TEXT NOT NULL, root TEXT NOT NULL, head TEXT, branch TEXT,"
               " files INTEGER, bytes INTEGER, skipped INTEGER, PRIMARY KEY (session_id, seq))")


def names() -> list[str]:
    return [fn.__name__ for fn in MIGRATIONS]


def migration_set() -> Migrations:
    """The migrations as sqlite_utils' `Migrations`, which applies them."""
    from sqlite_utils import Migrations

    built = Migrations(SET_NAME)
    for fn in MIGRATIONS:
        built()(fn)
    return built


def applied(conn: sqlite3.Connection) -> list[str]:
    """Names of the migrations this database has, in the order they were applied."""
    if not conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table'"
                        " AND name = '_sqlite_migrations'").fetchone():
        return []
    return [row[0] for row in conn.execute(
        "SELECT name FROM _sqlite_migrations WHERE migration_set = ? ORDER BY rowid", [SET_NAME])]


def pending(conn: sqlite3.Connection) -> list[str]:
    done = set(applied(conn))
    return [name for name in names() if name not in done]
