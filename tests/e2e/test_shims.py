"""Issue 18, end to end: the REAL Claude Code and Pi, headless, typed by their own names with
dh's shims first on PATH. The shim runs `dh run`, dh finds the real binary behind the shim
(npm-style links named `claude` and `pi`, not DH_<HARNESS>_BIN), and a SIGKILL of the harness
while a model call is stalled is resumed as under `dh run`: the turn completes and every
finished reply was requested once at the fake model."""

from __future__ import annotations

import os
import signal
import subprocess

import pytest

from dh_cli import shims
from dh_cli.wrappers import get
from tests.rig import HEADLESS_ARGS

from tests.helpers.real_runs import (STALL_SCRIPT, check_log_holds_every_record_once, logged,
                                     check_no_rebilling, events, final_text_logged, finish,
                                     launched_pid, read)

pytestmark = pytest.mark.e2e

SYSTEM = "/usr/bin:/bin"  # sh, and node for Pi; no harness lives there


def real_links(rig, installed) -> dict[str, str]:
    """The real binaries under their own names, as npm links them into node_modules/.bin."""
    folder = rig.tmp / "real-bin"
    folder.mkdir()
    links = {"claude": installed.bins["claude-code"][0], "pi": installed.bins["pi"][-1]}
    for name, target in links.items():
        os.symlink(target, folder / name)
    return {name: str(folder / name) for name in links}


def spawn_through_shim(rig, binary: str, path: str, harness: str) -> subprocess.Popen:
    env = {k: v for k, v in rig.env.items() if not (k.startswith("DH_") and k.endswith("_BIN"))}
    env["PATH"] = path
    out = open(rig.tmp / "dh-stdout.txt", "wb")
    return subprocess.Popen([str(rig.tmp / "shims" / binary), *HEADLESS_ARGS[harness]("Create the files.")],
                            cwd=rig.proj, env=env, stdin=subprocess.DEVNULL, stdout=out,
                            stderr=subprocess.PIPE)


@pytest.mark.parametrize("harness", ["claude-code", "pi"])
def test_real_harness_through_a_shim_crash_then_resume(real_rig, installed, harness):
    rig = real_rig(STALL_SCRIPT)
    real = real_links(rig, installed)
    binary = get(harness).binary
    shims.install([get(harness)], rig.tmp / "shims")
    # the shims first; a Node >= 22.19 next for Pi 1.x (the newest set), as a user's PATH has it
    path = ":".join([str(rig.tmp / "shims"), *installed.path_first, str(rig.tmp / "real-bin"), SYSTEM])
    dh = spawn_through_shim(rig, binary, path, harness)
    rig.server.wait_for(lambda log: any(e.get("reply_index") == 1 for e in log), timeout=240)
    # Claude Code may send reply #1's request before its tool rows are on disk (seen under
    # load; test_real_harnesses.py says more): kill once the tool result is in the log
    rig.server.wait_for(lambda _log: logged(rig, "tool_result") >= 1, timeout=60)
    os.killpg(launched_pid(rig), signal.SIGKILL)
    code, err = finish(dh)
    assert code == 0, err
    assert f"{harness} killed by SIGKILL; resuming session" in err
    launches = [e.details["argv"][0] for e in events(rig) if e.type == "launch"]
    assert launches == [real[binary], real[binary]]  # the real binary both times, never the shim
    check_no_rebilling(rig)
    assert rig.server.completed_counts() == {0: 1, 1: 1, 2: 1, 3: 1}
    assert read(rig.proj / "steps.log") == "step0\n"
    assert read(rig.proj / "a.txt") == "alpha\n"
    assert final_text_logged(rig)
    check_log_holds_every_record_once(rig, harness)
