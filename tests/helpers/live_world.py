"""Two "machines" (two DH_HOMEs and sets of harness homes on this host) sharing a team world
and one fake model server, for the live-world tests (tests/test_live_world.py,
tests/test_live_worker.py): dh started in the background, a machine killed, the world read."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dh_cli.events import LAUNCHED
from tests.fakes.model_server import FakeModelServer
from tests.helpers.team_worlds import Team
from tests.rig import HEADLESS_ARGS, SCRIPT, Rig

TTL = 3  # seconds: short, so the tests stay short
STALL = 30.0  # reply #1 hangs this long, once: the kill lands while it is undelivered


def script(stall: float = STALL, second: float = 0.0, times: int | None = 1) -> dict:
    replies = [SCRIPT["replies"][0], dict(SCRIPT["replies"][1], delay_s=stall, delay_times=times)]
    third = dict(SCRIPT["replies"][2], delay_s=second, delay_times=1) if second else SCRIPT["replies"][2]
    return {"replies": [*replies, third, *SCRIPT["replies"][3:]]}


@pytest.fixture
def server():
    # reply #2 is slow: B still holds the session while A's refusals and listings are checked
    srv = FakeModelServer(script(second=12.0)).start()
    yield srv
    srv.stop()


def rigs(tmp_path: Path, server, *names: str) -> list[Rig]:
    out = []
    for name in names:
        (tmp_path / name).mkdir()
        out.append(Rig(tmp_path / name, server))
    return out


def popen(rig: Rig, *args: str) -> subprocess.Popen:
    """dh in the background, its own process group; its stderr in rig.tmp/<verb>.err."""
    err = open(rig.tmp / f"{args[0]}.err", "wb")
    child = subprocess.Popen([sys.executable, "-m", "dh_cli", *args], cwd=rig.proj, env=rig.env,
                             stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err,
                             start_new_session=True)
    err.close()
    return child


def stderr_of(rig: Rig, verb: str) -> str:
    return (rig.tmp / f"{verb}.err").read_text(errors="replace")


def run_live(rig: Rig, team: Team, harness: str = "pi") -> subprocess.Popen:
    return popen(rig, "run", harness, "--world", team.name, "--url", team.url, "--lease-ttl",
                  str(TTL), "--", *HEADLESS_ARGS[harness]("Create the files."))


def start_worker(rig: Rig, team: Team, *more: str) -> subprocess.Popen:
    return popen(rig, "worker", "--world", team.name, "--url", team.url, "--lease-ttl", str(TTL),
                  *more)


def wait(predicate, timeout: float, what: str, step: float = 0.05):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(step)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def main_requests(server) -> list[dict]:
    return server.main_requests()


def harness_pid(rig: Rig) -> int | None:
    world = rig.world()
    sessions = world.list_sessions()
    if not sessions:
        return None
    launched = [e for e in world.events(sessions[0]["id"]) if e.type == LAUNCHED]
    return launched[-1].details["pid"] if launched else None


def kill_group(pid: int, sig: int) -> None:
    try:
        os.killpg(os.getpgid(pid), sig)
    except ProcessLookupError:
        pass


def stalled(server) -> bool:
    return any(r["reply_index"] == 1 for r in main_requests(server))


def replicated(rig: Rig, team: Team) -> str:
    """The session id, once the local log holds every line Pi has written (it waits on the
    model: nothing more comes) and the world every record of the local log. What is not yet
    committed locally when a machine dies is not the world's to keep, so a test that kills
    the machine sooner cannot say what the world must hold (a reply asked for again on the
    next machine was seen once under a load of 5; a log a tick behind the harness when the
    test looked is one way to it, not confirmed as that one)."""
    def caught_up():
        sessions = rig.world().list_sessions()
        if not sessions:
            return None
        sid = sessions[0]["id"]
        local = [r.raw for r in rig.world().records(sid)]
        written = sum(p.read_bytes().count(b"\n") for p in (rig.tmp / "pi-agent").glob("sessions/**/*.jsonl"))
        return sid if local and len(local) >= written and world_raw(team, sid) == local else None
    return wait(caught_up, 30, "the harness's records in the world")


def world_raw(team: Team, sid: str) -> list[bytes]:
    world = team.open()
    try:
        return [r.raw for s in world.sources(sid) for r in world.read_records(sid, s.relpath)]
    finally:
        world.close()
