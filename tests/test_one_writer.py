"""Issue 14, finding 3: one writer per native session, on one machine and across machines.

* `dh run pi -- --session FILE` (Pi's own resume flag) beside `dh resume S` of that file:
  the run adopts session S, finds it locked, and runs nothing.
* Two machines running `dh resume S --world postgres` at once: one holds the session's lease
  in the world, the other is refused (exit 4) while that lease is live; a lapsed lease
  (heartbeat older than its TTL) is taken over."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest

from dh_cli.worlds.local import LocalWorld

from .pg import pg_url  # noqa: F401  (fixture)
from .helpers.cli import one_error
from . import rig

WRITER = Path(__file__).parent / "fakes" / "pi_writer.py"


def env_for(root: Path, **extra) -> dict:
    (root / "proj").mkdir(parents=True, exist_ok=True)
    return {**os.environ, "DH_HOME": str(root / "dh-home"), "PI_CODING_AGENT_DIR": str(root / "pi-agent"),
            "DH_PI_BIN": f"{sys.executable} {WRITER}", "DH_WRITER_RECORDS": "60",
            "DH_WRITER_RATE": "400", **extra}


def dh(*args, env, cwd, wait=True):
    return rig.dh(*args, env=env, cwd=cwd, wait=wait, timeout=180, inherit=False)


def crashed_session(root: Path) -> tuple[dict, str, Path]:
    """A Pi session killed after 10 entries, dh told not to restart it."""
    env = env_for(root, DH_WRITER_KILL_AFTER="10", DH_WRITER_KILL_MARKER=str(root / "killed"))
    run = dh("run", "pi", "--max-restarts", "0", "--", "-p", "go", env=env, cwd=root / "proj")
    assert run.returncode != 0 and "giving up on session" in run.stderr, run.stderr
    world = LocalWorld(Path(env["DH_HOME"]) / "dh.db")
    (session,) = world.sessions()
    world.close()
    return env, session.id, Path(session.native_path)


def launches(env: dict, sid: str) -> int:
    world = LocalWorld(Path(env["DH_HOME"]) / "dh.db")
    try:
        return sum(e.type == "launched" for e in world.events(sid))
    finally:
        world.close()


def wait_launched(env: dict, sid: str, before: int = 0, timeout: float = 60) -> None:
    """Until the session has more launches than `before` (the resume's own launch)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        world = LocalWorld(Path(env["DH_HOME"]) / "dh.db")
        try:
            if sum(e.type == "launched" for e in world.events(sid)) > before:
                return
        except Exception:
            pass
        finally:
            world.close()
        time.sleep(0.2)
    raise AssertionError("the resume never launched")


def entry_ids(path: Path) -> list[str]:
    return [json.loads(line)["id"] for line in path.read_bytes().splitlines()
            if json.loads(line).get("type") != "session"]


def test_run_with_pis_own_resume_flag_beside_dh_resume_runs_nothing(tmp_path):
    env, sid, native = crashed_session(tmp_path)
    slow = {**env, "DH_WRITER_RATE": "15", "DH_WRITER_RECORDS": "120"}
    before = launches(env, sid)
    resume = dh("resume", sid, env=slow, cwd=tmp_path / "proj", wait=False)
    try:
        wait_launched(env, sid, before)
        beside = dh("run", "pi", "--", "-p", "--session", str(native), "go on", env=env,
                    cwd=tmp_path / "proj")
        one_error(beside, 4, "in use by dh")
    finally:
        out, err = resume.communicate(timeout=180)
    assert resume.returncode == 0, err
    ids = entry_ids(native)
    assert len(ids) == len(set(ids)), "two harnesses wrote into one session"
    world = LocalWorld(Path(env["DH_HOME"]) / "dh.db")
    assert [s.id for s in world.sessions()] == [sid]  # the run adopted S, made no second session


def test_run_with_pis_own_resume_flag_continues_the_known_session(tmp_path):
    env, sid, native = crashed_session(tmp_path)
    again = dh("run", "pi", "--", "-p", "--session", str(native), "go on", env=env, cwd=tmp_path / "proj")
    assert again.returncode == 0, again.stderr
    world = LocalWorld(Path(env["DH_HOME"]) / "dh.db")
    assert [s.id for s in world.sessions()] == [sid]


# across machines: the lease in the world ---------------------------------------------------
def pushed_session(tmp_path: Path, url: str) -> str:
    env, sid, _ = crashed_session(tmp_path / "A")
    pushed = dh("world", "push", "postgres", "--url", url, env=env, cwd=tmp_path)
    assert pushed.returncode == 0, pushed.stderr
    return sid


def launches_on_a(tmp_path: Path, sid: str) -> int:
    """A's launches of the session: a pull brings their events along."""
    return launches({"DH_HOME": str(tmp_path / "A" / "dh-home")}, sid)


def other_machine(tmp_path: Path, name: str, url: str, **extra) -> dict:
    return env_for(tmp_path / name, DH_POSTGRES_URL=url, **extra)


@pytest.mark.postgres
def test_two_machines_resuming_one_session_at_once_launch_once(tmp_path, pg_url):
    sid = pushed_session(tmp_path, pg_url)
    slow = {"DH_WRITER_RATE": "15", "DH_WRITER_RECORDS": "120"}
    b, c = (other_machine(tmp_path, n, pg_url, **slow) for n in ("B", "C"))
    first = dh("resume", sid, "--world", "postgres", env=b, cwd=tmp_path / "B" / "proj", wait=False)
    try:
        wait_launched(b, sid, launches_on_a(tmp_path, sid))
        second = dh("resume", sid, "--world", "postgres", env=c, cwd=tmp_path / "C" / "proj")
        one_error(second, 4, "held in the world")
    finally:
        _, err = first.communicate(timeout=180)
    assert first.returncode == 0, err
    assert not list((tmp_path / "C" / "pi-agent").rglob("*.jsonl")), "C ran the harness too"
    import psycopg

    with psycopg.connect(pg_url) as conn:  # released when B's resume ended
        # kept with its epoch once released (issue 15: an older epoch stays fenced)
        assert conn.execute("SELECT count(*) FROM dh.leases WHERE released_at IS NULL").fetchone()[0] == 0


@pytest.mark.postgres
def test_a_live_lease_written_in_the_world_refuses_and_a_lapsed_one_is_taken(tmp_path, pg_url):
    import psycopg

    sid = pushed_session(tmp_path, pg_url)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("INSERT INTO dh.leases VALUES (%s, 'elsewhere', 'boot-1', 4242, 7, now(), 600)", [sid])
    b = other_machine(tmp_path, "B", pg_url)
    refused = dh("resume", sid, "--world", "postgres", env=b, cwd=tmp_path / "B" / "proj")
    one_error(refused, 4, "held in the world by dh on elsewhere (pid 4242)")
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("UPDATE dh.leases SET heartbeat_at = now() - interval '11 minutes'")
    taken = dh("resume", sid, "--world", "postgres", env=b, cwd=tmp_path / "B" / "proj")
    assert taken.returncode == 0, taken.stderr
