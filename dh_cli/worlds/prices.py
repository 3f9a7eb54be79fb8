"""The prices the local log holds (records.price_usd) kept those of the installed price table:
`dh log cost` and `dh log show` price with the table as it is now, and a query of the log
must read the same dollars. When the table changes (genai-prices upgraded), every logged call
is priced again, once, the first time the log is opened for writing."""

from __future__ import annotations

from ..pricing import table_signature

# Each model call priced by dh_price() (pricing.register_price), from its token columns.
PRICE_RECORDS = """UPDATE records SET price_usd = dh_price(model, tokens_in, tokens_cache_read,
                       tokens_cache_write, tokens_cache_write_1h, tokens_out, tokens_reasoning)
                   WHERE tokens_in IS NOT NULL"""


def priced_with(conn) -> str | None:
    """The signature of the table the log's prices came from."""
    row = conn.execute("SELECT signature FROM price_table").fetchone()
    return row[0] if row else None


def mark_priced(conn, signature: str | None) -> None:
    conn.execute("DELETE FROM price_table")
    conn.execute("INSERT INTO price_table (signature) VALUES (?)", [signature])


def reprice_if_changed(conn) -> bool:
    """Price every logged call again when the installed table is not the one the log was
    priced with; True if it was. One write transaction, so that two dh opening the log at
    once price it once (the second finds the new signature)."""
    now = table_signature()
    if now is None or priced_with(conn) == now:
        return False
    conn.execute("BEGIN IMMEDIATE")
    try:
        changed = priced_with(conn) != now
        if changed:
            conn.execute(PRICE_RECORDS)
            mark_priced(conn, now)
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    return changed
