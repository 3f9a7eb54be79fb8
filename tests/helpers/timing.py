"""Tests marked `timing` hold a wall-clock bound (a reader not blocked "within 1.5 s", a fake
server's delay). On a loaded machine such a bound fails while the code is right, so they do
not run beside the others: the main run (both xdist workers) leaves them out, and once it
has ended they run apart in one serial pytest process; a test that fails there runs once
more, and only a second failure fails the run. `python -m pytest` does all of it, so CI runs
the README's command unchanged; `-m timing` runs them alone, in the run asked for.

tests/conftest.py calls these hooks; tests/test_wall_clock.py finds an unmarked bound."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

MARK = "timing"
SUB_RUN = "DH_TIMING_RUN"  # set in the serial run, which must not leave them out again
KEY = "dh_timing"  # the left-out node ids, sent by each xdist worker to the controller


def _asked_for(config) -> bool:
    return MARK in (config.getoption("markexpr") or "") or os.environ.get(SUB_RUN) == "1"


def leave_out(config, items: list) -> None:
    """pytest_collection_modifyitems: the timing tests out of the main run, remembered."""
    if _asked_for(config):
        return
    left = [item for item in items if item.get_closest_marker(MARK)]
    if left:
        items[:] = [item for item in items if not item.get_closest_marker(MARK)]
        config.hook.pytest_deselected(items=left)
    config.stash.setdefault(_stash, []).extend(_plain_id(item) for item in left)


def _plain_id(item) -> str:
    """The node id a new pytest run finds: --dist loadgroup has added `@GROUP` to the ids of
    tests with an xdist_group mark (every e2e test), which no collection knows."""
    mark = item.get_closest_marker("xdist_group")
    group = (mark.args[0] if mark.args else mark.kwargs.get("name")) if mark else None
    return item.nodeid.removesuffix(f"@{group}") if group else item.nodeid


_stash = pytest.StashKey[list]()


def worker_done(config) -> None:
    """pytest_sessionfinish in an xdist worker: its left-out ids go to the controller."""
    if hasattr(config, "workeroutput"):
        config.workeroutput[KEY] = config.stash.get(_stash, [])


def node_down(config, node) -> None:
    """pytest_testnodedown in the controller."""
    config.stash.setdefault(_stash, []).extend(getattr(node, "workeroutput", {}).get(KEY, []))


def run_apart(session) -> None:
    """pytest_sessionfinish in the controller (or a run without xdist): the serial run."""
    config = session.config
    ids = sorted(set(config.stash.get(_stash, [])))
    if hasattr(config, "workeroutput") or not ids or session.shouldstop or config.option.collectonly:
        return
    failed = _run(config, ids)
    if failed:
        print(f"\n[timing] {len(failed)} failed; once more: {' '.join(failed)}", flush=True)
        failed = _run(config, failed)
    if session.exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED):
        # a run of timing tests alone collected nothing in the main run
        session.exitstatus = pytest.ExitCode.TESTS_FAILED if failed else pytest.ExitCode.OK


def _run(config, ids: list[str]) -> list[str]:
    """The node ids that failed in a serial pytest run of `ids`."""
    print(f"\n[timing] {len(ids)} wall-clock tests, apart and one at a time", flush=True)
    with tempfile.TemporaryDirectory(prefix="dh-timing-") as folder:
        report = Path(folder) / "report.xml"
        argv = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "0", "-m", MARK,
                f"--junitxml={report}", "-q", *ids]
        code = subprocess.run(argv, cwd=config.rootpath, env={**os.environ, SUB_RUN: "1"}).returncode
        if code == pytest.ExitCode.OK:
            return []
        failed = _failures(report) if report.exists() else set()
        return [i for i in ids if _junit_name(i) in failed] or ids


def _failures(report: Path) -> set[tuple[str, str]]:
    return {(case.get("classname", ""), case.get("name", "")) for case in ET.parse(report).iter("testcase")
            if case.find("failure") is not None or case.find("error") is not None}


def _junit_name(nodeid: str) -> tuple[str, str]:
    """(classname, name) as --junitxml writes a node id: tests/a.py::C::t -> (tests.a.C, t)."""
    path, *parts = nodeid.split("::")
    return ".".join([path.removesuffix(".py").replace("/", "."), *parts[:-1]]), parts[-1]
