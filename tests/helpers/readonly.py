"""Reading a dh log another process is writing, as a test watches it: read-only, without
taking a lock, and with a fallback while the log does not exist yet or is busy."""

from __future__ import annotations

import sqlite3
from pathlib import Path


def query_read_only(db: Path, sql: str, default, timeout: float = 0.2):
    """The rows of `sql` on the log at `db`, or `default` when it cannot be read."""
    try:
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=timeout)
        try:
            return conn.execute(sql).fetchall()
        finally:
            conn.close()
    except sqlite3.Error:
        return default
