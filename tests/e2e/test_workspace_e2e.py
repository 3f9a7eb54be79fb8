"""The session's files travel with it (issue 16), with the REAL Claude Code CLI headless: over
several tool calls the model writes and edits files (and a secret-looking file and a large one
through the shell); the harness is killed while a later model call stalls; the machine is
lost (its checkout and harness home deleted); its log is pushed to a real PostgreSQL; another
home resumes the session with `dh resume S --world postgres --cwd NEW`. NEW gets the files of
the last completed step byte for byte, the turn completes there, and the model's next
requests carry what those files hold. The secret and the large file were never stored."""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.fakes.model_server import FakeModelServer, tool_results
from tests.pg import pg_url  # noqa: F401  (fixture)
from tests.rig import HEADLESS_ARGS, Rig

from tests.helpers.workspace_runs import LARGE, SCRIPT, SECRET, rig_on
from tests.helpers.real_runs import RUN_TIMEOUT, finish, launched_pid, logged

pytestmark = [pytest.mark.e2e, pytest.mark.postgres]

def wait_for_results(rig: Rig, count: int, timeout: float = 40) -> None:
    deadline = time.monotonic() + timeout
    while logged(rig, "tool_result") < count:
        assert time.monotonic() < deadline, f"fewer than {count} tool results reached the log"
        time.sleep(0.1)


def objects_in(rig: Rig) -> list[tuple[str, int]]:
    return rig.world().conn.execute("SELECT hash, size FROM ws_objects").fetchall()


def test_files_of_the_last_step_follow_the_session_to_another_machine(tmp_path, installed, pg_url):
    server = FakeModelServer(SCRIPT).start()
    try:
        a, b = rig_on(tmp_path / "A", server, installed), rig_on(tmp_path / "B", server, installed)
        out = open(a.tmp / "dh-stdout.txt", "wb")
        dh = subprocess.Popen([sys.executable, "-m", "dh_cli", "run", "claude-code", "--max-restarts",
                               "0", "--", *HEADLESS_ARGS["claude-code"]("Make the notes.")],
                              cwd=a.proj, env=a.env, stdin=subprocess.DEVNULL, stdout=out,
                              stderr=subprocess.PIPE)
        server.wait_for(lambda log: any(e.get("reply_index") == 3 for e in log), timeout=RUN_TIMEOUT)
        # Claude Code writes its transcript in batches: kill it once the third tool result is
        # in the log (the model call after it stalls for 60 s), so the log's last completed
        # step is the second write and no step is redone on the other machine.
        wait_for_results(a, 3)
        os.killpg(launched_pid(a), signal.SIGKILL)
        code, err = finish(dh)
        assert code != 0 and "giving up on session" in err, err
        expected = {p: (a.proj / p).read_bytes() for p in ("notes/a.txt", "data/b.txt")}
        assert expected["notes/a.txt"] == b"alpha, edited\n"
        assert (a.proj / "big.dat").stat().st_size == LARGE and (a.proj / ".env").read_bytes() == SECRET
        (session,) = a.world().list_sessions()
        sid = session["id"]
        snaps = a.world().conn.execute("SELECT reason, step FROM ws_snapshots WHERE session_id = ?"
                                       " ORDER BY seq", [sid]).fetchall()
        # After a step's result is committed (the snapshot thread looks 50 ms after a commit;
        # the fake model answers in milliseconds, so one snapshot may cover several steps):
        # the last is of the third tool call, the second write, taken while the harness ran
        # or, when the kill came first, at the attempt's end
        assert snaps and snaps[-1][1] == "toolu_002", snaps
        assert snaps[-1][0] in ("tool", "attempt_end") and snaps[0] == ("start", None), snaps
        check_never_stored(a, pg_url=None)

        shutil.rmtree(a.proj)  # the machine is lost: its checkout and harness home
        shutil.rmtree(a.tmp / ".claude")
        pushed = subprocess.run([sys.executable, "-m", "dh_cli", "world", "push", "postgres",
                                 "--url", pg_url], cwd=a.tmp, env=a.env, capture_output=True,
                                timeout=120)
        assert pushed.returncode == 0, pushed.stderr.decode()
        check_never_stored(a, pg_url)

        new = b.tmp / "elsewhere" / "checkout"
        asked = len(server.main_requests())
        resumed = b.dh("resume", sid, "--world", "postgres", "--url", pg_url, "--cwd", str(new),
                       timeout=RUN_TIMEOUT)
        err = resumed.stderr.decode()
        assert resumed.returncode == 0, err
        assert f"dh: restored the workspace of session {sid} into {new}" in err, err
        assert "not in the log, so not restored: " in err and ".env" in err and "big.dat" in err
        assert not (new / ".env").exists() and not (new / "big.dat").exists()
        restored = [e.details for e in b.world().events(sid) if e.type == "workspace"]
        assert restored and set(restored[0]["restored"]["written"]) == set(expected), restored
        requests = server.main_requests()[asked:]
        assert len(requests) == 3, len(requests)  # the read, the cat, the final answer
        results = [tool_results(r["api"], r["body"]) for r in requests]
        assert results[1][-1][1].strip() == "alpha, edited"  # the cat ran in NEW: the edited file
        assert results[2][-1][1].strip() == "one"  # `cat data/b.txt` found the restored file
        assert server.rebilled() == 0
        fork = b.tmp / "fork"
        forked = b.dh("workspace", "restore", sid, "--to", str(fork))
        assert forked.returncode == 0, forked.stderr.decode()
        assert {p: (fork / p).read_bytes() for p in expected} == expected  # byte for byte
        world = b.world()
        assert world.get_session(sid).state == "finished" and world.get_session(sid).cwd == str(new)
        assert any(b"All done." in r.raw for r in world.records(sid))
    finally:
        server.stop()


def check_never_stored(rig: Rig, pg_url: str | None) -> None:
    """Neither the secret's bytes (nor its hash) nor the large file are in the log or the
    world: the log's files, every object and record decoded, every row of the world's tables
    (tests/workspace_stored.py). The notes file is found by the same search (the control)."""
    from tests.workspace_stored import holds, log_bytes, world_bytes

    secret_hash = hashlib.sha256(SECRET).hexdigest().encode()
    world = rig.world()
    stored = log_bytes(world)
    assert holds(stored, b"alpha, edited\n") and not holds(stored, SECRET)
    assert not holds(stored, secret_hash) and not holds(stored, b"Q\nQ\nQ\nQ\nQ\nQ\nQ\nQ\n" * 64)
    assert all(size < LARGE for _, size in objects_in(rig))
    if pg_url:
        from dh_cli.team.postgres import PostgresWorld

        remote = PostgresWorld(pg_url)
        stored = world_bytes(remote)
        assert holds(stored, b"alpha, edited\n") and not holds(stored, SECRET)
        assert not holds(stored, secret_hash) and not holds(stored, b"Q\nQ\nQ\nQ\nQ\nQ\nQ\nQ\n" * 64)
        rows = remote._rows("SELECT size FROM dh.ws_objects")
        assert rows and all(size < LARGE for (size,) in rows)
        remote.close()
