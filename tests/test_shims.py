"""Issue 18: shims. `dh shim install` writes launchers named like the harness binaries; with
the shim folder first on PATH, typing the harness's name runs it under dh, which finds the
real binary behind the shim (here the fake harnesses, installed under their real names)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

from dh_cli import shims
from dh_cli.wrappers import REGISTRY, get

from .fakes.model_server import FakeModelServer
from .rig import HEADLESS_ARGS, SCRIPT, Rig

SYSTEM = "/usr/bin:/bin"  # sh and the coreutils the shims need; no harness lives there


@pytest.fixture
def rig(tmp_path):
    server = FakeModelServer(SCRIPT).start()
    rig = Rig(tmp_path, server)
    rig.shim_dir = tmp_path / "shims"
    assert rig.dh("shim", "install", "--dir", str(rig.shim_dir)).returncode == 0
    yield rig
    server.stop()


def typed(rig, name: str, path: str, *args: str, env: dict | None = None, crash: str | None = None):
    """What typing `name ARGS` in a shell with this PATH does."""
    full = {**rig.env, "PATH": path, **(env or {})}
    if crash:
        full.update(DH_FAKE_CRASH=crash, DH_FAKE_CRASH_ONCE=str(rig.tmp / "crashed"))
    exe = shutil.which(name, path=path)
    assert exe, f"{name} not on {path}"
    return subprocess.run([exe, *args], cwd=rig.proj, env=full, capture_output=True, timeout=120,
                          stdin=subprocess.DEVNULL)


def sessions(rig) -> list[dict]:
    return json.loads(rig.dh("log", "list", "--json").stdout)


def error_lines(done) -> list[str]:
    return [l for l in done.stderr.decode().splitlines() if l.strip()]


@pytest.mark.parametrize("harness", ["claude-code", "pi"])
def test_shim_first_runs_dh_which_runs_the_fake_and_resumes_a_crash(rig, harness):
    binary = get(harness).binary
    path = f"{rig.shim_dir}:{rig.bin_dir}:{SYSTEM}"
    done = typed(rig, binary, path, *HEADLESS_ARGS[harness]("Create the files."), crash="during-tool=1")
    assert done.returncode == 0, done.stderr.decode()
    assert (rig.tmp / "crashed").exists() and b"resuming session" in done.stderr
    (session,) = sessions(rig)
    assert (session["harness"], session["state"], session["attempts"]) == (harness, "finished", 2)
    launched = [e for e in rig.world().events(session["id"]) if e.type == "launch"]
    assert launched[0].details["argv"][0] == str(rig.bin_dir / binary)  # the fake, not the shim
    assert rig.server.rebilled() == 0, rig.server.completed_counts()
    assert (rig.proj / "steps.log").read_text() == "step0\n"


def test_shim_second_on_path_is_not_used(rig):
    path = f"{rig.bin_dir}:{rig.shim_dir}:{SYSTEM}"
    done = typed(rig, "pi", path, *HEADLESS_ARGS["pi"]("Create the files."))
    assert done.returncode == 0, done.stderr.decode()
    assert sessions(rig) == []  # the fake ran by itself
    assert (rig.proj / "steps.log").read_text() == "step0\n"


def test_a_shim_that_finds_only_itself_refuses(rig):
    done = typed(rig, "claude", f"{rig.shim_dir}:{SYSTEM}", "-p", "hi")
    assert done.returncode == 127
    (line,) = error_lines(done)
    assert line.startswith("Error: 'claude' on PATH is only dh's shim") and str(rig.shim_dir) in line
    assert sessions(rig) == []


def test_a_shim_that_finds_another_shim_refuses(rig):
    other = rig.tmp / "other-shims"
    shims.install([get("claude")], other)
    done = typed(rig, "claude", f"{rig.shim_dir}:{other}:{SYSTEM}", "-p", "hi")
    assert done.returncode == 127
    (line,) = error_lines(done)
    assert line.startswith("Error: 'claude' on PATH is only dh's shim")
    pointed = typed(rig, "claude", f"{rig.shim_dir}:{rig.bin_dir}:{SYSTEM}", "-p", "hi",
                    env={"DH_CLAUDE_BIN": str(other / "claude")})
    assert pointed.returncode == 127
    (line,) = error_lines(pointed)
    assert line.startswith(f"Error: DH_CLAUDE_BIN={other / 'claude'} is dh's shim")


def test_dh_disable_bypasses_dh(rig):
    path = f"{rig.shim_dir}:{rig.bin_dir}:{SYSTEM}"
    done = typed(rig, "pi", path, *HEADLESS_ARGS["pi"]("Create the files."), env={"DH_DISABLE": "1"})
    assert done.returncode == 0, done.stderr.decode()
    assert sessions(rig) == [] and (rig.proj / "steps.log").read_text() == "step0\n"
    alone = typed(rig, "pi", f"{rig.shim_dir}:{SYSTEM}", "-p", "x", env={"DH_DISABLE": "1"})
    assert alone.returncode == 127
    (line,) = error_lines(alone)
    assert line == "Error: DH_DISABLE is set but no real pi was found on PATH (only dh's shims)"


def test_remove_restores_the_original_lookup(rig):
    path = f"{rig.shim_dir}:{rig.bin_dir}:{SYSTEM}"
    assert shutil.which("claude", path=path) == str(rig.shim_dir / "claude")
    removed = rig.dh("shim", "remove", "--dir", str(rig.shim_dir))
    assert removed.returncode == 0 and removed.stdout.decode().count("removed ") == len(REGISTRY)
    assert shutil.which("claude", path=path) == str(rig.bin_dir / "claude")
    done = typed(rig, "pi", path, *HEADLESS_ARGS["pi"]("Create the files."))
    assert done.returncode == 0 and sessions(rig) == []


def test_install_never_replaces_a_real_binary(rig):
    before = (rig.bin_dir / "claude").read_bytes()
    done = rig.dh("shim", "install", "claude", "--dir", str(rig.bin_dir))
    assert done.returncode == 1
    (line,) = error_lines(done)
    assert line.startswith(f"Error: {rig.bin_dir / 'claude'} exists and is not a dh shim")
    assert (rig.bin_dir / "claude").read_bytes() == before
    assert rig.dh("shim", "remove", "--dir", str(rig.bin_dir)).returncode == 0
    assert (rig.bin_dir / "claude").read_bytes() == before  # not a shim: left alone


def test_install_prints_the_path_line(rig):
    folder = rig.tmp / "fresh"
    done = rig.dh("shim", "install", "pi", "--dir", str(folder))
    text = done.stdout.decode()
    assert f'export PATH="{folder}:$PATH"' in text and f"real pi: {rig.bin_dir / 'pi'}" in text
    listed = json.loads(rig.dh("shim", "list", "--dir", str(folder), "--json").stdout)
    assert [(s["name"], s["harness"], s["active"]) for s in listed] == [("pi", "pi", False)]


def doctor_shims(rig, path: str) -> dict[str, tuple[str, str]]:
    done = subprocess.run([sys.executable, "-m", "dh_cli", "doctor", "--json"], cwd=rig.proj,
                          env={**rig.env, "PATH": path}, capture_output=True, timeout=60)
    return {c["name"]: (c["status"], c["message"]) for c in json.loads(done.stdout)
            if c["name"].endswith(" shim")}


def test_doctor_reports_shadowing_shims(rig):
    first = doctor_shims(rig, f"{rig.shim_dir}:{rig.bin_dir}:{SYSTEM}")
    assert first["pi shim"][0] == "ok" and f"the real one is {rig.bin_dir / 'pi'}" in first["pi shim"][1]
    second = doctor_shims(rig, f"{rig.bin_dir}:{rig.shim_dir}:{SYSTEM}")
    assert second["pi shim"][0] == "warn" and "runs without dh" in second["pi shim"][1]
    alone = doctor_shims(rig, f"{rig.shim_dir}:{SYSTEM}")
    assert alone["pi shim"][0] == "fail" and "no real pi" in alone["pi shim"][1]
    assert doctor_shims(rig, f"{rig.bin_dir}:{SYSTEM}") == {}
