"""The disk fills up while `dh run` writes the log. Two ways to make writes fail: a file-size
limit put on the running dh process alone (prlimit RLIMIT_FSIZE; Python ignores SIGXFSZ, so a
write past it fails with EFBIG), and, where this machine lets us mount one, a small tmpfs
holding DH_HOME filled to the last byte (ENOSPC, SQLite's "database or disk is full").

Expected: dh says so in one line and keeps trying; the harness keeps running (the limit is
dh's, not the harness's); nothing already committed is lost; when space returns the mirror
catches up and records how long it could not write. If space never returns before the
harness ends, dh exits with one `Error:` line, and `dh resume` later catches the log up."""

from __future__ import annotations

import errno
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dh_cli.worlds.local import LocalWorld
from tests.helpers.disk_full import Run, dh_limit, limited_then_freed


def test_file_size_limit_then_space_returns(tmp_path, dh_home):
    run = Run(tmp_path, dh_home, records=400, rate=40)
    limited_then_freed(run, run.proc, run.wait_logged(20))



def test_file_size_limit_until_the_harness_ends(tmp_path, dh_home):
    run = Run(tmp_path, dh_home, records=200, rate=50)
    before = run.wait_logged(20)
    dh_limit(run.proc, 4096)
    _, err = run.proc.communicate(timeout=60)
    assert run.proc.returncode == 3, err
    lines = err.strip().splitlines()
    assert lines[-1].startswith("Error: cannot write the log") and "Traceback" not in err
    assert all(not line.startswith("Error:") for line in lines[:-1])
    assert b'"stopReason":"stop"' in run.native().read_bytes()  # the harness finished its turn
    assert before <= run.logged() < run.native_lines()  # committed kept, the rest not yet
    (session,) = LocalWorld(dh_home / "dh.db").list_sessions()
    resumed = subprocess.run([sys.executable, "-m", "dh_cli", "resume", session["id"]],
                             cwd=tmp_path / "proj", env=run.env, capture_output=True, text=True,
                             timeout=60)
    assert resumed.returncode == 0, resumed.stderr
    assert "nothing to resume" in resumed.stderr  # logged the rest; launched nothing
    run.check_log_is_native()


def _mount_tmpfs(path: Path, size: str) -> bool:
    path.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", str(path)],
                          capture_output=True)
    return done.returncode == 0


def _fill(folder: Path) -> Path:
    """Take every free byte of the filesystem at folder."""
    filler = folder / "filler"
    # unbuffered: a buffered file keeps the part of a block the disk refused and raises
    # ENOSPC again from close(), outside the try (seen in a full run)
    with open(filler, "wb", buffering=0) as handle:
        block = b"\0" * 65536
        try:
            while True:
                handle.write(block)
        except OSError as exc:
            assert exc.errno == errno.ENOSPC
    return filler


def test_full_tmpfs_then_space_returns(tmp_path):
    mount = tmp_path / "small"
    if not _mount_tmpfs(mount, "128m"):
        pytest.skip("cannot mount a tmpfs here (needs CAP_SYS_ADMIN)")
    try:
        run = Run(tmp_path, mount / "dh-home", records=400, rate=40)
        run.wait_logged(20)
        filler = _fill(mount)
        time.sleep(2.5)
        stuck = run.logged()
        assert run.harness_alive() and run.native_lines() > stuck + 20
        filler.unlink()
        run.wait_logged(stuck + 20, timeout=15)
        _, err = run.proc.communicate(timeout=60)
        assert run.proc.returncode == 0, err
        assert "database or disk is full" in err and "mirroring has caught up" in err
        run.check_log_is_native()
        assert [e for e in run.events() if e.type == "log_write_failed"]
    finally:
        subprocess.run(["umount", "-l", str(mount)], capture_output=True)


def _commit_unfolded(world, pages: int) -> int:
    """Commit `pages` pages of rows the checkpointer has not folded into the log yet (as a
    run leaves them between two checkpoints); the WAL's size after."""
    import os

    world.conn.execute("PRAGMA wal_autocheckpoint=0")
    for n in range(pages // 64):
        world._insert("ws_objects", {"hash": f"{n:064x}", "kind": "blob", "size": 0, "codec": 0,
                                     "data": os.urandom(64 * 4096)})
    return os.path.getsize(world.path.parent / "dh.db-wal")


@pytest.mark.parametrize("unfolded", [0, 512], ids=["folded", "earlier-commits-unfolded"])
def test_a_write_the_full_disk_refused_leaves_no_wal_holding_it(tmp_path, unfolded):
    """A big write (a snapshot's objects) fails on a full disk: its WAL frames would hold the
    disk full after it, and the next command failed. The WAL is given back, also when it
    holds earlier commits not yet folded into the log (2 MB of them: folding them in needs
    room the failed write took); the next command works, and while the disk is full it says
    so in one line, as `dh doctor` does."""
    import os
    import sqlite3

    mount = tmp_path / "small"
    if not _mount_tmpfs(mount, "16m"):
        pytest.skip("cannot mount a tmpfs here (needs CAP_SYS_ADMIN)")
    try:
        home = mount / "dh-home"
        env = {**os.environ, "DH_HOME": str(home)}
        world = LocalWorld(home / "dh.db")
        world.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # as dh's checkpointer keeps it
        if unfolded:
            assert _commit_unfolded(world, unfolded) > unfolded * 4096  # in the WAL only
        blob = os.urandom(4 << 20)  # incompressible
        with pytest.raises(sqlite3.OperationalError):
            world._insert("ws_objects", {"hash": "a" * 64, "kind": "blob", "size": 0, "codec": 0,
                                         "data": blob * 8})
        assert os.path.getsize(home / "dh.db-wal") == 0  # nothing left holding the disk
        assert world.conn.execute("SELECT COUNT(*) FROM ws_objects").fetchone()[0] == unfolded // 64
        world.close()
        listed = subprocess.run([sys.executable, "-m", "dh_cli", "log", "list"], env=env,
                                capture_output=True, text=True, timeout=60)
        assert listed.returncode == 0, listed.stderr
        check = LocalWorld(home / "dh.db")  # every earlier commit is still in the log
        assert check.conn.execute("SELECT COUNT(*) FROM ws_objects").fetchone()[0] == unfolded // 64
        check.close()
        filler = _fill(mount)
        full = subprocess.run([sys.executable, "-m", "dh_cli", "log", "list"], env=env,
                              capture_output=True, text=True, timeout=60)
        (line,) = full.stderr.strip().splitlines()
        assert full.returncode == 3 and line.startswith("Error: the disk holding the log"), full.stderr
        doctor = subprocess.run([sys.executable, "-m", "dh_cli", "doctor"], env=env,
                                capture_output=True, text=True, timeout=60)
        assert "fail log disk: the disk holding the log" in doctor.stdout + doctor.stderr
        filler.unlink()
        again = subprocess.run([sys.executable, "-m", "dh_cli", "log", "list"], env=env,
                               capture_output=True, text=True, timeout=60)
        assert again.returncode == 0, again.stderr
    finally:
        subprocess.run(["umount", "-l", str(mount)], capture_output=True)
