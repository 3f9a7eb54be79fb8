"""A `dh run` of a real harness CLI (tests/e2e), seen from outside: its session and events in
the log, the harness's pid, its end, and the checks every such test makes (each native record
logged once, no model reply paid twice)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import psutil

from dh_cli.events import LAUNCHED
from dh_cli.resume.rebuild import source_bytes
from dh_cli.wrappers.opencode_db import session_rows
from dh_cli.wrappers.opencode_rows import row_key
from tests.fakes.model_server import tool_results
from tests.helpers.wait import wait_until
from tests.rig import HEADLESS_ARGS, SCRIPT


R = SCRIPT["replies"]


STALL_SCRIPT = {"replies": [R[0], dict(R[1], delay_s=60, delay_times=1), *R[2:]]}


SLOW_COMMAND = "sleep 3; echo once >> effect.log"


MAY_HAVE_RUN = "may already have taken effect"
TOOL_SCRIPT = {"replies": [{"text": "Running a slow command.", "shell": SLOW_COMMAND}, *R[1:]]}


RUN_TIMEOUT = 240


def session_of(rig) -> dict:
    (session,) = rig.world().list_sessions()
    return session


def events(rig) -> list:
    return rig.world().events(session_of(rig)["id"])


def newest_session(rig) -> tuple[dict, Path]:
    """The log's newest session and the main native file its mirror reads."""
    world = rig.world()
    try:
        session = world.list_sessions()[-1]
        main = Path(world.mirrored_path(world.sources(session["id"])[0].id))
    finally:
        world.close()
    return session, main


# harness -> its own command that deletes a session (Codex's drops the rollout and the
# thread's rows; OpenCode's the session's rows)
OWN_DELETE = {"codex": ("DH_CODEX_BIN", ["delete", "--force"]),
              "opencode": ("DH_OPENCODE_BIN", ["session", "delete"])}


def lose_as_harness_does(rig, harness: str, session: dict, main: Path) -> None:
    """The session lost the way its harness loses it: its own delete where it has one, else
    its file gone (Claude Code's cleanup; a user)."""
    if harness not in OWN_DELETE:
        main.unlink()
        return
    var, args = OWN_DELETE[harness]
    subprocess.run([*rig.env[var].split(), *args, session["harness_session_id"]], cwd=rig.proj,
                   env=rig.env, check=True, capture_output=True, stdin=subprocess.DEVNULL,
                   timeout=120)


def goes_on_whole(rig, argv: list[str], earlier: str, now: str, other: str) -> None:
    """The harness alone (argv, nothing of dh) goes on with a session: its first model
    request carries the earlier prompt and the earlier tool's result (`step-one`), the new
    prompt, and nothing of the other session."""
    asked = len(rig.server.main_requests())
    went_on = subprocess.run(argv, cwd=rig.proj, env=rig.env, capture_output=True,
                             stdin=subprocess.DEVNULL, timeout=RUN_TIMEOUT)
    assert went_on.returncode == 0, went_on.stderr.decode(errors="replace")[-2000:]
    first = rig.server.main_requests()[asked]
    body = json.dumps(first["body"])
    assert earlier in body and now in body and other not in body
    results = [text for _, text, _ in tool_results(first["api"], first["body"])]
    assert any("step-one" in text for text in results), results


def logged(rig, kind: str) -> int:
    """How many records of this kind the log holds so far."""
    try:
        world = rig.world()
    except Exception:  # noqa: BLE001 - the log may not exist yet
        return 0
    try:
        sessions = world.list_sessions()
        return sum(r.kind == kind for s in sessions for r in world.records(s["id"]))
    finally:
        world.close()


def wait_until_logged(rig, kind: str, timeout: float = 30) -> None:
    wait_until(lambda: logged(rig, kind), f"a {kind} record in the log", timeout)


def launched_pid(rig, timeout: float = 60) -> int:
    """The harness's pid (it leads its own process group) from dh's `launched` event."""
    def launched() -> list:
        try:
            return [e for e in events(rig) if e.type == LAUNCHED]
        except Exception:  # noqa: BLE001 - the log may not exist yet
            return []

    return wait_until(launched, "the harness's launch", timeout)[-1].details["pid"]


def finish(proc: subprocess.Popen) -> tuple[int, str]:
    try:
        _, err = proc.communicate(timeout=RUN_TIMEOUT)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
        raise AssertionError(f"dh did not finish in {RUN_TIMEOUT} s: {err.decode()[-2000:]}")
    return proc.returncode, err.decode(errors="replace")


def read(path: Path) -> str:
    return path.read_text() if path.exists() else ""


def final_text_logged(rig) -> bool:
    world = rig.world()
    return any(b"All done." in r.raw for r in world.records(session_of(rig)["id"]))


def check_log_holds_every_record_once(rig, harness: str) -> None:
    """JSONL harnesses: the logged bytes are the native file's bytes. OpenCode: every row of
    the session in its database is in the log at its latest version, and no row version is
    logged twice."""
    world = rig.world()
    session = session_of(rig)
    sources = world.sources(session["id"])
    assert sources, "nothing was mirrored"
    for source in sources:
        if source.kind == "opencode":
            check_opencode_rows(world, session, source)
        elif source.kind == "jsonl":
            assert source_bytes(world, source) == Path(source.path).read_bytes(), source.relpath


def check_opencode_rows(world, session: dict, source) -> None:
    """The database holds only each row's current version, so a version logged twice is
    logged twice in a row; the same version again after another one is a real change back
    (a counter that `opencode import` restarted after the home was lost)."""
    records = list(world.records(session["id"], source.id))
    latest: dict[str, dict] = {}
    for raw in (r.raw for r in records):
        row = json.loads(raw)
        assert latest.get(row_key(row)) != row, f"{row_key(row)}: a row version was logged twice"
        latest[row_key(row)] = row
    db_rows = [json.loads(line) for line in session_rows(Path(source.path), session["harness_session_id"])]
    assert db_rows
    for row in db_rows:
        assert latest.get(row_key(row)) == row, f"{row_key(row)} is not in the log at its latest version"


def check_no_rebilling(rig) -> None:
    assert rig.server.rebilled() == 0, rig.server.completed_counts()


def spawn_dh(rig, harness: str, *dh_opts: str) -> subprocess.Popen:
    out = open(rig.tmp / "dh-stdout.txt", "wb")  # a file: a full pipe would stall the harness
    return subprocess.Popen([sys.executable, "-m", "dh_cli", "run", harness, *dh_opts, "--",
                             *HEADLESS_ARGS[harness]("Create the files.")],
                            cwd=rig.proj, env=rig.env, stdin=subprocess.DEVNULL, stdout=out,
                            stderr=subprocess.PIPE)


def wait_for_sleep(dh: subprocess.Popen, timeout: float = RUN_TIMEOUT) -> psutil.Process:
    def sleeping() -> psutil.Process | None:
        assert dh.poll() is None, "dh ended before the tool ran"
        try:
            children = psutil.Process(dh.pid).children(recursive=True)
            return next((p for p in children if p.name() == "sleep"), None)
        except psutil.Error:
            return None

    return wait_until(sleeping, "the slow shell command", timeout)


def leftover_processes(tmp: Path) -> list:
    left = []
    for proc in psutil.process_iter(["name", "cwd", "status"]):
        if proc.info["status"] != psutil.STATUS_ZOMBIE and str(tmp) in (proc.info["cwd"] or ""):
            left.append(proc)
    return left
