"""Issue 18: `dh demo` runs a scripted harness and model through dh's real supervision: the
harness is killed mid model call, dh repairs and resumes it; the model served each finished
reply once; no process and no temporary folder is left (bench/bench_demo.py times it)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil

from dh_cli.wrappers import REGISTRY, names


def demo_processes(marker: str) -> list[psutil.Process]:
    """Processes started from the demo's temporary folder (the demo harness)."""
    found = []
    for proc in psutil.process_iter(["cmdline", "status"]):
        cmdline = " ".join(proc.info["cmdline"] or [])
        # `--version`: dh asks the harness its version before the launch (versions.py); the
        # sampler can see that probe and the harness it precedes in one pass of the table
        if (marker in cmdline and proc.info["status"] != psutil.STATUS_ZOMBIE
                and not cmdline.endswith(" --version")):
            found.append(proc)
    return found


def run_demo(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess, int]:
    """The demo, piped, with its own TMPDIR; returns (result, most harnesses seen at once)."""
    temp = tmp_path / "tmp"
    temp.mkdir()
    env = {**os.environ, "TMPDIR": str(temp), "DH_HOME": str(tmp_path / "user-dh-home"),
           "NO_COLOR": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "dh_cli", "demo", *args], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    most, seen = [0], set()

    def sample():
        while proc.poll() is None:
            now = demo_processes(str(temp))
            seen.update(p.pid for p in now)
            most[0] = max(most[0], len(now))
            time.sleep(0.01)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    out, err = proc.communicate(timeout=120)
    sampler.join(10)
    assert seen, "the sampler never saw the demo harness"
    return subprocess.CompletedProcess(proc.args, proc.returncode, out.decode(), err.decode()), most[0]


def test_demo_kills_repairs_resumes_and_leaves_nothing(tmp_path):
    done, most = run_demo(tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert "the demo kills the harness (pid" in out and "with SIGKILL, mid-call" in out
    assert re.search(r"dh: dh-demo killed by SIGKILL; resuming session \w+ \(attempt 2", out)
    assert "rebuilt from the log" in out  # dh log show: the repair of the torn session file
    assert re.search(r"repaired: dropped the half-written reply \([1-9]\d* bytes\)", out)
    assert "resumed: attempt 2, state finished" in out
    assert "1 finished model call not paid again" in out
    assert "the model served: reply 1 ×1, reply 2 ×1; cut by the kill and asked again: reply 2" in out
    assert "the tool step ran 1 time" in out and "last turn: complete" in out
    assert "\x1b[" not in out  # plain when piped
    assert most == 1  # never two harnesses at once
    assert demo_processes(str(tmp_path / "tmp")) == []
    assert list((tmp_path / "tmp").iterdir()) == []  # the temporary folder is gone
    assert not (tmp_path / "user-dh-home").exists()  # the user's log was never touched


def test_demo_keep_keeps_a_readable_log(tmp_path):
    done, _ = run_demo(tmp_path, "--keep")
    assert done.returncode == 0, done.stdout + done.stderr
    (folder,) = (tmp_path / "tmp").iterdir()
    sid = re.search(r"dh log show (\w+)\n", done.stdout).group(1)
    assert f"kept {folder}; read it again with: DH_HOME={folder / 'dh-home'} dh log show {sid}" in done.stdout
    env = {**os.environ, "DH_HOME": str(folder / "dh-home")}
    shown = subprocess.run([sys.executable, "-m", "dh_cli", "log", "show", sid, "--json"], env=env,
                           capture_output=True, text=True)
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["session"]["state"] == "finished"
    assert "dh-demo" not in names() and all(w.name != "dh-demo" for w in REGISTRY.values())
