"""Push throughput against a raw psycopg COPY of the same rows, measured in the same run.

N records (default 1,000,000) are generated in a local log, then:
  raw COPY   the rows, already read into memory, written with one psycopg binary COPY in one
             transaction into a table equivalent to dh.records (same columns, types, key)
  raw stream the same, reading the rows from the SQLite log while copying (what the simplest
             hand-written push would do)
  dh push    `push()` of the whole log into an empty dh schema (marks, chunked commits, …)
Rounds are interleaved and the best of each is kept. The goal is push throughput >= 0.5x raw
COPY's. The server is the test suite's: the one at
DH_TEST_POSTGRES_URL, or a private one started for the run.
Run: python bench/bench_push.py [--records 1000000] [--rounds 3]"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from dh_cli.worlds.local import RECORD_COLUMNS, LocalWorld  # noqa: E402
from dh_cli.team.postgres import RECORD_TYPES, PostgresWorld, cols  # noqa: E402
from dh_cli.team.sync import push  # noqa: E402
from tests import pg  # noqa: E402


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def copy_rows(conn, table: str, rows) -> None:
    with conn.transaction(), conn.cursor().copy(
            f"COPY {table} ({cols(RECORD_COLUMNS)}) FROM STDIN (FORMAT BINARY)") as copy:
        copy.set_types(RECORD_TYPES)
        for row in rows:
            copy.write_row(row)


def checkpoint(conn) -> None:
    """Flush the server's dirty pages between runs, so no run pays for another's (needs a
    privileged user: skipped on a server where the test user cannot)."""
    try:
        conn.execute("CHECKPOINT")
    except psycopg.Error:
        pass


def local_rows(world: LocalWorld):
    """Every stored row of the log, source by source, as plain SELECTs."""
    for session in world.sessions():
        for source in world.sources(session.id):
            cursor = world.conn.execute(f"SELECT {', '.join(RECORD_COLUMNS)} FROM records"
                                        " WHERE source_id = ? ORDER BY generation, offset", [source.id])
            yield from cursor


def one_round(local: LocalWorld, conn, rows: list, url: str) -> tuple[float, float, float]:
    """(raw COPY, raw streaming COPY, dh push) seconds, each into fresh tables."""
    for table in ("raw_copy", "raw_stream"):
        conn.execute(f"CREATE TABLE {table} (LIKE dh.records INCLUDING ALL)")
    checkpoint(conn)
    raw = timed(lambda: copy_rows(conn, "raw_copy", rows))
    stream = timed(lambda: copy_rows(conn, "raw_stream", local_rows(local)))
    conn.execute("DROP TABLE raw_copy, raw_stream")  # the push starts from the same state
    conn.execute("TRUNCATE dh.records, dh.events, dh.sources, dh.sessions")
    checkpoint(conn)
    remote = PostgresWorld(url)
    report = {}
    seconds = timed(lambda: report.update(done=push(local, remote)))
    assert report["done"].records == len(rows), report["done"].to_dict()
    remote.close()
    return raw, stream, seconds


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=3, help="best of this many interleaved rounds")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="dh-bench-push-"))
    made = timed(lambda: pg.fill_log(work / "dh.db", args.records))
    print(f"local log: {args.records:,} records generated in {made:.1f} s")
    server = pg.server()
    url = server.url(server.create_db())
    local, conn = LocalWorld(work / "dh.db"), PostgresWorld(url).conn
    rows = list(local_rows(local))
    # Interleaved rounds, best of each: the machine's noise hits all three alike.
    rounds = [one_round(local, conn, rows, url) for _ in range(args.rounds)]
    raw, stream, dh = (min(column) for column in zip(*rounds))
    n = args.records
    print(f"raw COPY (rows in memory): {raw:.2f} s, {n / raw:,.0f} rows/s")
    print(f"raw COPY streaming from the log: {stream:.2f} s, {n / stream:,.0f} rows/s")
    print(f"dh push: {dh:.2f} s, {n / dh:,.0f} rows/s")
    print(f"push throughput ratio vs raw COPY: {raw / dh:.2f}x (goal >= 0.5); "
          f"vs raw streaming COPY: {stream / dh:.2f}x   (best of {args.rounds} rounds)")
    conn.close()
    server.drop_db(url.rsplit("/", 1)[1])
    shutil.rmtree(work)


if __name__ == "__main__":
    main()
