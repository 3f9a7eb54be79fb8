"""The log's size against the native bytes, for lines kept as text under 64 KiB (what dh does:
every record a person queries is readable SQL) and, measured in the same run on the same
transcript, the former policy of packing every line of 1 KiB or more with LZ4.

A generated Claude Code transcript in 2.1.197's shape (tool_use rows under 1 KiB) and in
2.1.332's (tool_use rows of 1,040-1,340 bytes, as the release writes them).
Run: python bench/bench_log_size.py [--mb 40]"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from dh_cli import wrappers  # noqa: E402
from dh_cli.mirror.importer import import_sessions  # noqa: E402
from dh_cli.worlds import rows  # noqa: E402
from dh_cli.worlds.local import LocalWorld  # noqa: E402
from tests.fakes.transcripts import write_claude_transcript  # noqa: E402

SESSION = "5f0c2a9e-1b7d-4c3e-9a61-2d8f0e4b7c15"


def log_bytes(home: Path, db: Path, pack_min: int) -> tuple[int, int]:
    """(bytes of the log after importing `home` with lines of pack_min bytes or more packed,
    records whose `raw` is NULL)."""
    kept, rows.PACK_MIN = rows.PACK_MIN, pack_min
    try:
        world = LocalWorld(db)
        import_sessions(world, wrappers.get("claude"), home, all_=True)
        world.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        nulls = world.conn.execute("SELECT COUNT(*) FROM records WHERE raw IS NULL").fetchone()[0]
        world.close()
    finally:
        rows.PACK_MIN = kept
    return sum(p.stat().st_size for p in db.parent.glob(db.name + "*")), nulls


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mb", type=int, default=40)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="dh-bench-size-"))
    try:
        for shape, newest in (("2.1.197", False), ("2.1.332", True)):
            home = work / shape
            native = home / "projects" / "-home-dev-project" / f"{SESSION}.jsonl"
            lines = write_claude_transcript(native, args.mb << 20, newest=newest)
            size = native.stat().st_size
            text, text_nulls = log_bytes(home, work / f"text-{shape}.db", rows.PACK_MIN)
            packed, packed_nulls = log_bytes(home, work / f"packed-{shape}.db", 1024)
            print(f"{shape} shape: native {size / 1e6:.1f} MB, {lines} lines; log with lines under"
                  f" 64 KiB as text {text / 1e6:.1f} MB ({text / size:.3f}x native, raw NULL in"
                  f" {text_nulls} records); packing from 1 KiB {packed / 1e6:.1f} MB"
                  f" ({packed / size:.3f}x, raw NULL in {packed_nulls}); text/packed"
                  f" {text / packed:.3f}x; load average {os.getloadavg()[0]:.1f}", flush=True)
    finally:
        shutil.rmtree(work)


if __name__ == "__main__":
    main()
