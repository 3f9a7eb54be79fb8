"""The live mirror is live from a session's first record (issue 20), over the real programs:
dh and the harness are SIGKILLed together at several moments in the first seconds of a
session, and every record that was on the harness's disk 50 ms before the kill is in dh's log
(seen: Codex 0.171 had 14 records on disk for 0.5 s and more, the log held 2)."""

from __future__ import annotations

import json
import os
import signal
import time

import pytest

from dh_cli.resume.rebuild import source_bytes
from dh_cli.wrappers.opencode_rows import row_key
from tests.e2e.native_sampler import Sampler
from tests.helpers.real_runs import launched_pid, leftover_processes, spawn_dh
from tests.rig import HARNESSES

# timing: what was on disk SLACK s before the kill must be logged, a bound on the mirror's lag
pytestmark = [pytest.mark.e2e, pytest.mark.timing]

# Short steps, each reply a little late: the session keeps writing through its first seconds.
LAG_SCRIPT = {"replies": [*({"text": f"Step {i}.", "shell": f"echo s{i} >> steps.log",
                             "delay_s": 0.2} for i in range(8)), {"text": "All done."}]}
KILL_AFTER = (0.05, 0.5, 1.5)  # seconds after the first record appeared on disk
SLACK = 0.05  # what was on disk this long before the kill must be logged
HOMES = {"claude-code": ".claude", "codex": ".codex", "pi": "pi-agent",
         "opencode": ".local/share/opencode/opencode.db"}


def logged_records(rig) -> tuple[dict, set]:
    """(relpath -> logged lines) for JSONL sources, and the set of logged OpenCode rows."""
    world = rig.world()
    try:
        lines, rows = {}, set()
        for session in world.list_sessions():
            for source in world.sources(session["id"]):
                if source.kind == "opencode":
                    rows.update(r.raw for r in world.records(session["id"], source.id))
                else:
                    lines[source.relpath] = source_bytes(world, source).splitlines(keepends=True)
        return lines, rows
    finally:
        world.close()


def missing_from_log(rig, sampler: Sampler, moment: float) -> list:
    lines, rows = logged_records(rig)
    on_disk, missing = sampler.state_at(moment), []
    for (key, index), raw in on_disk.items():
        if isinstance(index, int) and key in lines or not rows:
            got = lines.get(key, [])
            if index >= len(got) or got[index] != raw:
                missing.append((key, index))
        elif not _row_logged(rows, sampler, key, raw):
            missing.append((key, index))
    return missing


def _row_logged(rows: set, sampler: Sampler, key: str, raw: bytes) -> bool:
    """The row version on disk, or one the harness wrote after it, is in the log."""
    if raw in rows:
        return True
    seen = sampler.first_seen.get(((key, 0), raw), 0.0)
    return any(row_key(json.loads(r)) == key and sampler.first_seen.get(((key, 0), r), 0.0) > seen
               for r in rows)


@pytest.mark.parametrize("after", KILL_AFTER)
@pytest.mark.parametrize("harness", HARNESSES)
def test_records_on_disk_before_a_kill_are_logged(real_rig, harness, after):
    rig = real_rig(LAG_SCRIPT)
    sampler = Sampler(harness, rig.tmp / HOMES[harness]).start()
    dh = spawn_dh(rig, harness)
    try:
        pgid = launched_pid(rig)
        deadline = time.monotonic() + 120
        while sampler.first_record_at() is None:
            assert time.monotonic() < deadline and dh.poll() is None, "the harness wrote nothing"
            time.sleep(0.005)
        kill_at = sampler.first_record_at() + after
        time.sleep(max(0.0, kill_at - time.monotonic()))
        moment = time.monotonic()
        dh.send_signal(signal.SIGKILL)
        try:
            os.killpg(pgid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        dh.wait(timeout=30)
    finally:
        sampler.stop()
        for proc in leftover_processes(rig.tmp):
            proc.kill()
    on_disk = sampler.state_at(moment - SLACK)
    missing = missing_from_log(rig, sampler, moment - SLACK)
    assert not missing, f"{len(missing)} of {len(on_disk)} records on disk {SLACK} s before the kill are not logged: {missing[:5]}"
