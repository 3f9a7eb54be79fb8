"""`dh world push/pull/status` against a real PostgreSQL server: a million records pushed once
and then not again, pushes killed at random points converging to one clean push, a server
stopped mid-push, bad credentials and refused connections (one Error line, no password, and
the next push completes), and a pull into a second DH_HOME that rebuilds the native files."""

from __future__ import annotations

import hashlib
import json
import os
import random
import signal
import subprocess
import time
from dataclasses import replace

import psycopg
import pytest

from dh_cli.errors import ConfigError
from dh_cli.models import Record, Session, Source
from dh_cli.worlds.local import RECORD_COLUMNS, LocalWorld
from dh_cli.team.sync import compare, copy_sessions, prefetched, pull, push, status

from . import pg
from .conftest import FIXTURES, fixture_home, native_files, scenarios
from .pg import pg_url  # noqa: F401  (fixture)
from . import rig

MILLION = 1_000_000
_ROWS = ("SELECT s.session_id, s.relpath, {cols} FROM dh.records r JOIN dh.sources s ON s.id = r.source_id"
         ' ORDER BY s.session_id, s.relpath, r.generation, r."offset"').format(
    cols=", ".join(f'r."{c}"' for c in RECORD_COLUMNS[1:]))


# helpers ------------------------------------------------------------------------------------
def dh(dh_home, *args, url: str | None = None, wait: bool = True):
    """Run the real `python -m dh_cli` with its own DH_HOME (and DH_POSTGRES_URL)."""
    env = {k: v for k, v in os.environ.items() if not k.endswith("POSTGRES_URL")}
    env.update(DH_HOME=str(dh_home), NO_COLOR="1", COLUMNS="200")
    if url:
        env["DH_POSTGRES_URL"] = url
    return rig.dh(*args, env=env, wait=wait, timeout=600, inherit=False)


def server_content(url: str) -> dict:
    """Everything a push leaves on the server, by natural key (no server-side ids): a digest
    of every record row with all its columns, in order, plus the small tables in full."""
    digest, count = hashlib.blake2b(), 0
    with psycopg.connect(url) as conn:
        with conn.cursor().copy(f"COPY ({_ROWS}) TO STDOUT") as copy:
            for block in copy:
                digest.update(block)
        count = conn.execute("SELECT COUNT(*) FROM dh.records").fetchone()[0]
        small = {table: conn.execute(query).fetchall() for table, query in {
            "sessions": "SELECT * FROM dh.sessions ORDER BY id",
            "sources": "SELECT session_id, relpath, kind, path, generation, \"offset\", status"
                       " FROM dh.sources ORDER BY session_id, relpath",
            "events": "SELECT * FROM dh.events ORDER BY session_id, seq"}.items()}
    return {"records": count, "digest": digest.hexdigest(), **small}


def server_count(url: str) -> int:
    try:
        with psycopg.connect(url, connect_timeout=5) as conn:
            if conn.execute("SELECT to_regclass('dh.records')").fetchone()[0] is None:
                return 0
            return conn.execute("SELECT COUNT(*) FROM dh.records").fetchone()[0]
    except psycopg.OperationalError:
        return -1


