"""The two schemas agree: the local log's (dh_cli/worlds/migrations.py, SQLite) and the
PostgreSQL world's (dh_cli/worlds/postgres_schema.py), both migrated for real. A table both hold has
the same columns, of the same kind of type, under the same key; a push copies rows between
them column for column (team/sync.py), so a column one list adds and the other forgets is
lost on the way. Every difference that is meant is written down below with its reason.

(NOT NULL is not compared: a column SQLite added by ALTER TABLE cannot be NOT NULL without a
default, so the two lists had to differ there from the first ALTER.)"""

from __future__ import annotations

import psycopg
import pytest

from dh_cli.worlds.local import LocalWorld
from dh_cli.team.postgres import PostgresWorld
from dh_cli.worlds.rows import RECORD_COLUMNS, SESSION_COLUMNS, SOURCE_COLUMNS

from .pg import pg_url  # noqa: F401 (a fixture)

pytestmark = pytest.mark.postgres

# Tables only the local log has.
LOCAL_ONLY = {
    "_sqlite_migrations": "sqlite-utils' list of applied migrations (PostgreSQL's: dh.migrations)",
    "places": "where a session lives on THIS machine (local_places.py): never pushed",
    "mirrored_paths": "which file THIS machine's mirror read (local_places.py): never pushed",
    "session_worlds": "the world a session replicated to from THIS machine (returning.py)",
    "forks": "the session a session was forked from on THIS machine, for the list (resume/fork.py);"
             " the fork's `forked` event travels",
    "session_digests": "what `dh log list` keeps of each session, made from the local records",
    "record_text": "the FTS5 index of `dh log search`, built from the records on each machine",
    "price_table": "which price table THIS machine's records.price_usd came from (worlds/prices.py)",
    "attempts": "a view for `dh log schema` queries over the local log",
    "model_calls": "a view for `dh log schema` queries over the local log",
    "tool_calls": "a view for `dh log schema` queries over the local log",
    "turns": "a view for `dh log schema` queries over the local log",
}
FTS_SHADOW = ("_config", "_data", "_docsize", "_idx")  # SQLite's own tables behind record_text

# Tables only the PostgreSQL world has.
WORLD_ONLY = {
    "migrations": "the world's list of applied migrations (SQLite's: _sqlite_migrations)",
    "leases": "one holder of a session across machines (lease.py, tenure.py): a shared-world thing",
    "settings": "the world's own settings (whether a push masks the records it sends)",
    "takeovers": "every claim of a session by a worker (takeover.py's budget): a shared-world thing",
}

# Columns of a shared table that only one side has.
LOCAL_ONLY_COLUMNS = {
    ("records", "id"): "SQLite's rowid: the search index and the views name a record by it",
    ("records", "session_id"): "kept on each record so per-session queries need no join",
    ("records", "packed"): "a line SQLite's json_valid() refuses, as bytes; `raw` holds the JSON "
                           "text (so JSON functions never fail), the world keeps one bytea `raw`",
    ("records", "price_usd"): "a model call's price by THIS machine's price table (genai-prices), "
                              "filled as the record is written here, pulled or not",
}
WORLD_ONLY_COLUMNS: dict[tuple[str, str], str] = {}

# Columns whose type differs on purpose.
TYPE_DIFFERENCES = {
    ("records", "raw"): "TEXT in SQLite (a JSON line, with `packed` for other bytes), bytea in the world",
}

# Tables whose key differs on purpose, with how the other side keeps the same key unique.
KEY_DIFFERENCES = {
    "records": "SQLite's key is the rowid `id`; (source_id, generation, offset) is a UNIQUE index",
}

KIND = {"integer": "int", "bigint": "int", "smallint": "int", "text": "text", "bytea": "bytes",
        "double precision": "real", "real": "real", "boolean": "int",
        "INTEGER": "int", "TEXT": "text", "BLOB": "bytes", "REAL": "real", "FLOAT": "real"}


