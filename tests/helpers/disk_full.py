"""A `dh run` whose log's writer gets a file-size limit (a full disk, as the kernel reports it
to that process alone), then none: for the in-process mirror (tests/test_disk_full.py) and the
shared mirror (tests/test_shared_mirror_disk.py)."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import time
from pathlib import Path

from dh_cli.resume.rebuild import source_bytes
from dh_cli.worlds.local import LocalWorld
from tests.helpers.readonly import query_read_only
from tests.helpers.wait import wait_until


WRITER = Path(__file__).parent.parent / "fakes" / "pi_writer.py"


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
        return query_read_only(self.dh_home / "dh.db", "SELECT COUNT(*) FROM records",
                               [(-1,)], timeout=1)[0][0]

    def wait_logged(self, count: int, timeout: float = 30) -> int:
        return wait_until(lambda: (now := self.logged()) >= count and now, f"{count} records logged",
                          timeout, explain=lambda: f"(only {self.logged()})")

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

