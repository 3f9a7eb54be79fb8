"""`dh doctor` against the fake harnesses: versions, homes, the log's health and privacy, and
each registered team world, one line per check and a failing exit when one fails."""

import json
import os

import pytest

from dh_cli import config, doctor
from dh_cli.team import world_class
from dh_cli.worlds.local import LocalWorld

from .fakes.install import install_fake_harnesses
from .helpers.team_worlds import team  # noqa: F401  (fixture)


@pytest.fixture
def machine(tmp_path, monkeypatch):
    """Fake harnesses on PATH, a home for each, and a fresh log."""
    install_fake_harnesses(tmp_path / "bin")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:/usr/bin:/bin")
    for var, name in [("CLAUDE_CONFIG_DIR", "claude"), ("CODEX_HOME", "codex"),
                      ("PI_CODING_AGENT_DIR", "pi"), ("XDG_DATA_HOME", "data")]:
        (tmp_path / name).mkdir()
        monkeypatch.setenv(var, str(tmp_path / name))
    (tmp_path / "data" / "opencode").mkdir()
    (tmp_path / "data" / "opencode" / "opencode.db").touch()
    for var in [name for name, key in config.ENV_KEYS.items() if key.endswith("_url")]:  # every world's
        monkeypatch.delenv(var, raising=False)
    LocalWorld().close()
    return tmp_path


def by_name(result) -> dict:
    return {c["name"]: c for c in json.loads(result.stdout)}


def test_a_ready_machine_passes_every_check(machine, run_dh):
    result = run_dh("doctor", "--json")
    checks = by_name(result)
    assert result.exit_code == 0
    assert checks["claude-code binary"]["details"]["version"] == "2.1.197"
    assert checks["claude-code binary"]["details"]["in_tried_range"] is True
    assert checks["claude-code binary"]["details"]["tried"] == ["2.1.197", "2.1.332"]
    assert {c["status"] for c in checks.values()} == {"ok", "skip"}
    assert checks["postgres world"]["status"] == "skip"


def test_text_output_is_one_line_per_check(machine, run_dh):
    lines = run_dh("doctor").stdout.strip().splitlines()
    assert len(lines) == len(doctor.run_checks())
    assert lines[0].startswith("ok   claude-code binary: ") and "(dh was tried with 2.1.197 to 2.1.332)" in lines[0]


def test_an_untested_or_missing_harness_only_warns(machine, run_dh, monkeypatch):
    old = machine / "old-pi"
    old.write_text("#!/bin/sh\necho 0.70.2\n")
    old.chmod(0o755)
    monkeypatch.setenv("DH_PI_BIN", str(old))
    (machine / "bin" / "codex").unlink()
    result = run_dh("doctor", "--json")
    checks = by_name(result)
    assert result.exit_code == 0
    assert checks["pi binary"]["status"] == "warn" and \
        "0.70.2 (dh was tried with 0.73.1 to 1.6.0, not in that range)" in checks["pi binary"]["message"]
    assert checks["pi binary"]["details"]["in_tried_range"] is False
    assert checks["codex binary"]["status"] == "warn" and checks["codex binary"]["details"]["hint"]


def test_a_hung_version_call_times_out(machine, monkeypatch):
    hung = machine / "hung"
    hung.write_text("#!/bin/sh\nsleep 30\n")
    hung.chmod(0o755)
    from dh_cli import versions

    monkeypatch.setattr(versions, "VERSION_TIMEOUT", 0.5)
    assert doctor.harness_version([str(hung)], dict(os.environ)) is None


def test_a_log_readable_by_others_fails(machine, run_dh, dh_home):
    os.chmod(dh_home / "dh.db", 0o644)
    result = run_dh("doctor", "--json")
    check = by_name(result)["log privacy"]
    assert result.exit_code == 1
    assert check["status"] == "fail" and check["details"]["fix"].startswith("chmod 600 ")


def test_a_damaged_log_fails(machine, run_dh, dh_home):
    db = dh_home / "dh.db"
    for suffix in ("-wal", "-shm"):
        db.with_name(db.name + suffix).unlink(missing_ok=True)
    db.write_bytes(b"SQLite format 3\x00" + b"\x07" * 8192)
    result = run_dh("doctor")
    assert result.exit_code == 1
    assert any(line.startswith("fail log database:") for line in result.stdout.splitlines())


# (world, its URL variable, an unreachable URL with a password, that URL as dh may show it)
UNREACHABLE = [("postgres", "DH_POSTGRES_URL", "postgresql://dh:hunter2@127.0.0.1:9/dh", "postgresql://dh:***@127.0.0.1:9/dh"),
               ("redis", "DH_REDIS_URL", "redis://:hunter2@127.0.0.1:9/0", "redis://:***@127.0.0.1:9/0")]


@pytest.mark.parametrize("world,variable,url,shown", UNREACHABLE, ids=[u[0] for u in UNREACHABLE])
def test_an_unreachable_world_fails_without_showing_the_password(machine, run_dh, monkeypatch, world,
                                                                 variable, url, shown):
    monkeypatch.setenv(variable, url)
    result = run_dh("doctor", "--json")
    check = by_name(result)[f"{world} world"]
    assert result.exit_code == 1 and check["status"] == "fail"
    assert shown in check["message"]
    assert "hunter2" not in result.stdout


def test_every_registered_world_is_checked_and_a_reachable_one_passes(team, machine, run_dh, monkeypatch):
    # team first: its server starts with the PATH of the run, before machine narrows it
    monkeypatch.setenv(world_class(team.name).url_variable, team.url)
    result = run_dh("doctor", "--json")
    assert result.exit_code == 0
    check = by_name(result)[f"{team.name} world"]
    assert check["status"] == "ok" and check["message"].endswith(" is reachable")


def test_a_bad_config_file_is_a_failed_check_not_a_crash(machine, run_dh, tmp_path):
    path = tmp_path / "xdg-config" / "dh" / "config.toml"
    path.parent.mkdir(parents=True)
    path.write_text("[restart]\nmax_restarts = -1\n")
    result = run_dh("doctor", "--json")
    assert result.exit_code == 1
    assert "restart.max_restarts" in by_name(result)["config"]["message"]
