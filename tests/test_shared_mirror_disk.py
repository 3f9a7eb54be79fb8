"""The log cannot be written while the shared mirror holds the session (a full disk, seen by
the process that writes the records: the server). The server says so through its client, in
the same lines as the in-process mirror (tests/test_disk_full.py, which runs with the shared
mirror off and limits the `dh run` process), keeps trying, catches up when space returns and
records how long it could not write; the harness runs on throughout."""

from __future__ import annotations

import sys

import pytest

from dh_cli.mirror.shared_wire import server_pid

from .helpers.disk_full import Run, limited_then_freed
from .helpers.processes import alive, threads
from .helpers.wait import wait_until

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the shared mirror is Linux only")


class Limited:
    def __init__(self, pid: int):
        self.pid = pid


def test_the_server_cannot_write_the_log_then_space_returns(tmp_path, dh_home):
    run = Run(tmp_path, dh_home, records=400, rate=40, DH_SHARED_MIRROR="1")
    before = run.wait_logged(20)
    wait_until(lambda: "dh-shared-cl" in threads(run.proc.pid), "the session handed over")
    server = Limited(server_pid(dh_home / "dh.db"))
    # still the server's session through the failing writes: no takeover by the client
    limited_then_freed(run, server, before, lambda: _not_taken_back(run))
    assert alive(server.pid)  # it failed writes, it did not die


def _not_taken_back(run) -> None:
    assert "dh-mirror" not in threads(run.proc.pid)
