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
import os
import resource
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dh_cli.resume.rebuild import source_bytes
from dh_cli.worlds.local import LocalWorld

WRITER = Path(__file__).parent / "fakes" / "pi_writer.py"


class Run:
    """`dh run pi` over the tiny Pi-format writer: `records` entries at `rate` per second."""

    def __init__(self, tmp: Path, dh_home: Path, records: int = 300, rate: float = 40, **env):
        self.tmp, self.dh_home = tmp, dh_home
        (tmp / "proj").mkdir(exist_ok=True)
        self.env = {**os.environ, "DH_HOME": str(dh_home), "PI_CODING_AGENT_DIR": str(tmp / "pi-agent"),
                    "DH_PI_BIN": f"{sys.executable} {WRITER}", "DH_WRITER_RECORDS": str(records),
                    "DH_WRITER_RATE": str(rate), "DH_RAISE_ERRORS": "",
                    # the limit is put on the `dh run` process: it must be the log's writer
                    # (the shared mirror's case: tests/test_shared_mirror_disk.py)
                    "DH_SHARED_MIRROR": "0", **env}
        LocalWorld(dh_home / "dh.db").close()  # the log exists before the disk fills
        self.proc = subprocess.Popen([sys.executable, "-m", "dh_cli", "run", "pi", "--", "-p", "go"],
                                     cwd=tmp / "proj", env=self.env, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)

    def logged(self) -> int:
        try:
            conn = sqlite3.connect(f"file:{self.dh_home / 'dh.db'}?mode=ro", uri=True, timeout=1)
            try:
                return conn.execute("SELECT COUNT(*) FROM records").fetchone()[0]
            finally:
                conn.close()
        except sqlite3.Error:
            return -1

    def wait_logged(self, count: int, timeout: float = 30) -> int:
        deadline = time.monotonic() + timeout
        while (now := self.logged()) < count:
            assert time.monotonic() < deadline, f"only {now} records logged"
            time.sleep(0.05)
        return now

    def native(self) -> Path:
        (path,) = (self.tmp / "pi-agent" / "sessions").rglob("*.jsonl")
        return path

    def native_lines(self) -> int:
        return len(self.native().read_bytes().splitlines())

    def harness_alive(self) -> bool:
        import psutil

        return any(str(WRITER) in " ".join(p.info["cmdline"] or [])
                   for p in psutil.process_iter(["cmdline"]))

    def check_log_is_native(self) -> None:
        world = LocalWorld(self.dh_home / "dh.db")
        (session,) = world.list_sessions()
        (source,) = world.sources(session["id"])
        assert source_bytes(world, source) == self.native().read_bytes()
        assert world.source_stats(source.id)[0] == 1  # one generation: nothing read twice

    def events(self) -> list:
        world = LocalWorld(self.dh_home / "dh.db")
        (session,) = world.list_sessions()
        return world.events(session["id"])


def dh_limit(proc: subprocess.Popen, size: int) -> None:
    """Limit the size of files the dh process (and only it) may write."""
    resource.prlimit(proc.pid, resource.RLIMIT_FSIZE, (size, resource.RLIM_INFINITY))


def test_file_size_limit_then_space_returns(tmp_path, dh_home):
    run = Run(tmp_path, dh_home, records=400, rate=40)
    limited_then_freed(run, run.proc, run.wait_logged(20))


def limited_then_freed(run: Run, writer, before: int, meanwhile=lambda: None) -> None:
    """The log's writer (`dh run`, or the shared mirror) gets a file-size limit, then none:
    what was committed stays, the harness keeps going, the writer catches up, one notice
    each way and one event, and the log ends equal to the native file."""
    dh_limit(writer, 4096)  # every write to dh.db or dh.db-wal now fails with EFBIG
    time.sleep(2.5)
    stuck = run.logged()
    assert stuck >= before  # what was committed stays
    time.sleep(1)
    assert run.logged() == stuck, "the log's writer wrote past its file-size limit"
    assert run.harness_alive() and run.native_lines() > stuck + 20  # the harness kept going
    meanwhile()
    dh_limit(writer, resource.RLIM_INFINITY)  # space is back
    run.wait_logged(stuck + 20, timeout=15)  # the mirror catches up while the harness runs
    _, err = run.proc.communicate(timeout=60)
    assert run.proc.returncode == 0, err
    assert "cannot write the log" in err and "the harness keeps running" in err
    assert "the log can be written again; mirroring has caught up" in err
    assert "Traceback" not in err and "Error:" not in err
    run.check_log_is_native()
    (failed,) = [e for e in run.events() if e.type == "log_write_failed"]
    assert failed.details["seconds"] >= 2 and "cannot write the log" in failed.details["error"]


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
    with open(filler, "wb") as handle:
        block = b"\0" * 65536
        try:
            while True:
                handle.write(block)
                handle.flush()
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
