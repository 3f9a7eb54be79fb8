"""The config file: default < file < environment < flag, each value's origin shown by
`dh config show`, and a bad file reported as one Error line naming the file and the key."""

import json
import sys
import types
from pathlib import Path

import pytest

from dh_cli import config
from dh_cli.commands import run as runcli
from dh_cli.errors import ConfigError

CONFIG = """
stall_timeout = 300
continue_prompt = "Keep going."

[restart]
max_restarts = 2
backoff_cap = 10

[replay]
Bash = "never"
Read = "safe"
"""


@pytest.fixture
def config_file(tmp_path):
    path = tmp_path / "xdg-config" / "dh" / "config.toml"  # conftest points XDG_CONFIG_HOME here
    path.parent.mkdir(parents=True)
    path.write_text(CONFIG)
    return path


def test_defaults_without_a_file():
    effective = config.load(env={})
    assert effective.settings.restart.max_restarts == 5
    assert {o.source for o in effective.origins.values()} == {"default"}


def test_each_layer_overrides_the_one_below(config_file):
    env = {"DH_MAX_RESTARTS": "7", "DH_REPLAY": "bash=safe"}
    effective = config.load({"restart.max_restarts": 9, "tool_grace": None}, env=env)
    s, origins = effective.settings, effective.origins
    assert (s.stall_timeout, origins["stall_timeout"].source) == (300, "file")
    assert (s.restart.max_restarts, origins["restart.max_restarts"].source) == (9, "flag")
    assert (s.restart.backoff_cap, origins["restart.backoff_cap"].source) == (10, "file")
    assert (s.tool_grace, origins["tool_grace"].source) == (3.0, "default")
    assert s.replay == {"bash": "safe", "read": "safe"}
    assert origins["replay.bash"].name == "DH_REPLAY"


def test_dh_postgres_url_wins_over_the_workflow_name():
    env = {"WORKFLOW_POSTGRES_URL": "postgresql://w@h/db", "DH_POSTGRES_URL": "postgresql://d@h/db"}
    effective = config.load(env=env)
    assert effective.settings.postgres_url == "postgresql://d@h/db"
    assert effective.origins["postgres_url"].name == "DH_POSTGRES_URL"


def _config_with(line: str, monkeypatch):
    """dh_cli/config.py loaded as a module of its own with `line` added to TEAM_WORLDS."""
    source = Path(config.__file__).read_text(encoding="utf-8")
    assert "TEAM_WORLDS = {\n" in source
    module = types.ModuleType("dh_cli._config_plus_world")
    module.__package__ = "dh_cli"  # for its relative imports (errors, paths)
    monkeypatch.setitem(sys.modules, module.__name__, module)  # dataclasses look it up there
    exec(compile(source.replace("TEAM_WORLDS = {\n", "TEAM_WORLDS = {\n" + line, 1),
                 config.__file__, "exec"), module.__dict__)
    return module


def test_a_team_world_is_one_line_of_the_settings(monkeypatch):
    """README, "Adding a team world": its line in TEAM_WORLDS gives the world its choice, its
    URL setting and that setting's variables, in `dh config show` and the man page alike."""
    plus = _config_with('    "etcd": ("the etcd world", ("ETCD_ENDPOINT",)),\n', monkeypatch)
    effective = plus.load(env={"DH_WORLD": "etcd", "ETCD_ENDPOINT": "http://e/1",
                               "DH_ETCD_URL": "http://e/2"})
    assert (effective.settings.world, effective.settings.etcd_url) == ("etcd", "http://e/2")
    assert effective.origins["etcd_url"].name == "DH_ETCD_URL"  # DH_ first, as for PostgreSQL
    assert plus.load(env={"ETCD_ENDPOINT": "http://e/1"}).settings.etcd_url == "http://e/1"
    documented = dict(plus.environment())
    assert documented["DH_ETCD_URL"].startswith("URL of the etcd world (password never shown).")
    assert "etcd" in documented["DH_WORLD"]
    with pytest.raises(ConfigError, match="must be local, etcd, postgres or redis"):
        plus.load(env={"DH_WORLD": "mars"})


def test_run_options_apply_the_config_and_explicit_flags_win(config_file, monkeypatch):
    monkeypatch.setenv("DH_TOOL_GRACE", "1.5")
    opts = runcli._options(None, None, None, ["Read=never"])
    assert (opts.stall_timeout, opts.tool_grace, opts.policy.max_restarts) == (300, 1.5, 2)
    assert opts.policy.backoff_cap == 10 and opts.continue_prompt == "Keep going."
    assert opts.replay == {"bash": "never", "read": "never"}
    assert runcli._options(5.0, 0, 0.0, None).policy.max_restarts == 0  # an explicit 0 is a flag


def test_config_show_json_says_where_each_value_came_from(config_file, run_dh, monkeypatch):
    monkeypatch.setenv("DH_POSTGRES_URL", "postgresql://dh:hunter2@db.internal/dh")
    result = run_dh("config", "show", "--json")
    data = json.loads(result.stdout)
    assert data["file"] == str(config_file)
    assert data["settings"]["restart.max_restarts"] == {"value": 2, "source": "file",
                                                         "from": str(config_file)}
    assert data["settings"]["postgres_url"]["value"] == "postgresql://dh:***@db.internal/dh"
    assert "hunter2" not in result.stdout
    assert "hunter2" not in run_dh("config", "show").stdout


@pytest.mark.parametrize("text,needle", [
    ("[restart]\nmax_restarts = 'many'\n", "bad value for 'restart.max_restarts' in"),
    ("stall_timeout = \n", "malformed TOML in"),
    ("[replay]\nBash = 'sometimes'\n", "bad value for 'replay.bash' in"),
    ("colour = true\n", "unknown setting 'colour' in"),
])
def test_a_bad_file_is_one_error_line_naming_file_and_key(text, needle, config_file, run_dh, capsys):
    config_file.write_text(text)
    assert run_dh("config", "show").exit_code == 2
    (line,) = capsys.readouterr().err.strip().splitlines()  # printed by the error edge
    assert line.startswith(f"Error: {needle} {config_file}") and "hint:" in line


def test_a_bad_environment_value_names_the_variable(monkeypatch):
    monkeypatch.setenv("DH_STALL_TIMEOUT", "soon")
    with pytest.raises(ConfigError, match=r"'stall_timeout' from \$DH_STALL_TIMEOUT"):
        config.load()


def test_a_setting_outside_its_table_gets_a_hint(config_file):
    config_file.write_text("max_restarts = 3\n")
    with pytest.raises(ConfigError) as caught:
        config.load(env={})
    assert caught.value.hint == "put max_restarts under [restart]"
