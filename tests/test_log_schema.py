"""The log as people query it (sqlite-utils, datasette): JSON functions work over every row of
`records`, records join sessions, the views answer the usual questions, and a log written
before this schema is upgraded in place, byte-exact."""

import json
import shutil
import subprocess
import zlib
from pathlib import Path

import lz4.block
import pytest

from tests.require import skip_if_missing
from sqlite_utils import Database

from dh_cli import wrappers
from dh_cli.logviews.logschema import EXAMPLES
from dh_cli.resume.rebuild import rebuild_session
from dh_cli.worlds import migrations
from dh_cli.worlds.local import LocalWorld
from dh_cli.worlds.rows import PACK_MIN, encode_raw

from .conftest import fixture_home
from .fakes.transcripts import write_claude_transcript

SQLITE_UTILS = shutil.which("sqlite-utils")
README = Path(__file__).parent.parent / "README.md"


def query(db: Path, sql: str) -> list[dict]:
    """Run a query with the real sqlite-utils CLI, as a user would."""
    done = subprocess.run([SQLITE_UTILS, "query", str(db), sql], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.fixture
def real_log(tmp_path, run_dh, dh_home):
    """A log holding real Claude Code (with lines over 1 KiB) and Codex sessions."""
    for harness, scenario in [("claude-code", "killed-resumed"), ("codex", "killed-resumed")]:
        home = fixture_home(harness, scenario, tmp_path)
        assert run_dh("import", harness, "--all", "--home", str(home)).exit_code == 0
    return dh_home / "dh.db"


@skip_if_missing(not SQLITE_UTILS, "the sqlite-utils CLI is not installed")
def test_json_extract_over_every_record_succeeds_with_long_lines(real_log):
    world = LocalWorld()
    total, packed, long = world.conn.execute(
        "SELECT COUNT(*), COUNT(packed), SUM(length(CAST(raw AS BLOB)) >= 1024) FROM records").fetchone()
    assert packed == 0 and long >= 2  # lines over 1 KiB (a Claude tool_use row) are text too
    rows = query(real_log, "select json_extract(raw,'$.type') from records")
    assert len(rows) == total
    assert None not in {r["json_extract(raw,'$.type')"] for r in rows}
    assert {"user", "assistant", "response_item"} <= {r["json_extract(raw,'$.type')"] for r in rows}


def test_only_lines_of_64_kib_or_more_are_packed():
    line = json.dumps({"type": "user", "text": "x" * 1000}).encode()
    assert encode_raw(line) == (line, 0)
    near = json.dumps({"type": "user", "text": "x" * (PACK_MIN - 100)}).encode()
    assert len(near) < PACK_MIN and encode_raw(near) == (near, 0)
    huge = json.dumps({"type": "user", "text": "x" * PACK_MIN}).encode()
    packed, codec = encode_raw(huge)
    assert codec == 2 and len(packed) < len(huge)


def test_records_join_sessions_with_foreign_keys_and_one_time_format(real_log):
    world = LocalWorld()
    assert world.conn.execute("PRAGMA foreign_key_check").fetchall() == []
    fks = {(fk[3], fk[2]) for fk in world.conn.execute("PRAGMA foreign_key_list(records)")}
    assert {("session_id", "sessions"), ("source_id", "sources"), ("codec", "codecs")} <= fks
    assert world.conn.execute("SELECT COUNT(*) FROM records WHERE session_id IS NULL"
                              " OR codec IS NULL").fetchone() == (0,)
    at, ts = world.conn.execute("SELECT at, ts FROM records WHERE ts IS NOT NULL LIMIT 1").fetchone()
    assert at == "2026-11-29T07:55:40.126Z" and ts == 1795938940126
    types = {row[0] for row in world.conn.execute("SELECT DISTINCT typeof(raw) FROM records")}
    assert types == {"text"}  # datasette shows the lines as text, not <Binary>


def test_tool_status_model_and_the_views(real_log):
    conn = LocalWorld().conn
    calls = conn.execute("SELECT tool, status, duration_ms FROM tool_calls"
                         " ORDER BY started_at").fetchall()
    assert [c[0] for c in calls] == ["exec_command"] * 3 + ["Bash", "Write", "Read"]  # by time
    assert {c[1] for c in calls} == {"ok"} and all(c[2] >= 0 for c in calls)
    models = dict(conn.execute("SELECT s.harness, GROUP_CONCAT(DISTINCT m.model) FROM model_calls m"
                               " JOIN sessions s ON s.id = m.session_id GROUP BY 1"))
    assert models == {"claude-code": "claude-opus-4-8", "codex": "mock-model"}
    turns = conn.execute("SELECT s.harness, t.turn, t.model_calls, t.tool_calls FROM turns t"
                         " JOIN sessions s ON s.id = t.session_id ORDER BY 1, 2").fetchall()
    assert turns == [("claude-code", 1, 1, 1), ("claude-code", 2, 3, 2),
                     ("codex", 1, 1, 1), ("codex", 2, 3, 2)]
    assert conn.execute("SELECT COUNT(*) FROM attempts").fetchone() == (0,)  # imported: no launches


@skip_if_missing(not SQLITE_UTILS, "the sqlite-utils CLI is not installed")
def test_the_documented_example_queries_run(real_log, run_dh):
    per_session, slowest, commands, calls, cost = (query(real_log, sql) for _, sql in EXAMPLES)
    assert [(r["harness"], r["calls"], r["tokens_in"]) for r in per_session] == [
        ("claude-code", 4, 40), ("codex", 4, 400)]
    assert slowest[0]["tool"] == "Bash" and slowest[0]["duration_ms"] == 48
    assert [r["command"] for r in commands] == ["echo step0 >> steps.log"]
    assert [(r["harness"], r["tool"]) for r in calls][:4] == [("codex", "exec_command")] * 3 + [
        ("claude-code", "Bash")]
    assert json.loads(calls[3]["input"])["command"] == "echo step0 >> steps.log"
    assert all(r["input"] and r["output"] is not None for r in calls)
    usd = json.loads(run_dh("log", "cost", "--by", "harness", "--json").stdout)["rows"]
    assert [(r["harness"], r["usd"]) for r in cost] == [
        (r["harness"], pytest.approx(r["usd"]) if r["usd"] else None) for r in usd]
    assert cost[0]["usd"] > 0  # Claude Code's claude-opus-4-8; Codex's mock-model has no price
    readme, schema = README.read_text(), run_dh("log", "schema").stdout
    for title, sql in EXAMPLES:
        assert sql in readme and sql in schema, title


def _no_null_where_the_line_has_it(db: Path) -> int:
    """Runs the documented queries over the log at `db`; every answer the native line holds is
    there (checked against the line itself). Returns the number of shell commands found."""
    results = [query(db, sql) for _, sql in EXAMPLES]
    for rows in results[:2]:
        assert rows and all(None not in r.values() for r in rows)
    world = LocalWorld(db)
    bash = [json.loads(r.raw) for s in world.list_sessions() for r in world.records(s["id"])
            if r.tool_name == "Bash"]
    native = [row["message"]["content"][0].get("input", {}).get("command") for row in bash]
    assert sorted(map(str, (r["command"] for r in results[2]))) == sorted(map(str, native))
    assert None not in native
    calls = results[3]
    assert calls and all(r["input"] is not None and r["harness"] for r in calls)
    assert all(r["output"] is not None for r in calls if r["status"] != "no result")
    return len(native)


@skip_if_missing(not SQLITE_UTILS, "the sqlite-utils CLI is not installed")
def test_the_examples_answer_on_a_live_session_and_a_40_mb_one(tmp_path, run_dh, dh_home, monkeypatch):
    """A session run under dh on Claude Code 2.1.332 (its lines are 1-1.1 KiB), and a generated
    40 MB transcript: no NULL where the native line has the field."""
    live = tmp_path / "live"
    live.mkdir()
    shutil.copy(Path(__file__).parent / "fixtures" / "resumed" / "claude-code-2.1.332.db", live / "dh.db")
    LocalWorld(live / "dh.db").close()  # migrated as a user's log is
    assert _no_null_where_the_line_has_it(live / "dh.db") >= 1
    home = tmp_path / "claude"
    native = home / "projects" / "-p" / "5f0c2a9e-1b7d-4c3e-9a61-2d8f0e4b7c15.jsonl"
    write_claude_transcript(native, 40 << 20, newest=True)
    assert min(len(line) for line in native.read_bytes().splitlines() if b'"tool_use"' in line) > 1024
    assert run_dh("import", "claude", "--all", "--home", str(home)).exit_code == 0
    assert _no_null_where_the_line_has_it(dh_home / "dh.db") > 5_000


# upgrading a log written before m007 -------------------------------------------------------------
OLD_COLUMNS = ["source_id", "generation", "offset", "raw", "codec", "kind", "native_id",
               "parent_id", "role", "tool_name", "tool_call_id", "model", "msg_id", "tokens_in",
               "tokens_out", "tokens_cache_read", "tokens_cache_write", "ts", "flags"]


def _old_rows(wrapper, source_id: int, path: Path, extra: list[bytes] = ()) -> list[tuple]:
    """A file's lines as an m006 log held them: long lines LZ4 (or deflate, as before m006),
    short ones with codec NULL or 0; no status, turn mark or Codex model."""
    rows, offset = [], 0
    for i, raw in enumerate(path.read_bytes().splitlines(keepends=True) + list(extra)):
        row = wrappers.base.to_record(wrapper.parse(raw), source_id, 0, offset, raw)[:19]
        stored, codec = raw, (None if i % 2 else 0)
        if len(raw) > 1024:
            stored, codec = (lz4.block.compress(raw), 2) if i % 2 else (_deflate(raw), 1)
        rows.append(row[:3] + (stored, codec) + row[5:])
        offset += len(raw)
    return rows


def _deflate(raw: bytes) -> bytes:
    packer = zlib.compressobj(1, zlib.DEFLATED, -12)
    return packer.compress(raw) + packer.flush()


def test_an_m006_log_is_upgraded_byte_exact_and_queryable(tmp_path, dh_home):
    claude = next(fixture_home("claude-code", "killed-resumed", tmp_path).glob("projects/*/*.jsonl"))
    codex = next(fixture_home("codex", "killed-resumed", tmp_path).glob("sessions/*/*/*/*.jsonl"))
    odd = [b'not json at all\n', b'{"type":"bad utf8 \xff"}\n', b'{"type":"nul\x00"}\n']
    dh_home.mkdir(parents=True)
    db = Database(dh_home / "dh.db")
    migrations.migration_set().apply(db, stop_before="m007_queryable_records")
    for n, (harness, path, extra) in enumerate([("claude-code", claude, odd), ("codex", codex, [])], 1):
        db["sessions"].insert({"id": f"old{n}", "harness": harness, "state": "imported",
                               "created_at": "2026-01-01", "updated_at": "2026-01-01"})
        db["sources"].insert({"id": n, "session_id": f"old{n}", "kind": "jsonl", "relpath": path.name})
        db["records"].insert_all([dict(zip(OLD_COLUMNS, row)) for row in
                                  _old_rows(wrappers.get(harness), n, path, extra)])
    codecs = {row[0] for row in db.execute("SELECT DISTINCT codec FROM records")}
    assert codecs == {None, 0, 1, 2}
    db.conn.close()

    world = LocalWorld()  # migrates
    assert not migrations.pending(world.conn)
    out = tmp_path / "rebuilt"
    for n, path, extra in [(1, claude, odd), (2, codex, [])]:
        (written,) = rebuild_session(world, world.get_session(f"old{n}"), out)
        assert written.path.read_bytes() == path.read_bytes() + b"".join(extra)
    conn = world.conn
    assert conn.execute("SELECT COUNT(*) FROM records WHERE raw IS NOT NULL AND NOT json_valid(raw)"
                        ).fetchone() == (0,)
    assert conn.execute("SELECT COUNT(*) FROM records WHERE packed IS NOT NULL AND codec = 0"
                        ).fetchone() == (3,)  # the three odd lines: not JSON text
    # the packed lines, all under 64 KiB, were unpacked into `raw` (m036)
    assert {r[0] for r in conn.execute("SELECT DISTINCT codec FROM records")} == {0}
    assert conn.execute("SELECT COUNT(*) FROM tool_calls WHERE status = 'ok'").fetchone() == (6,)
    assert conn.execute("SELECT DISTINCT model FROM model_calls WHERE session_id = 'old2'"
                        ).fetchall() == [("mock-model",)]
    assert conn.execute("SELECT COUNT(*) FROM turns").fetchone() == (4,)
    hits = conn.execute("SELECT COUNT(*) FROM record_text WHERE record_text MATCH 'step0'").fetchone()
    assert hits[0] >= 1


def test_the_model_calls_view_reads_no_record_bytes(tmp_path):
    """Its inner query names the columns it needs: `r.*` carried every record's raw bytes
    into the window's sorter (16.3 s against 4.8 s for one 200,832-record session)."""
    world = LocalWorld(tmp_path / "dh.db")
    (sql,) = world.conn.execute("SELECT sql FROM sqlite_master WHERE name = 'model_calls'").fetchone()
    world.close()
    assert "r.*" not in sql and "SELECT r.id, r.session_id" in sql
