"""Never fewer permissions, from the harnesses' own config files: Codex's `sandbox_mode` in
`$CODEX_HOME/config.toml` (and in the `--profile` file layered on it) and OpenCode's
`permission` in its global config count like flags, on both sides of the comparison (what a
session ran with, what this machine grants). How Codex 0.171.0 and OpenCode 1.18.33 read them
is in wrappers/codex_grants.py and wrappers/opencode_grants.py."""

from __future__ import annotations

import json
import os

import pytest

from dh_cli import events
from dh_cli.resume.grants import withheld
from dh_cli.worlds.local import LocalWorld
from dh_cli.wrappers import get as get_wrapper
from dh_cli.wrappers.grants import ALL, ASK, AUTO, EDITS, Grant, launch_grant

from .helpers.from_elsewhere import grant_here, imported
from .helpers.stand_ins import argv_harness, dh

CODEX, OPENCODE = get_wrapper("codex"), get_wrapper("opencode")


def _codex_home(tmp_path, text: str | bytes, name: str = "config.toml") -> dict:
    home = tmp_path / "codex-home"
    home.mkdir(exist_ok=True)
    (home / name).write_bytes(text if isinstance(text, bytes) else text.encode())
    return {"CODEX_HOME": str(home)}


def _sandbox(mode: str) -> str:
    return f'model = "o3"\nsandbox_mode = "{mode}"\n[features]\napps = false\n'


# Codex ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("mode, level", [
    ("read-only", ASK), ("workspace-write", EDITS), ("danger-full-access", ALL)])
def test_codex_s_config_sandbox_reads_as_a_level(tmp_path, mode, level):
    env = _codex_home(tmp_path, _sandbox(mode))
    assert CODEX.settings_grant(env, ["exec"]) == Grant(level)
    assert launch_grant(CODEX, ["exec", "hi"], env) == Grant(level)
    assert launch_grant(CODEX, ["exec", "hi"], env, needed=True) == Grant(level)


@pytest.mark.parametrize("flags, level", [
    (["-s", "read-only"], ASK), (["--sandbox=workspace-write"], EDITS),
    (["-c", 'sandbox_mode="read-only"'], ASK), (["--config", "sandbox_mode = 'workspace-write'"], EDITS),
    (["-c=sandbox_mode=read-only"], ASK), (["--approve-for-me"], AUTO),  # it runs workspace-write
    (["--dangerously-bypass-approvals-and-sandbox"], ALL), (["--yolo"], ALL),
    (["-c", 'model="o3"'], ALL), (["-a", "never"], ALL),  # neither sets the sandbox: the file's
])
def test_a_flag_that_sets_codex_s_sandbox_wins_over_its_config(tmp_path, flags, level):
    env = _codex_home(tmp_path, _sandbox("danger-full-access"))
    assert launch_grant(CODEX, ["exec", "hi"], env).level == ALL  # the file, with no flag
    assert launch_grant(CODEX, ["exec", *flags, "hi"], env).level == level


def test_the_profile_file_wins_over_config_toml_and_flags_over_both(tmp_path):
    env = _codex_home(tmp_path, _sandbox("read-only"))
    _codex_home(tmp_path, _sandbox("danger-full-access"), "work.config.toml")
    assert launch_grant(CODEX, ["exec", "hi"], env).level == ASK
    assert launch_grant(CODEX, ["exec", "-p", "work", "hi"], env).level == ALL
    assert launch_grant(CODEX, ["--profile=work", "exec", "hi"], env).level == ALL
    assert launch_grant(CODEX, ["exec", "-p", "none", "hi"], env).level == ASK  # no such file
    assert launch_grant(CODEX, ["exec", "-p", "work", "-s", "read-only", "hi"], env).level == ASK
    # Codex refuses a profile that is not a plain name: dh never reads a path from it
    assert launch_grant(CODEX, ["exec", "-p", "../codex-home/work", "hi"], env).level == ASK


def test_a_legacy_profile_table_is_not_read(tmp_path):
    """0.171.0 exits at once on `profile = "x"`, and ignores `[profiles.x]` without it."""
    env = _codex_home(tmp_path, 'sandbox_mode = "workspace-write"\n'
                                '[profiles.x]\nsandbox_mode = "danger-full-access"\n')
    assert launch_grant(CODEX, ["exec", "hi"], env).level == EDITS


