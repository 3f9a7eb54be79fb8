"""The local log's schema, as named migrations: ONE ordered list of them, applied in this
order and recorded by name in every log. Shipped migrations are never edited: a change is a new
function appended at the end with the next number (in the newest era's module, or a new one).
The bodies live by era in migrations_first.py, migrations_places.py and migrations_worlds.py;
tests/test_db.py holds the shipped names and the schema they make."""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING

from . import migrations_first
from . import migrations_places
from . import migrations_worlds

if TYPE_CHECKING:
    from sqlite_utils import Migrations

# Importing sqlite_utils takes longer than the rest of dh's start-up, and a log that is up to
# date needs none of it: the applied names are read with plain SQL, and sqlite_utils'
# `Migrations` is built only when one is pending.
MIGRATIONS: list = [
    migrations_first.m001_sessions,
    migrations_first.m002_sources,
    migrations_first.m003_records,
    migrations_first.m004_events,
    migrations_first.m005_records_kind_index,
    migrations_first.m006_codecs,
    migrations_first.m007_queryable_records,
    migrations_first.m008_status_and_model,
    migrations_first.m009_search,
    migrations_first.m010_views,
    migrations_places.m013_places,
    migrations_places.m025_workspace_objects,
    migrations_places.m026_workspace_snapshots,
    migrations_places.m035_token_kinds_and_tool_text,
    migrations_places.m036_unpacked_records,
    migrations_places.m037_views,
    migrations_worlds.m040_places_argv,
    migrations_worlds.m041_session_worlds,
    migrations_worlds.m042_record_prices,
    migrations_worlds.m043_model_call_prices,
    migrations_worlds.m044_price_table,
    migrations_worlds.m045_session_digests,
    migrations_worlds.m048_forks,
    migrations_worlds.m049_turn_starts,
    migrations_worlds.m050_digests_dropped_per_insert,
    migrations_worlds.m051_model_calls_read_no_bytes,
]
SET_NAME = "dh"


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
