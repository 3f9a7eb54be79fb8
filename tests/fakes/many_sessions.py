"""A log of many sessions made from the real fixtures, for the views' scale tests and benches:
the fixtures are imported once through `dh import`, then their sessions, sources, records,
search text and events are copied under new ids in SQL (10,000 sessions in seconds, where
importing as many files takes minutes). Each copy's times are moved back by its number of
minutes, so the copies differ in recency as a real log's sessions do."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
FIXTURES = ROOT / "tests" / "fixtures" / "real"
HOMES = {"claude": ("claude-code", "claude-config"), "codex": ("codex", "codex-home"),
         "pi": ("pi", "pi-agent")}
SCENARIOS = ("basic", "multiturn", "killed-resumed")


def import_fixtures(dh_home: Path, code: Path = ROOT) -> None:
    """Every harness's SCENARIOS imported into the log of dh_home (in a child dh: the one in
    the checkout at `code`, run from there since `python -m` puts its folder first on the path)."""
    env = {**os.environ, "DH_HOME": str(dh_home), "PYTHONPATH": str(code)}
    for harness, (folder, home) in HOMES.items():
        for scenario in SCENARIOS:
            source = FIXTURES / folder / scenario / home
            if source.is_dir():
                subprocess.run([sys.executable, "-m", "dh_cli", "import", harness, "--all",
                                "--home", str(source)], env=env, check=True, cwd=code,
                               stdout=subprocess.DEVNULL)


def copy_sessions(db_path: Path, total: int) -> int:
    """Copies of the log's imported sessions until it holds `total` (at least); returns the
    count. A copy's native id is its original's with `-cN` added (copy N)."""
    from dh_cli.util import new_session_id

    conn = sqlite3.connect(db_path, isolation_level=None)
    originals = [row[0] for row in conn.execute(
        "SELECT id FROM sessions WHERE harness_session_id NOT GLOB '*-c[0-9]*' ORDER BY id")]
    count = conn.execute("SELECT COUNT(*) FROM sessions").fetchone()[0]
    copy, texts = count // len(originals), {}
    conn.execute("BEGIN")
    while count < total:
        copy += 1
        for sid in originals:
            _copy_session(conn, sid, new_session_id(), copy, texts)
        count += len(originals)
    conn.execute("COMMIT")
    conn.close()
    return count


_SHIFT = "strftime('%Y-%m-%dT%H:%M:%fZ', {}, '-{} minutes')"


def _copy_session(conn: sqlite3.Connection, sid: str, new: str, minutes: int, texts: dict) -> None:
    names = [r[1] for r in conn.execute("PRAGMA table_info(sessions)")]
    shifted = {"id": "?", "harness_session_id": "harness_session_id || ?",
               "created_at": _SHIFT.format("created_at", minutes),
               "updated_at": _SHIFT.format("updated_at", minutes)}
    conn.execute(f"INSERT INTO sessions ({', '.join(names)}) SELECT "
                 + ", ".join(shifted.get(n, n) for n in names) + " FROM sessions WHERE id = ?",
                 [new, f"-c{minutes}", sid])
    for (source_id,) in conn.execute("SELECT id FROM sources WHERE session_id = ?", [sid]).fetchall():
        _copy_source(conn, source_id, new, minutes, texts)
    # where it lives on this machine, as a session dh ran here: the listings check its file
    place_cols = [r[1] for r in conn.execute("PRAGMA table_info(places)")]
    conn.execute(f"INSERT INTO places ({', '.join(place_cols)}) SELECT "
                 + ", ".join("?" if c == "session_id" else c for c in place_cols)
                 + " FROM places WHERE session_id = ?", [new, sid])
    conn.execute("INSERT INTO events SELECT ?, seq, " + _SHIFT.format("at", minutes)
                 + ", attempt, type, phase, details FROM events WHERE session_id = ?", [new, sid])


def _copy_source(conn: sqlite3.Connection, source_id: int, new: str, minutes: int,
                 texts: dict) -> None:
    source_cols = [r[1] for r in conn.execute("PRAGMA table_info(sources)") if r[1] != "id"]
    conn.execute(f"INSERT INTO sources ({', '.join(source_cols)}) SELECT "
                 + ", ".join("?" if c == "session_id" else c for c in source_cols)
                 + " FROM sources WHERE id = ?", [new, source_id])
    copied = conn.execute("SELECT last_insert_rowid()").fetchone()[0]
    conn.execute("INSERT INTO mirrored_paths (source_id, path) SELECT ?, path FROM mirrored_paths"
                 " WHERE source_id = ?", [copied, source_id])
    record_cols = [r[1] for r in conn.execute("PRAGMA table_xinfo(records)")
                   if r[1] not in ("id", "at")]
    first = conn.execute("SELECT COALESCE(MAX(id), 0) FROM records").fetchone()[0]
    values = {"session_id": "?", "source_id": "?", "ts": f"ts - {minutes * 60_000}"}
    conn.execute(f"INSERT INTO records ({', '.join(record_cols)}) SELECT "
                 + ", ".join(values.get(c, c) for c in record_cols)
                 + " FROM records WHERE source_id = ? ORDER BY id", [new, copied, source_id])
    # the search text of each copied record is its original's, under the copy's id
    if source_id not in texts:
        texts[source_id] = _texts(conn, source_id)
    ids = [r[0] for r in conn.execute("SELECT id FROM records WHERE id > ? ORDER BY id", [first])]
    conn.executemany("INSERT INTO record_text (rowid, text) VALUES (?, ?)",
                     [(i, t) for i, t in zip(ids, texts[source_id]) if t])


def _texts(conn: sqlite3.Connection, source_id: int) -> list:
    """The search text of the source's records in id order (read once per original)."""
    from dh_cli.worlds.search import _text_of

    rows = conn.execute(f"SELECT r.id, s.harness, {STORED_RAW_R}, r.codec FROM records r"
                        " JOIN sessions s ON s.id = r.session_id WHERE r.source_id = ?"
                        " ORDER BY r.id", [source_id]).fetchall()
    return [_text_of(row)[1] for row in rows]


STORED_RAW_R = "COALESCE(CAST(r.raw AS BLOB), r.packed)"