def test_ignore_user_config_reads_neither_file(tmp_path):
    env = _codex_home(tmp_path, _sandbox("danger-full-access"))
    _codex_home(tmp_path, _sandbox("danger-full-access"), "work.config.toml")
    assert launch_grant(CODEX, ["exec", "-p", "work", "hi"], env).level == ALL
    assert launch_grant(CODEX, ["exec", "--ignore-user-config", "-p", "work", "hi"], env).level == ASK


@pytest.mark.parametrize("text", [
    b'sandbox_mode = "danger-full-access"\nsandbox_mode = [',
    b'sandbox_mode = "danger-full-access"\n\xff\xfe',
    b'# big\n' + b'#' * (1 << 20) + b'\nsandbox_mode = "danger-full-access"\n', b'model = "o3"\n',
], ids=["not-toml", "not-utf8", "huge", "no-sandbox"])
def test_a_bad_huge_or_silent_codex_config_sets_nothing(tmp_path, text):
    env = _codex_home(tmp_path, text)
    assert CODEX.settings_grant(env, ["exec"]) is None
    assert CODEX.settings_grant({"CODEX_HOME": str(tmp_path / "missing")}, ["exec"]) is None
    assert launch_grant(CODEX, ["exec", "hi"], env, needed=True).level == ASK
    _codex_home(tmp_path, _sandbox("danger-full-access"))  # the same home, read when it can be
    assert CODEX.settings_grant(env, ["exec"]) == Grant(ALL)


@pytest.mark.parametrize("value", ['"sandbox-of-the-future"', "3", '["danger-full-access"]'])
def test_an_unknown_codex_sandbox_grants_nothing_here_and_everything_there(tmp_path, value):
    env = _codex_home(tmp_path, f"sandbox_mode = {value}\n")
    assert launch_grant(CODEX, ["exec", "hi"], env).level == ASK
    assert launch_grant(CODEX, ["exec", "hi"], env, needed=True).level == ALL


# OpenCode ------------------------------------------------------------------------------------
def _opencode_config(tmp_path, data, name: str = "opencode.json") -> dict:
    folder = tmp_path / "xdg-config" / "opencode"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(data if isinstance(data, str) else json.dumps(data))
    return {"XDG_CONFIG_HOME": str(tmp_path / "xdg-config"), "HOME": str(tmp_path)}


@pytest.mark.parametrize("permission, level", [
    ("allow", ALL), ("ask", ASK), ("deny", ASK),
    ({"edit": "allow", "bash": "allow", "webfetch": "deny"}, ALL),
    ({"edit": "allow", "bash": "ask"}, EDITS), ({"edit": "ask"}, ASK), ({"bash": "deny"}, EDITS),
    ({"*": "ask", "edit": "allow"}, EDITS), ({"edit": "allow", "*": "ask"}, ASK),  # last rule wins
    ({"ed*": "ask"}, ASK),  # a permission name is a wildcard
    ({"edit": "allow", "bash": {"*": "allow", "rm *": "deny"}}, EDITS),  # not every command
    ({"edit": "allow", "bash": {"git *": "ask", "*": "allow"}}, ALL),  # the catch-all is last
    ({"edit": "allow", "bash": {"*": "ask", "git *": "allow"}}, EDITS),
    ({"webfetch": "deny"}, ALL),  # the rest as with no permission: allowed
])
def test_opencode_s_permission_reads_as_a_level(tmp_path, permission, level):
    env = _opencode_config(tmp_path, {"model": "m/x", "permission": permission})
    assert OPENCODE.settings_grant(env, ["run"]) == Grant(level)
    assert launch_grant(OPENCODE, ["run", "hi"], env) == Grant(level)
    assert launch_grant(OPENCODE, ["run", "hi"], env, needed=True) == Grant(level)


@pytest.mark.parametrize("permission, level", [
    ("ask", ALL), ({"bash": "deny"}, EDITS), ({"edit": "deny"}, ASK), ({"*": "deny"}, ASK),
    ({"bash": {"*": "ask", "rm *": "deny"}}, EDITS)])
