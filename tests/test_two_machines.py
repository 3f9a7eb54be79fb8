"""Two machines, one PostgreSQL world: a session crashes on "A" (dh told not to restart it),
A pushes it; "B" — another DH_HOME, other harness homes, another checkout path — pulls it
(or lets `dh resume --world postgres` pull it) and resumes it in its own checkout with
`--cwd`. The turn completes on B, no model step is paid twice (both machines talk to the same
fake model server), the tools' files land in B's checkout, and the native session on B lives
under B's harness home in the layout for B's checkout with B's cwd in its records."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from dh_cli.wrappers import get as get_wrapper
from dh_cli.wrappers.claude import project_slug
from dh_cli.wrappers.pi import pi_session_dir_name

from . import pg
from .fakes.model_server import FakeModelServer
from .helpers import harnesses
from .pg import pg_url  # noqa: F401  (fixture)
from .rig import SCRIPT, Rig

pytestmark = pytest.mark.postgres

# reply #1 stalls once: the crash (during-model=2) lands while it is still undelivered
KILL_SCRIPT = {"replies": [SCRIPT["replies"][0], dict(SCRIPT["replies"][1], delay_s=5, delay_times=1),
                           *SCRIPT["replies"][2:]]}


@pytest.fixture
def machines(tmp_path):
    server = FakeModelServer(KILL_SCRIPT).start()
    rigs = []
    for name in ("A", "B"):
        (tmp_path / name).mkdir()
        rigs.append(Rig(tmp_path / name, server))
    yield rigs
    server.stop()


def crash_and_push(a: Rig, harness: str, url: str) -> str:
    """Run on A until the harness is killed mid-turn; dh gives up (no restarts); push."""
    crashed = a.run(harness, "Create the files.", "--max-restarts", "0", crash="during-model=2")
    assert crashed.returncode != 0 and b"giving up on session" in crashed.stderr, crashed.stderr
    (session,) = a.world().list_sessions()
    assert session["state"] == "fatal"
    pushed = a.dh("world", "push", "postgres", "--url", url)
    assert pushed.returncode == 0, pushed.stderr.decode()
    return session["id"]


def native_snapshot(rig: Rig) -> dict[str, bytes]:
    return {str(p): p.read_bytes() for p in rig.tmp.rglob("*.jsonl")
            if "dh-home" not in p.parts and p.is_file()}


def check_resumed_on_b(a: Rig, b: Rig, harness: str, sid: str, resumed, a_before: dict) -> None:
    err = resumed.stderr.decode()
    assert resumed.returncode == 0, err
    line = next((l for l in err.splitlines() if l.startswith(f"dh: moved session {sid} ")), "")
    assert line.startswith(f"dh: moved session {sid} from {a.proj} to {b.proj} (") and \
        line.endswith(" records rewritten)") and " (0 records" not in line, err
    assert b.server.rebilled() == 0
    assert (b.proj / "a.txt").read_text() == "alpha\n"
    assert not (a.proj / "a.txt").exists()
    assert native_snapshot(a) == a_before, "B wrote into A's files"
    world = b.world()
    session = world.get_session(sid)
    assert session.cwd == str(b.proj) and session.state == "finished"
    assert any(b"All done." in r.raw for r in world.records(sid))
    home = get_wrapper(harness).home(b.env)
    native = Path(session.native_path)
    assert native.is_relative_to(home) and native.exists()
    check_layout(harness, home, native, b.proj)
    assert record_cwds(harness, native, session.harness_session_id) == {str(b.proj)}


def check_layout(harness: str, home: Path, native: Path, cwd: Path) -> None:
    if harness == "claude-code":
        assert native.parent == home / "projects" / project_slug(str(cwd))
    elif harness == "pi":
        assert native.parent == home / "sessions" / pi_session_dir_name(str(cwd))
    elif harness == "codex":
        assert native.is_relative_to(home / "sessions")
    else:
        assert native == home  # OpenCode's database


def record_cwds(harness: str, native: Path, native_id: str) -> set[str]:
    """The cwd values the native session holds where each harness keeps it."""
    if harness == "opencode":
        with sqlite3.connect(native) as conn:
            rows = conn.execute("SELECT directory FROM session WHERE id = ?", [native_id]).fetchall()
            data = conn.execute("SELECT data FROM message WHERE session_id = ?", [native_id]).fetchall()
        return {r[0] for r in rows} | {json.loads(d[0])["path"]["cwd"] for d in data
                                       if "path" in json.loads(d[0])}
    lines = [json.loads(x) for x in native.read_bytes().splitlines()]
    if harness == "claude-code":
        return {row["cwd"] for row in lines if "cwd" in row}
    if harness == "pi":
        return {row["cwd"] for row in lines if row.get("type") == "session"}
    return {row["payload"]["cwd"] for row in lines
            if row.get("type") in ("session_meta", "turn_context")}


@pytest.mark.parametrize("harness", harnesses.ALL)
def test_crashed_on_a_pulled_and_resumed_on_b_in_another_checkout(machines, harness, pg_url):
    a, b = machines
    sid = crash_and_push(a, harness, pg_url)
    a_before = native_snapshot(a)
    pulled = b.dh("world", "pull", "postgres", "--url", pg_url)
    assert pulled.returncode == 0, pulled.stderr.decode()
    resumed = b.dh("resume", sid, "--cwd", str(b.proj))
    check_resumed_on_b(a, b, harness, sid, resumed, a_before)


@pytest.mark.parametrize("harness", ["claude-code", "pi"])
def test_resume_with_world_pulls_the_session_on_the_fly(machines, harness, pg_url):
    a, b = machines
    sid = crash_and_push(a, harness, pg_url)
    a_before = native_snapshot(a)
    b.env["DH_POSTGRES_URL"] = pg_url
    resumed = b.dh("resume", sid[:8], "--world", "postgres", "--cwd", str(b.proj))
    check_resumed_on_b(a, b, harness, sid, resumed, a_before)
    assert f"dh: pulled session {sid} from ".encode() in resumed.stderr
    password = pg.server().password.encode()
    assert password and password not in resumed.stderr + resumed.stdout
    assert password not in Path(b.env["DH_HOME"], "dh.db").read_bytes()
    events = [e.type for e in b.world().events(sid)]
    assert "moved" in events and events.count("source_moved") >= 1


def test_moved_session_keeps_the_old_generation(machines, pg_url):
    """The records from before the move stay in the log as they were; the rewritten ones
    are a new generation of the same source."""
    a, b = machines
    sid = crash_and_push(a, "pi", pg_url)
    a_log = a.world()
    (a_source,) = a_log.sources(sid)
    before = b"".join(a_log.raw_lines(a_source.id, a_source.generation))
    assert b.dh("world", "pull", "postgres", "--url", pg_url).returncode == 0
    assert b.dh("resume", sid, "--cwd", str(b.proj)).returncode == 0
    world = b.world()
    (source,) = world.sources(sid)
    assert b"".join(world.raw_lines(source.id, a_source.generation)) == before
    assert source.generation > a_source.generation
    assert source.relpath == f"sessions/{pi_session_dir_name(str(b.proj))}/{Path(a_source.relpath).name}"