def local_schema(tmp_path) -> tuple[dict[str, dict[str, str]], dict[str, list[str]], object]:
    world = LocalWorld(tmp_path / "dh.db")
    tables, keys = {}, {}
    for (name,) in world.conn.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')"):
        info = world.conn.execute(f"PRAGMA table_info('{name}')").fetchall()
        tables[name] = {row[1]: KIND.get(row[2], row[2]) for row in info}
        keys[name] = [row[1] for row in sorted(info, key=lambda r: r[5]) if row[5]]
    return tables, keys, world


def world_schema(url: str) -> tuple[dict[str, dict[str, str]], dict[str, list[str]]]:
    PostgresWorld(url).close()  # migrates
    tables: dict[str, dict[str, str]] = {}
    keys: dict[str, list[str]] = {}
    with psycopg.connect(url) as conn:
        for table, column, type_ in conn.execute(
                "SELECT table_name, column_name, data_type FROM information_schema.columns"
                " WHERE table_schema = 'dh' ORDER BY table_name, ordinal_position"):
            tables.setdefault(table, {})[column] = KIND.get(type_, type_)
        for table, column in conn.execute(
                "SELECT c.relname, a.attname FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid"
                " JOIN pg_namespace n ON n.oid = c.relnamespace JOIN pg_attribute a"
                " ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey)"
                " WHERE n.nspname = 'dh' AND i.indisprimary ORDER BY c.relname, array_position(i.indkey, a.attnum)"):
            keys.setdefault(table, []).append(column)
    return tables, keys


@pytest.fixture
def schemas(tmp_path, pg_url):  # noqa: F811
    local, local_keys, world = local_schema(tmp_path)
    remote, remote_keys = world_schema(pg_url)
    yield local, local_keys, remote, remote_keys, world
    world.close()


def test_the_tables_are_the_same_but_for_the_written_down_ones(schemas):
    local, _, remote, _, _ = schemas
    shadow = {f"record_text{suffix}" for suffix in FTS_SHADOW}
    assert set(local) - set(remote) - shadow == set(LOCAL_ONLY), "a local table neither shared nor explained"
    assert set(remote) - set(local) == set(WORLD_ONLY), "a world table neither shared nor explained"


def test_shared_tables_have_the_same_columns_of_the_same_kind(schemas):
    local, _, remote, _, _ = schemas
    for table in sorted(set(local) & set(remote)):
        mine, theirs = local[table], remote[table]
        assert {(table, c) for c in set(mine) - set(theirs)} == \
            {k for k in LOCAL_ONLY_COLUMNS if k[0] == table}, f"{table}: a column only SQLite has"
        assert {(table, c) for c in set(theirs) - set(mine)} == \
            {k for k in WORLD_ONLY_COLUMNS if k[0] == table}, f"{table}: a column only PostgreSQL has"
        for column in sorted(set(mine) & set(theirs)):
            if (table, column) in TYPE_DIFFERENCES:
                assert mine[column] != theirs[column]  # else the note is stale: drop it
                continue
            assert mine[column] == theirs[column], f"{table}.{column}: {mine[column]} here, {theirs[column]} in the world"


def test_shared_tables_have_the_same_key(schemas):
    local, local_keys, remote, remote_keys, world = schemas
    for table in sorted(set(local) & set(remote)):
        if table in KEY_DIFFERENCES:
            continue
        assert local_keys[table] == remote_keys[table], table
    # the one difference: the world's key of records is a UNIQUE index in the local log
    unique = [row[1] for row in world.conn.execute("PRAGMA index_list('records')") if row[2]]
    covered = [[c[2] for c in world.conn.execute(f"PRAGMA index_info('{name}')")] for name in unique]
    assert remote_keys["records"] in covered, covered


def test_the_dataclasses_columns_are_in_both(schemas):
    local, _, remote, _, _ = schemas
    for table, columns in (("sessions", SESSION_COLUMNS), ("sources", SOURCE_COLUMNS),
                           ("records", RECORD_COLUMNS)):
        assert set(columns) <= set(local[table]), table
        assert set(columns) <= set(remote[table]), table