def test_opencode_s_auto_approves_what_its_config_asks_and_never_what_it_denies(tmp_path, permission, level):
    env = _opencode_config(tmp_path, {"permission": permission})
    for auto in ("--auto", "--yolo", "--dangerously-skip-permissions"):
        assert launch_grant(OPENCODE, ["run", auto, "hi"], env).level == level
    assert launch_grant(OPENCODE, ["run", "--", "--auto"], env) == launch_grant(OPENCODE, ["run", "hi"], env)
    assert launch_grant(OPENCODE, ["run", "--auto", "hi"], None).level == ALL  # no config read


def test_with_no_permission_opencode_allows_every_tool(tmp_path):
    """1.18.33's default agent: `"*": "allow"` (its bundled source)."""
    env = _opencode_config(tmp_path, {"model": "m/x"})
    assert OPENCODE.settings_grant(env, ["run"]) is None
    assert launch_grant(OPENCODE, ["run", "hi"], env).level == ALL


def test_opencode_merges_its_global_files_and_reads_jsonc(tmp_path):
    env = _opencode_config(tmp_path, {"permission": "ask"}, "config.json")
    _opencode_config(tmp_path, {"permission": {"edit": "allow"}})
    assert launch_grant(OPENCODE, ["run"], env).level == EDITS  # {"*": "ask", "edit": "allow"}
    _opencode_config(tmp_path, '{\n  // bash too\n  "permission": {"bash": "allow", "*": "allow",},\n}',
                     "opencode.jsonc")
    assert launch_grant(OPENCODE, ["run"], env).level == ALL


def test_a_global_file_that_does_not_parse_drops_the_global_config(tmp_path):
    """As OpenCode does ("failed to load global config, using defaults")."""
    env = _opencode_config(tmp_path, {"permission": "ask"})
    _opencode_config(tmp_path, "{not json", "opencode.jsonc")
    assert launch_grant(OPENCODE, ["run"], env).level == ALL


def test_opencode_s_config_variables_count(tmp_path):
    env = _opencode_config(tmp_path, {"permission": {"edit": "allow", "bash": "allow"}})
    assert launch_grant(OPENCODE, ["run"], {**env, "OPENCODE_PERMISSION": '{"bash": "ask"}'}).level == EDITS
    extra = tmp_path / "extra.json"
    extra.write_text(json.dumps({"permission": {"edit": "deny"}}))
    assert launch_grant(OPENCODE, ["run"], {**env, "OPENCODE_CONFIG": str(extra)}).level == ASK
    content = json.dumps({"tools": {"bash": False}})
    assert launch_grant(OPENCODE, ["run"], {**env, "OPENCODE_CONFIG_CONTENT": content}).level == ALL
    bare = {"XDG_CONFIG_HOME": str(tmp_path / "none")}  # `tools` under `permission`, not over it
    assert launch_grant(OPENCODE, ["run"], {**bare, "OPENCODE_CONFIG_CONTENT": content}).level == EDITS


@pytest.mark.parametrize("permission", [{"edit": "sometimes"}, 7, ["allow"]])
def test_an_unknown_opencode_permission_grants_nothing_here_and_everything_there(tmp_path, permission):
    env = _opencode_config(tmp_path, {"permission": permission})
    assert launch_grant(OPENCODE, ["run"], env).level == ASK
    assert launch_grant(OPENCODE, ["run"], env, needed=True).level == ALL


def test_a_huge_opencode_config_is_not_read(tmp_path):
    env = _opencode_config(tmp_path, json.dumps({"permission": "ask", "pad": "x" * (1 << 20)}))
    assert OPENCODE.settings_grant(env, ["run"]) is None
    _opencode_config(tmp_path, json.dumps({"permission": "ask", "pad": "x" * 1000}))
    assert OPENCODE.settings_grant(env, ["run"]) == Grant(ASK)


