"""What a `dh run` loads before it launches: no pydantic when nothing needs it (typer's
coercion of text values and absent options, dh_cli/cliparams.py; settings that are all
defaults, dh_cli/config.py), and the same values and errors as before when something does.
The CPU it saves is measured by bench/bench_startup.py, not here."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from dh_cli import config
from dh_cli.commands import run as runcli

ROOT = Path(__file__).resolve().parent.parent
WRITER = ROOT / "tests" / "fakes" / "pi_writer.py"
# prints, once dh has exited, whether it imported pydantic, and the options it ran with
PROBE = """
import atexit, sys
from dh_cli.resume import plan
seen = {}
def start_run(world, harness, args, opts):
    seen.update(harness=harness, args=args, grace=opts.tool_grace, restarts=opts.policy.max_restarts)
    return 0
plan.start_run = start_run
import dh_cli.commands.run
dh_cli.commands.run.start_run = start_run
atexit.register(lambda: print("pydantic" in sys.modules, seen, file=sys.stderr))
from dh_cli.cli import main
sys.argv[0] = "dh"
main()
"""


def probe(tmp_path, *args, **env) -> tuple[int, str]:
    cwd = tmp_path / "proj"
    cwd.mkdir(exist_ok=True)
    done = subprocess.run([sys.executable, "-c", PROBE, *args], cwd=cwd, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT), **env}, timeout=60)
    return done.returncode, done.stderr.strip().splitlines()[-1]


def test_a_plain_dh_run_imports_no_pydantic(tmp_path):
    code, last = probe(tmp_path, "run", "pi", "--", "-p", "go")
    assert code == 0
    assert last == "False {'harness': 'pi', 'args': ['-p', 'go'], 'grace': 3.0, 'restarts': 5}"


@pytest.mark.parametrize("args,env,expected", [
    (["--max-restarts", "2"], {}, "'grace': 3.0, 'restarts': 2"),  # a number: typer's own coercion
    ([], {"DH_TOOL_GRACE": "1.5"}, "'grace': 1.5, 'restarts': 5"),  # a setting: validated
])
def test_a_value_to_convert_or_validate_still_goes_through_pydantic(tmp_path, args, env, expected):
    code, last = probe(tmp_path, "run", "pi", *args, "--", "-p", "go", **env)
    assert code == 0
    assert last.startswith("True {'harness': 'pi', 'args': ['-p', 'go'], ")
    assert last.endswith(expected + "}")


def test_a_bad_number_is_still_a_usage_error(tmp_path):
    cwd = tmp_path / "proj"
    cwd.mkdir()
    done = subprocess.run([sys.executable, "-m", "dh_cli", "run", "pi", "--max-restarts", "many",
                           "--", "-p", "go"], cwd=cwd, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT), "DH_PI_BIN": f"{sys.executable} {WRITER}"})
    assert done.returncode == 2
    assert "Invalid value for '--max-restarts'" in done.stderr


def test_run_options_without_any_setting_are_the_validated_defaults(monkeypatch):
    plain = runcli._options(None, None, None, None)
    monkeypatch.setenv("DH_TOOL_GRACE", "3")  # the default's value, given: validated by pydantic
    validated = runcli._options(None, None, None, None)
    assert (plain.tool_grace, plain.policy, plain.replay, plain.continue_prompt) == \
        (validated.tool_grace, validated.policy, validated.replay, validated.continue_prompt)
    assert config.load(env={}).settings == config.load(env={"DH_TOOL_GRACE": "3"}).settings


def test_validation_keeps_every_constraint():
    for variable, value in [("DH_MAX_RESTARTS", "-1"), ("DH_BACKOFF_CAP", "0"), ("DH_LEASE_TTL", "0"),
                            ("DH_WORLD", "mars"), ("DH_STALL_TIMEOUT", "-2"), ("DH_REPLAY", "bash=maybe")]:
        with pytest.raises(config.ConfigError, match=rf"from \${variable}"):
            config.load(env={variable: value})
