"""The log cannot be written while the shared mirror holds the session (a full disk, seen by
the process that writes the records: the server). The server says so through its client, in
the same lines as the in-process mirror (tests/test_disk_full.py, which runs with the shared
mirror off and limits the `dh run` process), keeps trying, catches up when space returns and
records how long it could not write; the harness runs on throughout."""

from __future__ import annotations

import resource
import sys
import time

import pytest

from dh_cli.mirror.shared_wire import server_pid

from .test_disk_full import Run, dh_limit
from .test_shared_mirror import alive, threads, wait_for

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the shared mirror is Linux only")


class Limited:
    def __init__(self, pid: int):
        self.pid = pid


def test_the_server_cannot_write_the_log_then_space_returns(tmp_path, dh_home):
    run = Run(tmp_path, dh_home, records=400, rate=40, DH_SHARED_MIRROR="1")
    before = run.wait_logged(20)
    wait_for(lambda: "dh-shared-cl" in threads(run.proc.pid), "the session handed over")
    server = Limited(server_pid(dh_home / "dh.db"))
    dh_limit(server, 4096)  # every write to dh.db or dh.db-wal by the server fails with EFBIG
    time.sleep(2.5)
    stuck = run.logged()
    assert stuck >= before  # what was committed stays
    time.sleep(1)
    assert run.logged() == stuck, "the server wrote past its file-size limit"
    assert run.harness_alive() and run.native_lines() > stuck + 20  # the harness kept going
    assert "dh-mirror" not in threads(run.proc.pid)  # still the server's session, no takeover
    dh_limit(server, resource.RLIM_INFINITY)  # space is back
    run.wait_logged(stuck + 20, timeout=15)  # the server catches up while the harness runs
    _, err = run.proc.communicate(timeout=60)
    assert run.proc.returncode == 0, err
    assert "cannot write the log" in err and "the harness keeps running" in err
    assert "the log can be written again; mirroring has caught up" in err
    assert "Traceback" not in err and "Error:" not in err
    run.check_log_is_native()
    (failed,) = [e for e in run.events() if e.type == "log_write_failed"]
    assert failed.details["seconds"] >= 2 and "cannot write the log" in failed.details["error"]
    assert alive(server.pid)  # it failed writes, it did not die