def test_where_opencode_s_config_denies_no_flag_is_suggested(tmp_path):
    """--auto approves what the config asks, never what it denies: the refusal says so."""
    world = LocalWorld()
    session = world.create_session("opencode", home=str(tmp_path), cwd=str(tmp_path),
                                   argv=json.dumps(["run", "hi"]))
    events.add(world, session.id, events.launch(["opencode", "run", "hi"], Grant(ALL).to_dict()))
    env = _opencode_config(tmp_path, {"permission": {"bash": "ask"}})
    assert 'add `opencode = ["--auto"]` under [local_flags]' in withheld(world, OPENCODE, session.id, [], env)
    _opencode_config(tmp_path, {"permission": {"bash": "deny"}})
    reason = withheld(world, OPENCODE, session.id, [], env)
    assert "this machine grants edits, and no flag of opencode grants more here" in reason
    assert "[local_flags]" not in reason and "--grant" not in reason
    world.close()


# the command ---------------------------------------------------------------------------------
def test_a_codex_launch_records_the_sandbox_of_its_config(tmp_path):
    env = {**os.environ, "DH_CODEX_BIN": str(argv_harness(tmp_path)),
           **_codex_home(tmp_path, _sandbox("danger-full-access"))}
    dh("run", "codex", "--", "exec", "--skip-git-repo-check", "hi", env=env, cwd=tmp_path)
    world = LocalWorld()
    (session,) = world.sessions()
    launches = [e for e in world.events(session.id) if e.type == events.LAUNCH]
    assert launches and launches[0].details["grant"] == {"level": "all", "tools": []}
    world.close()


def _recorded_elsewhere(tmp_path) -> tuple[str, dict]:
    """A Codex session from elsewhere whose launch recorded what that machine's config.toml
    (danger-full-access, no flag) granted, as the launch records it (supervisor/runner.py)."""
    there = tmp_path / "there"
    there.mkdir()
    sid, env = imported(tmp_path, "codex", ["exec", "hi"])
    full_access = _codex_home(there, _sandbox("danger-full-access"))
    grant = launch_grant(CODEX, ["exec", "hi"], full_access, needed=True)
    world = LocalWorld()
    events.add(world, sid, events.launch(["codex", "exec", "hi"], grant.to_dict()))
    world.close()
    return sid, env


def test_a_codex_session_with_a_full_access_config_needs_it_here(tmp_path):
    """Recorded on a machine whose config.toml says danger-full-access; this one says
    read-only: refused with the line that grants it, run once this machine grants it."""
    sid, env = _recorded_elsewhere(tmp_path)
    here = tmp_path / "here"
    here.mkdir()
    config = os.path.join(env["CODEX_HOME"], "config.toml")
    with open(config, "w") as out:
        out.write(_sandbox("read-only"))
    refused = dh("resume", sid, "--cwd", str(here), env=env, cwd=here)
    assert refused.returncode == 6, refused.stderr
    (error,) = [line for line in refused.stderr.splitlines() if line.startswith("Error:")]
    assert "granting all" in error and "this machine grants ask" in error
    assert 'add `codex = ["--dangerously-bypass-approvals-and-sandbox"]` under [local_flags]' in error
    assert not (tmp_path / "launched").exists()
    with open(config, "w") as out:
        out.write(_sandbox("danger-full-access"))  # the harness's own setting grants it here
    resumed = dh("resume", sid, "--cwd", str(here), env=env, cwd=here)
    assert resumed.returncode == 0, resumed.stderr
    assert (tmp_path / "launched").exists()


def test_a_codex_session_runs_here_once_local_flags_grant_it(tmp_path):
    sid, env = _recorded_elsewhere(tmp_path)
    with open(os.path.join(env["CODEX_HOME"], "config.toml"), "w") as out:
        out.write(_sandbox("read-only"))
    grant_here("codex", ["--sandbox", "workspace-write"])
    refused = dh("resume", sid, "--cwd", str(tmp_path), env=env, cwd=tmp_path)
    assert refused.returncode == 6, refused.stderr
    assert '["--sandbox", "workspace-write", "--dangerously-bypass-approvals-and-sandbox"]' in refused.stderr
    grant_here("codex", ["--dangerously-bypass-approvals-and-sandbox"])
    resumed = dh("resume", sid, "--cwd", str(tmp_path), env=env, cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert "--dangerously-bypass-approvals-and-sandbox" in (tmp_path / "launched").read_text().splitlines()
