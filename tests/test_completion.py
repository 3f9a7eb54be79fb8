"""Shell completion and man pages as a user gets them: from an installed dh (`pip install`
into a folder of its own, run away from the repository), and bash completing harness names,
session ids and states through the generated script in a real bash."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from dh_cli import _gen_docs
from dh_cli.wrappers import REGISTRY

from .helpers.crashed import crashed  # noqa: F401 (a fixture)

ROOT = Path(__file__).parent.parent


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """dh installed by pip from a copy of the source (no repository files beside it)."""
    base = tmp_path_factory.mktemp("installed")
    source = base / "source"
    shutil.copytree(ROOT / "dh_cli", source / "dh_cli", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    site = base / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(site),
                    str(source)], check=True, capture_output=True, timeout=600)
    return site


def _installed_dh(site: Path, *args) -> str:
    env = {**os.environ, "PYTHONPATH": str(site)}
    done = subprocess.run([str(site / "bin" / "dh"), *args], capture_output=True, text=True,  # its entry point
                          env=env, cwd=site.parent, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.parametrize("shell,name", list(_gen_docs.SHELLS.items()))
def test_an_installed_dh_prints_its_completion_script(installed, shell, name):
    assert (installed / "dh_cli" / "cli.py").exists() and not (installed / "completions").exists()
    assert _installed_dh(installed, "completion", shell) == (ROOT / "completions" / name).read_text()


@pytest.mark.parametrize("argv,page", [([], "dh.1"), (["log"], "dh-log.1"), (["run"], "dh.1"),
                                        (["world"], "dh-world.1")])
def test_an_installed_dh_prints_its_man_pages(installed, argv, page):
    assert _installed_dh(installed, "man", *argv) == (ROOT / "man" / page).read_text()


def test_man_names_the_pages_for_an_unknown_command(run_dh, capsys):
    assert run_dh("man", "nope").exit_code == 2
    assert capsys.readouterr().err.startswith("Error: no command 'nope'; the pages are dh and dh-log")


def _bash_complete(line: str, bin_dir: Path) -> list[str]:
    """What bash offers for `line` through completions/dh.bash (the words as bash splits them)."""
    script = (f"source {ROOT / 'completions' / 'dh.bash'}\n"
              f"COMP_WORDS=({line}); COMP_CWORD={len(line.split()) - (0 if line.endswith(' ') else 1)}\n"
              + ("COMP_WORDS+=('')\n" if line.endswith(" ") else "")
              + "_dh_completion dh\nprintf '%s\\n' \"${COMPREPLY[@]}\"\n")
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "PYTHONPATH": str(ROOT)}
    done = subprocess.run(["bash", "--norc", "--noprofile", "-c", script], capture_output=True,
                          text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    return [w for w in done.stdout.splitlines() if w]


@pytest.fixture
def dh_on_path(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "dh").write_text(f"#!/bin/sh\nexec {sys.executable} -m dh_cli \"$@\"\n")
    (bin_dir / "dh").chmod(0o755)
    return bin_dir


@pytest.mark.parametrize("line,expected", [
    ("dh run ", sorted({n for w in REGISTRY.values() for n in (w.name, *w.aliases)})),  # names, aliases
    ("dh import co", ["codex"]),
    ("dh log list --harness o", ["opencode"]),
    ("dh log list --state c", ["crashed"]),
    ("dh completion ", ["bash", "zsh", "fish"]),
])
def test_bash_completes_harness_names_and_states(line, expected, dh_on_path):
    assert _bash_complete(line, dh_on_path) == expected


def test_bash_completes_the_session_ids_in_the_log(crashed, dh_on_path):
    session_id = crashed[0]
    assert _bash_complete(f"dh log show {session_id[:3]}", dh_on_path) == [session_id]
    assert _bash_complete("dh resume ", dh_on_path) == [session_id]
    assert _bash_complete("dh log show zz", dh_on_path) == []
