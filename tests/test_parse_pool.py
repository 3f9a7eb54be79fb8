"""An import parsed in the second process (mirror/parse_pool.py) logs exactly what the
in-process parser logs: every column of every row, token de-duplication across batches
included, on real Claude Code transcripts (with a subagent) and on a large generated one."""

import shutil

from dh_cli import wrappers
from dh_cli.mirror.importer import import_sessions
from dh_cli.worlds.local import RECORD_COLUMNS, LocalWorld

from .fakes.transcripts import write_claude_transcript

REAL = "tests/fixtures/real/claude-code"


def _imported(home, db, monkeypatch, pool_mb, batch_records=None):
    monkeypatch.setenv("DH_PARSE_POOL_MB", pool_mb)
    if batch_records:  # small batches: the usage de-duplication must carry across them
        monkeypatch.setattr("dh_cli.stores.tailer.BATCH_RECORDS", batch_records)
    world = LocalWorld(db)
    report = import_sessions(world, wrappers.get("claude"), home, all_=True)
    rows = world.conn.execute(
        f"SELECT o.relpath, {', '.join('r.' + c for c in RECORD_COLUMNS[1:])} FROM records r"
        " JOIN sources o ON o.id = r.source_id ORDER BY o.relpath, r.generation, r.offset").fetchall()
    totals = [world.token_totals(s["id"]) for s in world.list_sessions()]
    world.close()
    return report.added, rows, totals


def _home_of_real_sessions(tmp_path):
    home = tmp_path / "claude"
    for case in ("multiturn", "subagent-tasks", "todowrite"):
        shutil.copytree(f"{REAL}/{case}/claude-config/projects", home / "projects", dirs_exist_ok=True)
    return home


def test_real_sessions_log_the_same_rows_through_the_worker(tmp_path, monkeypatch):
    home = _home_of_real_sessions(tmp_path)
    in_process = _imported(home, tmp_path / "a.db", monkeypatch, "100000")
    pooled = _imported(home, tmp_path / "b.db", monkeypatch, "0", batch_records=3)
    assert in_process[0] > 0
    assert pooled == in_process


def test_a_large_session_logs_the_same_rows_through_the_worker(tmp_path, monkeypatch):
    home = tmp_path / "claude"
    write_claude_transcript(home / "projects" / "-p" / "5f0c2a9e-1b7d-4c3e-9a61-2d8f0e4b7c15.jsonl",
                            6 << 20)
    in_process = _imported(home, tmp_path / "a.db", monkeypatch, "100000")
    pooled = _imported(home, tmp_path / "b.db", monkeypatch, "1", batch_records=997)
    assert in_process[2][0]["model_calls"] > 0
    assert pooled == in_process