def assert_one_clean_error(result, *secrets: str) -> None:
    assert result.returncode == 5, (result.returncode, result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.stderr
    for secret in secrets:
        assert secret not in result.stdout + result.stderr


def local_content(dh_home) -> dict:
    """A local log by natural key: sessions, sources (minus ids), stored rows, events."""
    world = LocalWorld(dh_home / "dh.db")
    out = {"sessions": world.sessions(), "sources": [], "rows": [], "events": []}
    for session in out["sessions"]:
        out["events"] += world.events(session.id)
        for source in world.sources(session.id):
            out["sources"].append((session.id, source.relpath, source.kind, source.generation,
                                   source.offset, source.head_hash, source.tail_hash))
            for rows in world.read_rows(source, as_source_id=0):
                out["rows"] += [(session.id, source.relpath) + row for row in rows]
    world.close()
    return out


# a million records --------------------------------------------------------------------------
@pytest.fixture(scope="module")
def million(tmp_path_factory):
    home = tmp_path_factory.mktemp("million")
    start = time.monotonic()
    pg.fill_log(home / "dh.db", MILLION)
    print(f"\n[million] local log of {MILLION:,} records generated in {time.monotonic() - start:.1f} s")
    return home


@pytest.fixture(scope="module")
def clean_push(million):
    """One clean push of the million into a fresh database: (url, report, seconds, content)."""
    url = pg.fresh_db()
    start = time.monotonic()
    result = dh(million, "world", "push", "postgres", "--json", url=url)
    seconds = time.monotonic() - start
    assert result.returncode == 0, result.stderr
    print(f"\n[million] clean push: {seconds:.1f} s")
    return url, json.loads(result.stdout), seconds, server_content(url)


@pytest.mark.postgres
def test_push_of_a_million_records_then_a_second_push_adds_nothing(million, clean_push):
    url, report, seconds, content = clean_push
    assert report["records"] == MILLION and report["events"] == 9
    assert content["records"] == MILLION
    start = time.monotonic()
    again = dh(million, "world", "push", "postgres", "--json", url=url)
    assert again.returncode == 0, again.stderr
    second = json.loads(again.stdout)
    print(f"\n[million] second push: {time.monotonic() - start:.1f} s")
    assert (second["records"], second["events"], second["sessions_changed"]) == (0, 0, 0)
    assert server_content(url) == content


@pytest.mark.postgres
def test_push_killed_at_random_points_then_rerun_gives_one_clean_push(million, clean_push):
    _, _, clean_seconds, clean = clean_push
    url = pg.fresh_db()
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    print(f"\n[kill] seed {seed}")
    landed = []
    for _ in range(3):
        left = 1 - max(server_count(url), 0) / MILLION
        delay = 0.8 + rng.uniform(0.1, 0.7) * clean_seconds * left
        proc = dh(million, "world", "push", "postgres", url=url, wait=False)
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        proc.communicate()
        count = server_count(url)
        print(f"[kill] after {delay:.2f} s: exit {proc.returncode}, {count:,} records on the server")
        if proc.returncode == -signal.SIGKILL and 0 < count < MILLION:
            landed.append(count)
    assert landed, "no kill landed while records were being pushed"
    final = dh(million, "world", "push", "postgres", "--json", url=url)
    assert final.returncode == 0, final.stderr
    assert server_content(url) == clean


@pytest.mark.postgres
def test_server_stopped_mid_push_is_one_error_and_the_next_push_completes(million, clean_push):
    server = pg.server()
    if not server.controllable:
        pytest.skip("the server at DH_TEST_POSTGRES_URL is not ours to stop")
    url = pg.fresh_db()
    proc = dh(million, "world", "push", "postgres", url=url, wait=False)
    deadline = time.monotonic() + 120
    while server_count(url) <= 0 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    server.stop("fast")
    try:
        out, err = proc.communicate(timeout=120)
    finally:
        server.start()
        pg.wait_ready(server)
    result = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
    print(f"\n[stop] exit {proc.returncode}: {err.strip()}")
    assert_one_clean_error(result, server.password)
    assert "lost the connection" in err or "cannot connect" in err, err
    assert server_count(url) < MILLION
    again = dh(million, "world", "push", "postgres", url=url)
    assert again.returncode == 0, again.stderr
    assert server.password not in again.stdout + again.stderr
    assert server_content(url) == clean_push[3]


# bad servers --------------------------------------------------------------------------------
@pytest.fixture
def small_home(tmp_path, run_dh):
    home = fixture_home("pi", "basic", tmp_path)
    assert run_dh("import", "pi", "--all", "--home", str(home)).exit_code == 0
    return tmp_path / "dh-home"


@pytest.mark.postgres
def test_wrong_password_is_one_error_line_without_the_password(small_home, pg_url):
    wrong = "wrong-" + os.urandom(6).hex()
    server = pg.server()
    bad_url = pg_url.replace(server.password, wrong)
    result = dh(small_home, "world", "push", "postgres", "--url", bad_url)
    assert_one_clean_error(result, wrong, server.password)
    assert "refused the login" in result.stderr
    ok = dh(small_home, "world", "push", "postgres", url=pg_url)
    assert ok.returncode == 0, ok.stderr
    assert server.password not in ok.stdout + ok.stderr


@pytest.mark.postgres
def test_refused_connection_is_one_error_line_and_the_next_push_completes(small_home, pg_url):
    port = pg._free_port()
    result = dh(small_home, "world", "push", "postgres",
                url=f"postgresql://dh:s3cret-pass-1234@127.0.0.1:{port}/dh")
    assert_one_clean_error(result, "s3cret-pass-1234")
    assert "cannot connect" in result.stderr
    ok = dh(small_home, "world", "push", "postgres", "--url", pg_url)
    assert ok.returncode == 0, ok.stderr


def test_no_url_is_a_usage_error(monkeypatch):
    from dh_cli.team.postgres import resolve_url

    for name in ("DH_POSTGRES_URL", "WORKFLOW_POSTGRES_URL"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(ConfigError):
        resolve_url(None)
    monkeypatch.setenv("WORKFLOW_POSTGRES_URL", "postgresql://w")
    assert resolve_url(None) == "postgresql://w"
    monkeypatch.setenv("DH_POSTGRES_URL", "postgresql://d")
    assert resolve_url(None) == "postgresql://d" and resolve_url("postgresql://u") == "postgresql://u"


def test_psycopg_messages_lose_the_password():
    from dh_cli.team.postgres import scrub, world_error

    url = "postgresql://dh:hunter2-long@db.example:5432/dh"
    exc = psycopg.OperationalError('connection failed: connection to server at "10.0.0.1", port 5432'
                                   ' failed: could not use postgresql://dh:hunter2-long@db password=hunter2-long')
    err = world_error(exc, url, connecting=True)
    assert "hunter2" not in str(err) and str(err).startswith("cannot connect to PostgreSQL at postgresql://dh:***@")
    assert scrub("host=x password='a b c' user=y", "host=x") == "host=x password=*** user=y"


# pull: a second machine ---------------------------------------------------------------------
# "killed-resumed" continues the native session of "killed": one log would merge the two.
JSONL_CASES = [(h, s) for h in ("claude-code", "codex", "pi") for s in scenarios(h) if s != "killed-resumed"]


@pytest.mark.postgres
def test_pull_into_a_second_home_is_byte_exact_and_rebuilds_the_native_files(
        tmp_path, monkeypatch, run_dh, pg_url):
    home_a, home_b = tmp_path / "machine-a", tmp_path / "machine-b"
    monkeypatch.setenv("DH_HOME", str(home_a))
    homes = {}
    for harness, scenario in JSONL_CASES + [("opencode", "basic")]:
        (tmp_path / harness).mkdir(exist_ok=True)
        homes[(harness, scenario)] = fixture_home(harness, scenario, tmp_path / harness)
        assert run_dh("import", harness, "--all", "--home", str(homes[(harness, scenario)])).exit_code == 0
    assert run_dh("world", "push", "postgres", "--url", pg_url).exit_code == 0
    monkeypatch.setenv("DH_HOME", str(home_b))
    result = run_dh("world", "pull", "postgres", "--url", pg_url, "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["records"] > 0
    assert local_content(home_b) == local_content(home_a)
    assert json.loads(run_dh("world", "pull", "postgres", "--url", pg_url, "--json").stdout)["records"] == 0
    for (harness, scenario), native in homes.items():
        _assert_rebuilds(run_dh, harness, scenario, native, tmp_path / "rebuilt" / f"{harness}-{scenario}")
    statuses = json.loads(run_dh("world", "status", "--url", pg_url, "--json").stdout)
    assert {s["status"] for s in statuses} == {"in sync"}


def _assert_rebuilds(run_dh, harness, scenario, native, out) -> None:
    world = LocalWorld()
    ids = [s.id for s in world.sessions() if str(native) in (s.home, s.native_path)]
    world.close()
    assert ids, f"no pulled session for {harness}/{scenario}"
    for sid in ids:
        assert run_dh("log", "rebuild", sid, "--to", str(out)).exit_code == 0
    if harness == "opencode":
        (export,) = out.glob("opencode-export-*.json")
        expected = json.loads((FIXTURES / "opencode" / scenario / "export.json").read_text())
        assert json.loads(export.read_bytes()) == expected
    else:
        assert native_files(out) == native_files(native)


# status, --session, gaps (small, in-process) ------------------------------------------------
def _session(world, sid: str, n: int, created: str = "2026-01-01T00:00:00.000Z") -> Source:
    world.put_session(Session(id=sid, harness="pi", created_at=created, updated_at=created))
    source = world.put_source(Source(0, sid, "jsonl", f"sessions/{sid}.jsonl"))
    world.append_records(source, [Record(0, 0, i * 10, b'{"i":%d}\n' % i) for i in range(n)])
    return world.put_source(replace(source, offset=n * 10, updated_at=created), update=True)


@pytest.mark.postgres
def test_status_push_one_session_and_fill_gaps(tmp_path, pg_url):
    from dh_cli.team.postgres import PostgresWorld

    local, remote = LocalWorld(tmp_path / "a.db"), PostgresWorld(pg_url)
    _session(local, "1sessaaaaaaaaa", 5)
    _session(local, "1sessbbbbbbbbb", 5)
    _session(remote, "1sessccccccccc", 3)
    report = push(local, remote, ["1sessaaaaaaaaa"])
    assert (report.records, [s.session_id for s in report.sessions]) == (5, ["1sessaaaaaaaaa"])
    by_id = {s.session_id: s.status for s in status(local, remote)}
    assert by_id == {"1sessaaaaaaaaa": "in sync", "1sessbbbbbbbbb": "local only",
                     "1sessccccccccc": "server only"}
    src = local.get_source("1sessaaaaaaaaa", "sessions/1sessaaaaaaaaa.jsonl")
    local.append_records(src, [Record(0, 0, 50, b'{"i":5}\n')])
    assert compare(local.marks()["1sessaaaaaaaaa"], remote.marks()["1sessaaaaaaaaa"]) == "local ahead"
    theirs = remote.get_source("1sessaaaaaaaaa", src.relpath).id
    remote.conn.execute('DELETE FROM dh.records WHERE source_id = %s AND "offset" IN (10, 30)',
                        [theirs])  # holes below the server's mark
    seen = []
    assert push(local, remote, progress=lambda done, total: seen.append((done, total))).records == 3 + 5
    assert seen and seen[-1][0] == seen[-1][1]
    assert {s.status for s in status(local, remote)} == {"in sync", "server only"}
    assert push(local, remote).records == 0
    remote.conn.execute('DELETE FROM dh.records WHERE source_id = %s AND "offset" = 50', [theirs])
    pulled = pull(remote, local, ["1sessccccccccc"])
    assert pulled.records == 3
    assert compare(local.marks()["1sessaaaaaaaaa"], remote.marks()["1sessaaaaaaaaa"]) == "local ahead"
    remote.close()


def test_push_between_two_local_logs_is_idempotent(tmp_path):
    a, b = LocalWorld(tmp_path / "a.db"), LocalWorld(tmp_path / "b.db")
    _session(a, "1sessaaaaaaaaa", 120)
    a.add_event("1sessaaaaaaaaa", "attempt_started", {"n": 1})

    def copy():  # push's loop; push and pull themselves take a team world
        return copy_sessions(a, b, "push", "b", None, None)

    assert (copy().records, copy().records) == (120, 0)
    assert compare(a.marks()["1sessaaaaaaaaa"], b.marks()["1sessaaaaaaaaa"]) == "in sync"
    assert b.events("1sessaaaaaaaaa")[0].details == {"n": 1}
    assert b.get_source("1sessaaaaaaaaa", "sessions/1sessaaaaaaaaa.jsonl").offset == 1200


def test_prefetched_passes_items_and_errors_through():
    assert list(prefetched(iter(range(5)))) == [0, 1, 2, 3, 4]

    def failing():
        yield 1
        raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        list(prefetched(failing()))
    consumer = prefetched(iter(range(100)))
    assert next(consumer) == 0
    consumer.close()  # stops the producer thread without hanging


@pytest.mark.postgres
def test_nul_in_an_extracted_column_does_not_stop_a_push(tmp_path, pg_url):
    from dh_cli.team.postgres import PostgresWorld

    local, remote = LocalWorld(tmp_path / "a.db"), PostgresWorld(pg_url)
    source = _session(local, "1sessaaaaaaaaa", 2)
    raw = b'{"id":"a\\u0000b"}\n'
    local.append_records(source, [Record(0, 0, 20, raw + b"\x00", native_id="a\x00b")])
    assert push(local, remote).records == 3
    (got,) = remote.read_records("1sessaaaaaaaaa", source.relpath, after=(0, 10))
    assert got.raw == raw + b"\x00" and got.native_id == "a\ufffdb"  # raw keeps every byte
    remote.close()
