"""The log database itself: private, migrated, and a clear one-line error when it is corrupt,
locked, read-only or newer than this dh."""

import os
import sqlite3
from pathlib import Path

import pytest
from sqlite_utils import Database

from dh_cli.worlds.local import LocalWorld
from dh_cli.worlds import migrations
from .rig import dh


def test_db_is_created_private_with_wal(dh_home):
    world = LocalWorld()
    assert (os.stat(world.path).st_mode & 0o777) == 0o600
    assert (os.stat(dh_home).st_mode & 0o777) == 0o700
    assert world.conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_update_session_returns_the_session_as_updated(dh_home):
    world = LocalWorld()
    session = world.create_session("pi", home="/h", cwd="/a")
    updated = world.update_session(session.id, cwd="/b", attempts=2)
    assert (updated.cwd, updated.attempts, updated.home) == ("/b", 2, "/h")
    assert updated == world.get_session(session.id)


def test_blank_schema_has_the_expected_tables():
    db = Database(memory=True)
    migrations.migration_set().apply(db)
    assert {"sessions", "sources", "records", "events"} <= set(db.table_names())
    assert "raw" in db["records"].columns_dict
    assert any(i.unique and i.columns == ["source_id", "generation", "offset"] for i in db["records"].indexes)


def test_opening_an_older_schema_migrates_it_and_keeps_rows(dh_home):
    dh_home.mkdir(parents=True)
    db = Database(dh_home / "dh.db")
    migrations.migration_set().apply(db, stop_before="m003_records")
    db["sessions"].insert({"id": "old1", "harness": "pi", "state": "imported",
                           "created_at": "2026-01-01", "updated_at": "2026-01-01"})
    db.conn.close()
    world = LocalWorld()
    assert world.get_session("old1").harness == "pi"
    assert not migrations.pending(world.conn)


def test_corrupt_db_is_one_error_line(dh_home):
    dh_home.mkdir(parents=True)
    (dh_home / "dh.db").write_bytes(b"this is not a database" * 100)
    result = dh("log", "list")
    assert result.returncode == 3
    assert result.stderr.startswith("Error: the log ") and "corrupt" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr


def test_locked_db_is_one_error_line(dh_home, tmp_path):
    from .conftest import fixture_home

    home = fixture_home("pi", "basic", tmp_path)
    LocalWorld().close()
    holder = sqlite3.connect(dh_home / "dh.db", isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        result = dh("import", "pi", "--all", "--home", str(home), env={"DH_DB_TIMEOUT": "0.2"})
    finally:
        holder.execute("ROLLBACK")
    assert result.returncode == 3
    assert "locked by another process" in result.stderr and "Traceback" not in result.stderr


def test_newer_schema_is_refused(dh_home):
    world = LocalWorld()
    world.db["_sqlite_migrations"].insert({"migration_set": "dh", "name": "m999_future",
                                           "applied_at": "2030-01-01"})
    world.close()
    result = dh("log", "list")
    assert result.returncode == 3 and "newer dh" in result.stderr


# A read-only log (exit 3 on a write, reads still work) is tested as uid 65534 in
# test_bad_input.py::test_read_only_log_can_be_read_but_not_written: root writes any file.


# The migrations shipped so far, in the order every log applied them. A log records the names
# it has (_sqlite_migrations), so renaming, reordering or dropping one re-runs or skips it on
# every existing log; a new migration is appended after these.
SHIPPED = ["m001_sessions", "m002_sources", "m003_records", "m004_events",
           "m005_records_kind_index", "m006_codecs", "m007_queryable_records",
           "m008_status_and_model", "m009_search", "m010_views", "m013_places",
           "m025_workspace_objects", "m026_workspace_snapshots", "m035_token_kinds_and_tool_text",
           "m036_unpacked_records", "m037_views", "m040_places_argv", "m041_session_worlds",
           "m042_record_prices", "m043_model_call_prices", "m044_price_table",
           "m045_session_digests", "m048_forks"]
SHIPPED_SCHEMA = Path(__file__).parent / "fixtures" / "log_schema.sql"


def _schema_after(fns) -> str:
    """Every table, index, view and trigger the migrations make, as SQLite keeps their SQL."""
    from sqlite_utils import Migrations

    applied, db = Migrations(migrations.SET_NAME), Database(memory=True)
    for fn in fns:
        applied()(fn)
    applied.apply(db)
    rows = db.conn.execute("SELECT sql FROM sqlite_master WHERE sql IS NOT NULL"
                           " AND name != '_sqlite_migrations' ORDER BY type, name")
    return "".join(f"{sql};\n\n" for (sql,) in rows)


def test_the_shipped_migrations_keep_their_names_order_and_schema():
    assert migrations.names()[:len(SHIPPED)] == SHIPPED
    shipped = migrations.MIGRATIONS[:len(SHIPPED)]
    assert _schema_after(shipped) == SHIPPED_SCHEMA.read_text()
