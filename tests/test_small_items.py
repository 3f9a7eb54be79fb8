"""Issue 14, finding 8: the smaller items, each one `Error:` line with its exit code.
(A list/dict or 100k-character id in `dh import --all` is in test_import_identity.py;
DH_DB_TIMEOUT=-1/nan there too.)"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from dh_cli.worlds.local import LocalWorld

from .conftest import fixture_home
from .pg import pg_url  # noqa: F401  (fixture)
from .helpers.cli import dh, one_error


WRITER = Path(__file__).parent / "fakes" / "pi_writer.py"




@pytest.fixture
def imported(tmp_path):
    home = fixture_home("pi", "basic", tmp_path)
    assert dh("import", "pi", "--all", "--home", str(home)).returncode == 0
    return LocalWorld().sessions()[0].id


def test_an_empty_session_argument_matches_nothing(imported):
    for args in (["log", "show", ""], ["log", "show", "  "], ["log", "export", ""], ["resume", ""],
                 ["log", "rm", "", "--yes"]):
        one_error(dh(*args), 2, "no session given")
    assert LocalWorld().sessions()


def test_a_huge_session_argument_is_not_a_corrupt_log(imported):
    one_error(dh("log", "show", "x" * 100_000), 1, "longer than any session id")


def test_an_unknown_world_in_the_environment_is_refused(tmp_path):
    one_error(dh("world", "push", "postgres", env={"DH_WORLD": "mars", "DH_POSTGRES_URL": "postgresql://x@127.0.0.1:9/x"}),
              2, "DH_WORLD")


@pytest.mark.postgres
def test_postgres_url_in_the_config_file_is_used(tmp_path, imported, pg_url):
    config = tmp_path / "cfg" / "dh" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text(f'postgres_url = "{pg_url}"\n')
    env = {"XDG_CONFIG_HOME": str(tmp_path / "cfg"), "DH_POSTGRES_URL": "", "WORKFLOW_POSTGRES_URL": ""}
    pushed = dh("world", "push", "postgres", env=env)
    assert pushed.returncode == 0, pushed.stderr
    assert "1 of 1 session(s) changed" in pushed.stdout


@pytest.mark.postgres
@pytest.mark.parametrize("raw, codec, needle", [(b"\xff\xff\xff\x7fnot lz4", 2, "would decode to"),
                                                (b"whatever", 9, "codec 9")])
def test_a_damaged_or_unknown_codec_row_from_a_world_is_refused(tmp_path, imported, pg_url, raw, codec, needle):
    import psycopg

    env = {"DH_POSTGRES_URL": pg_url}
    assert dh("world", "push", "postgres", env=env).returncode == 0
    with psycopg.connect(pg_url, autocommit=True) as conn:
        (source_id,) = conn.execute("SELECT id FROM dh.sources").fetchone()
        conn.execute("INSERT INTO dh.records (source_id, generation, \"offset\", raw, codec)"
                     " VALUES (%s, 0, 999999, %s, %s)", [source_id, raw, codec])
    other = {**env, "DH_HOME": str(tmp_path / "B")}
    pulled = dh("world", "pull", "postgres", env=other)  # the session named, exit 7: with failures
    lines = pulled.stderr.strip().splitlines()
    assert pulled.returncode == 7 and "Traceback" not in pulled.stderr, lines
    assert len(lines) == 2 and "not pulled" in lines[0] and needle in lines[0], lines
    assert lines[1].startswith("Error: 1 of 1 session(s) could not be pulled whole"), lines
    world = LocalWorld(tmp_path / "B" / "dh.db")
    for session in world.sessions():  # what was stored reads back; the bad row is not there
        assert all(r.offset != 999999 for r in world.records(session.id))


def test_the_log_deleted_during_a_run_is_an_error(tmp_path, dh_home):
    (tmp_path / "proj").mkdir()
    env = {"PI_CODING_AGENT_DIR": str(tmp_path / "pi"), "DH_PI_BIN": f"{sys.executable} {WRITER}",
           "DH_WRITER_RECORDS": "80", "DH_WRITER_RATE": "20"}
    run = dh("run", "pi", "--", "-p", "go", env=env, cwd=tmp_path / "proj", wait=False)
    deadline = time.monotonic() + 60
    while not list((tmp_path / "pi").rglob("*.jsonl")) and time.monotonic() < deadline:
        time.sleep(0.1)
    for suffix in ("", "-wal", "-shm"):
        Path(f"{dh_home / 'dh.db'}{suffix}").unlink(missing_ok=True)
    _, err = run.communicate(timeout=180)
    assert run.returncode == 3, err
    lines = [line for line in err.strip().splitlines() if line.startswith("Error:")]
    assert len(lines) == 1 and "was deleted while dh was writing to it" in lines[0]


def test_a_connection_opened_during_a_run_never_makes_the_log_anew(tmp_path):
    # the mirror, the shared mirror and the snapshot thread open the log with create=False:
    # one that made a deleted log anew had the run's end report it "replaced", not deleted
    from dh_cli.errors import LogDbError
    from dh_cli.worlds.local import LocalWorld

    db = tmp_path / "a b%" / "dh.db"  # a path that must be quoted in the URI
    LocalWorld(db).close()
    LocalWorld(db, create=False).close()  # there: opened as usual
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    with pytest.raises(LogDbError):
        LocalWorld(db, create=False)
    assert not db.exists()
