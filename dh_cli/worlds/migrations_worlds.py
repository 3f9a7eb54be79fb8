"""The log beside shared worlds and prices (m040 on): the local argv and world of a session,
each call's price and the table it came from, the list's digests and forks.
Shipped migrations: never edited (migrations.py holds their one ordered list)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .migrations_places import VIEWS_M037

if TYPE_CHECKING:
    from sqlite_utils import Database


def m040_places_argv(db: Database) -> None:
    # The args the user ran the session with on THIS machine: the only argv a resume here
    # replays as it is. A session's own `argv` column may come from a world (a pull
    # overwrites it), and a world must not choose the harness's flags (issue 30).
    db.execute("ALTER TABLE places ADD COLUMN argv TEXT")


def m041_session_worlds(db: Database) -> None:
    # The shared world a session replicated to from this machine, with its URL minus the
    # password: a plain `dh resume` of it asks that world first, so a machine that comes
    # back after a takeover never runs the turn again (issue 30). Local only, like places.
    db.execute("CREATE TABLE session_worlds (session_id TEXT PRIMARY KEY, world TEXT NOT NULL,"
               " url TEXT, at TEXT NOT NULL)")


def m042_record_prices(db: Database) -> None:
    # Each model call's price in USD beside its tokens, so that the log answers "what did it
    # cost" to plain sqlite3, sqlite-utils and datasette, which cannot run genai-prices: dh
    # prices a record as it writes it (rows.INSERT_RECORD calls dh_price(), pricing.py), and
    # here every call logged before. Local only, like the search index: each machine prices
    # the records it holds with its own price table.
    from ..pricing import register_price
    from .prices import PRICE_RECORDS

    register_price(db.conn)
    db.execute("ALTER TABLE records ADD COLUMN price_usd REAL")
    db.execute(PRICE_RECORDS)


def m043_model_call_prices(db: Database) -> None:
    # model_calls of m037 with each call's price (records.price_usd, NULL for a model the
    # price table does not know). `turns` reads model_calls by name and is left as it is.
    db.execute("DROP VIEW model_calls")
    db.execute(MODEL_CALLS_M043)


MODEL_CALLS_M043 = VIEWS_M037[0].replace(
    "AS tokens_prompt\n", "AS tokens_prompt,\n              u.price_usd\n", 1)


def m044_price_table(db: Database) -> None:
    # Which price table the log's prices came from (pricing.table_signature): when another is
    # installed, worlds/prices.py prices every call again, so that a query of the log reads
    # what `dh log cost` prints. m042 priced with the one installed now.
    from ..pricing import table_signature
    from .prices import mark_priced

    db.execute("CREATE TABLE price_table (signature TEXT)")
    mark_priced(db.conn, table_signature())


def m045_session_digests(db: Database) -> None:
    # What `dh log list` shows of a session that only its records decide (its title, its model
    # calls summed per model), kept so a list reads one row per session: reading the
    # model_calls view for every session was 0.7-0.9 s of a list of 10,001. A digest is
    # dropped by any change to its session's records or sources, and made again by the next
    # list (logviews/sessionlist.py); `rules` names the dh that made it.
    db.execute("CREATE TABLE session_digests (session_id TEXT PRIMARY KEY, rules TEXT NOT NULL,"
               " title TEXT NOT NULL, calls TEXT NOT NULL)")
    drop = "DELETE FROM session_digests WHERE session_id = {}.session_id;"
    for table, change, row in (("records", "INSERT", "NEW"), ("records", "UPDATE", "OLD"),
                               ("records", "DELETE", "OLD"), ("sources", "INSERT", "NEW"),
                               ("sources", "UPDATE", "OLD"), ("sources", "DELETE", "OLD")):
        also = drop.format("NEW") if row == "OLD" and change == "UPDATE" else ""
        db.execute(f"CREATE TRIGGER {table}_{change.lower()}_drops_digest AFTER {change} ON {table}"
                   f" BEGIN {drop.format(row)} {also} END")
    db.execute("CREATE TRIGGER sessions_delete_drops_digest AFTER DELETE ON sessions"
               " BEGIN DELETE FROM session_digests WHERE session_id = OLD.id; END")


def m048_forks(db: Database) -> None:
    # The session a session was forked from on this machine (`dh resume S --world local` of
    # a session that replicated to a world: a new session, S left as it is there), for the
    # list to show in one read. The fork's own `forked` event is what travels with it.
    db.execute("CREATE TABLE forks (session_id TEXT PRIMARY KEY, forked_from TEXT NOT NULL,"
               " at TEXT NOT NULL)")


def m049_turn_starts(db: Database) -> None:
    # The records that open a turn, in their source's order, with what `dh log list` counts
    # them by (worlds/local_views.py turn_marks): from the index alone, a list of 10,001
    # sessions reads their 18,753 turn starts in 0.04 s instead of scanning every record
    # (0.18 s CPU of a 1.05 s list). Partial: one entry per turn, not per record.
    db.execute('CREATE INDEX records_turn_starts ON records (source_id, generation, "offset",'
               " native_id, ts) WHERE turn_start = 1")


def m050_digests_dropped_per_insert(db: Database) -> None:
    # A digest is dropped once per insert of records (worlds/local_records.py insert_rows, the
    # one way records go in) instead of by a trigger on each row: the trigger's DELETE per row
    # was 0.5-0.9 s of the 2.1-2.5 s a 30 MB transcript's 22,440 rows took to insert.
    db.execute("DROP TRIGGER records_insert_drops_digest")


def m051_model_calls_read_no_bytes(db: Database) -> None:
    # model_calls of m043 whose inner query names the columns it uses: `SELECT r.*` carried
    # every record's raw bytes into the window's sorter, 16.3 s for the 200,832 records of
    # one session (3 reads of it for one trace page); its columns alone, 4.8 s.
    db.execute("DROP VIEW model_calls")
    db.execute(MODEL_CALLS_M051)


MODEL_CALLS_M051 = MODEL_CALLS_M043.replace(
    "FROM (SELECT r.*, o.kind AS source_kind,",
    'FROM (SELECT r.id, r.session_id, r.source_id, r.generation, r."offset", r.at, r.model,'
    " r.msg_id, r.tokens_in, r.tokens_cache_read, r.tokens_cache_write, r.tokens_cache_write_1h,"
    " r.tokens_out, r.tokens_reasoning, r.price_usd, o.kind AS source_kind,", 1)
