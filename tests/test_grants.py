"""Never fewer permissions (issue 38): a session from elsewhere runs only with what this
machine's `local_flags` grant its harness, at least what its last launch was granted.

Each wrapper's table reads the real CLIs' flags (Claude Code 2.1.197, Codex 0.171.0,
OpenCode 1.18.33, Pi: their --help) into a level; the launch journals that level (never the
flags), and `dh resume` refuses, naming the config line, when this machine grants less."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from dh_cli import events
from dh_cli.errors import UsageError
from dh_cli.resume.grants import granting, local_flags, needed, withheld
from dh_cli.worlds.local import LocalWorld
from dh_cli.wrappers import get as get_wrapper
from dh_cli.wrappers.grants import ALL, ASK, AUTO, EDITS, Grant, flags_for, granted, launch_grant

from .helpers import harnesses
from .helpers.from_elsewhere import grant_here, imported
from .helpers.stand_ins import argv_harness, dh


@pytest.mark.parametrize("harness, args, level, tools", [
    ("claude-code", ["-p", "hi"], ASK, set()),
    ("claude-code", ["-p", "--dangerously-skip-permissions", "hi"], ALL, set()),
    ("claude-code", ["--allow-dangerously-skip-permissions"], ALL, set()),
    ("claude-code", ["--permission-mode", "acceptEdits"], EDITS, set()),
    ("claude-code", ["--permission-mode=auto"], AUTO, set()),
    ("claude-code", ["--permission-mode", "bypassPermissions"], ALL, set()),
    ("claude-code", ["--permission-mode", "plan"], ASK, set()),
    ("claude-code", ["--permission-mode", "dontAsk"], ASK, set()),
    ("claude-code", ["--allowedTools", "Bash(git *)", "Edit", "-p", "hi"], ASK,
     {"Bash(git *)", "Edit"}),
    ("claude-code", ["--allowed-tools", "Read,Write"], ASK, {"Read", "Write"}),
    ("claude-code", ["--disallowedTools", "Bash", "--tools", "Read"], ASK, set()),  # fewer
    ("codex", ["exec", "--json", "hi"], ASK, set()),
    ("codex", ["exec", "--dangerously-bypass-approvals-and-sandbox", "hi"], ALL, set()),
    ("codex", ["--yolo"], ALL, set()),
    ("codex", ["-s", "workspace-write", "exec", "hi"], EDITS, set()),
    ("codex", ["exec", "--sandbox", "danger-full-access", "hi"], ALL, set()),
    ("codex", ["exec", "--sandbox", "read-only", "-a", "never", "hi"], ASK, set()),
    ("codex", ["--full-auto", "exec", "hi"], EDITS, set()),
    ("codex", ["--approve-for-me"], AUTO, set()),
    ("codex", ["-c", 'sandbox_mode="danger-full-access"', "exec", "hi"], ALL, set()),
    ("codex", ["-c", 'model="o3"', "exec", "hi"], ASK, set()),
    ("opencode", ["run", "hi"], ALL, set()),  # with no config 1.18.33 allows every tool
    ("opencode", ["run", "--auto", "hi"], ALL, set()),
    ("opencode", ["run", "--yolo", "hi"], ALL, set()),  # hidden aliases of --auto
    ("opencode", ["run", "--dangerously-skip-permissions", "hi"], ALL, set()),
    ("pi", ["-p", "--tools", "read", "hi"], ALL, set()),  # Pi asks before nothing
])
def test_each_harness_s_flags_read_as_a_level(harness, args, level, tools):
    assert granted(get_wrapper(harness), args) == Grant(level, frozenset(tools))


@pytest.mark.parametrize("harness, args", [
    ("claude-code", ["--permission-mode", "someNewMode"]),
    ("codex", ["--sandbox", "new-sandbox"]),
    ("codex", ["-a", "new-policy"]),
])
def test_a_value_not_known_grants_nothing_here_and_everything_there(harness, args):
    wrapper = get_wrapper(harness)
    assert granted(wrapper, args).level == ASK
    assert granted(wrapper, args, needed=True).level == ALL


@pytest.mark.parametrize("harness", harnesses.ALL)
@pytest.mark.parametrize("level", [ASK, EDITS, AUTO, ALL])
def test_the_suggested_flags_grant_what_was_needed(harness, level):
    wrapper = get_wrapper(harness)
    want = Grant(level, frozenset({"Bash"}) if "tools" in wrapper.grant_flags else frozenset())
    assert granted(wrapper, flags_for(wrapper, want)).covers(want)


def test_the_description_names_the_level_and_the_tools_it_needs():
    assert Grant(ASK, frozenset({"Bash", "Edit"})).describe().endswith("allowed without asking: Bash, Edit)")
    assert "Bash" not in Grant(ALL, frozenset({"Bash"})).describe()


def test_covers_orders_levels_and_tools():
    assert Grant(ALL).covers(Grant(EDITS, frozenset({"Bash"})))
    assert Grant(EDITS).covers(Grant(ASK))
    assert not Grant(EDITS).covers(Grant(AUTO))
    assert not Grant(ASK, frozenset({"Edit"})).covers(Grant(ASK, frozenset({"Bash"})))
    assert Grant(EDITS, frozenset({"Bash", "Edit"})).covers(Grant(ASK, frozenset({"Bash"})))


@pytest.mark.parametrize("data, level", [
    ({"level": "edits", "tools": ["Bash"]}, EDITS),
    ({"level": "godmode"}, ALL),  # a level this dh does not know: only all covers it
    ({"level": "ask", "tools": ["x"] * 65}, ALL),  # too many to read: only all covers it
    ({"level": "ask", "tools": [1, 2]}, ALL),
    ({"level": "ask", "tools": "Bash"}, ASK),
])
def test_a_recorded_grant_is_untrusted_and_can_only_ask_for_more(data, level):
    assert Grant.recorded(data).level == level


def test_no_recorded_grant_reads_as_none():
    assert Grant.recorded(None) is None and Grant.recorded("all") is None


def test_the_last_launch_s_grant_wins_over_the_stored_args(tmp_path):
    world = LocalWorld()
    session = world.create_session("claude-code", home=str(tmp_path), cwd=str(tmp_path),
                                   argv=json.dumps(["-p", "hi"]))
    wrapper = get_wrapper("claude-code")
    assert needed(world, wrapper, world.get_session(session.id)).level == ASK
    events.add(world, session.id, events.launch(["claude", "-p"], Grant(ALL).to_dict()))
    assert needed(world, wrapper, world.get_session(session.id)).level == ALL
    events.add(world, session.id, events.launch(["claude", "-p"], Grant(EDITS).to_dict()))
    assert needed(world, wrapper, world.get_session(session.id)).level == EDITS
    reason = withheld(world, wrapper, session.id, [])
    assert reason and 'claude-code = ["--permission-mode", "acceptEdits"]' in reason
    assert withheld(world, wrapper, session.id, ["--permission-mode", "acceptEdits"]) is None
    world.close()


def test_a_launch_journals_the_grant_of_its_flags(tmp_path):
    env = {**os.environ, "DH_CLAUDE_BIN": str(argv_harness(tmp_path)),
           "CLAUDE_CONFIG_DIR": str(tmp_path / "claude-home")}
    dh("run", "claude", "--", "-p", "--permission-mode", "acceptEdits", "hi", env=env, cwd=tmp_path)
    world = LocalWorld()
    (session,) = world.sessions()
    launches = [e for e in world.events(session.id) if e.type == events.LAUNCH]
    assert launches and launches[0].details["grant"] == {"level": "edits", "tools": []}
    world.close()


# the command ------------------------------------------------------------------------------
def test_resume_refuses_with_the_config_line_then_runs_once_granted(tmp_path):
    sid, env = imported(tmp_path, "claude-code", ["-p", "--dangerously-skip-permissions", "hi"])
    (tmp_path / "here").mkdir()
    refused = dh("resume", sid, "--cwd", str(tmp_path / "here"), env=env, cwd=tmp_path / "here")
    assert refused.returncode == 6, refused.stderr
    errors = [line for line in refused.stderr.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1 and refused.stderr.strip().splitlines()[-1] == errors[0]
    assert "Traceback" not in refused.stderr
    assert 'add `claude-code = ["--dangerously-skip-permissions"]` under [local_flags]' in errors[0]
    assert not (tmp_path / "launched").exists()
    grant_here("claude-code", ["--dangerously-skip-permissions"])
    resumed = dh("resume", sid, "--cwd", str(tmp_path / "here"), env=env, cwd=tmp_path / "here")
    assert resumed.returncode == 0, resumed.stderr
    assert "--dangerously-skip-permissions" in (tmp_path / "launched").read_text().splitlines()


def test_fewer_is_refused_too(tmp_path):
    sid, env = imported(tmp_path, "claude-code", ["-p", "--permission-mode", "bypassPermissions", "hi"])
    grant_here("claude", ["--permission-mode", "acceptEdits"])
    refused = dh("resume", sid, "--cwd", str(tmp_path), env=env, cwd=tmp_path)
    assert refused.returncode == 6, refused.stderr
    assert '["--permission-mode", "acceptEdits", "--dangerously-skip-permissions"]' in refused.stderr


# --grant: the user's word on this machine's command line ----------------------------------
def test_a_grant_given_adds_each_harness_s_own_flags_where_local_flags_grant_less():
    mine = {"claude": ["--permission-mode", "acceptEdits", "--allowedTools", "Bash(git *)", "--model", "x"],
            "codex": ["--sandbox", "workspace-write"], "opencode": ["--auto"]}
    flags = granting(mine, AUTO)
    # the level flag swapped, the tools and other flags kept; under the harness's own name
    assert flags["claude-code"] == ["--allowedTools", "Bash(git *)", "--model", "x",
                                    "--permission-mode", "auto"]
    assert flags["codex"] == ["--approve-for-me"]  # not beside --sandbox
    assert flags["opencode"] == ["--auto"]  # already all
    for name in harnesses.ALL:
        wrapper = get_wrapper(name)
        assert granted(wrapper, local_flags(flags, wrapper)).covers(Grant(AUTO)), name
    assert granting(mine, None) == mine and granting(mine, ASK) == mine


def test_a_grant_not_a_level_is_one_error():
    with pytest.raises(UsageError, match="--grant 'most' is not a level"):
        granting({}, "most")


def test_resume_runs_with_the_grant_given_and_the_refusal_names_it(tmp_path):
    sid, env = imported(tmp_path, "claude-code", ["-p", "--dangerously-skip-permissions", "hi"])
    (tmp_path / "here").mkdir()
    refused = dh("resume", sid, "--cwd", str(tmp_path / "here"), "--grant", "edits", env=env,
                 cwd=tmp_path / "here")
    assert refused.returncode == 6, refused.stderr
    assert "(or give --grant all)" in refused.stderr and not (tmp_path / "launched").exists()
    resumed = dh("resume", sid, "--cwd", str(tmp_path / "here"), "--grant", "all", env=env,
                 cwd=tmp_path / "here")
    assert resumed.returncode == 0, resumed.stderr
    assert "--dangerously-skip-permissions" in (tmp_path / "launched").read_text().splitlines()


# the harness's own settings of this user -----------------------------------------------------
def _settings(home, permissions) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "settings.json").write_text(json.dumps({"cleanupPeriodDays": 30, "permissions": permissions}))


@pytest.mark.parametrize("permissions, here, there", [
    ({"defaultMode": "bypassPermissions"}, Grant(ALL), Grant(ALL)),
    ({"defaultMode": "acceptEdits", "allow": ["Bash(npm run *)", 7]}, Grant(EDITS, frozenset({"Bash(npm run *)"})),
     Grant(EDITS, frozenset({"Bash(npm run *)"}))),
    ({"defaultMode": "someNewMode"}, Grant(ASK), Grant(ALL)),  # unknown: nothing here, all there
    ({"deny": ["Bash"]}, None, None), ("bypassPermissions", None, None),
])
def test_claude_code_s_user_settings_read_as_a_grant(tmp_path, permissions, here, there):
    wrapper = get_wrapper("claude-code")
    assert wrapper.settings_grant({"CLAUDE_CONFIG_DIR": str(tmp_path / "none")}, []) is None
    _settings(tmp_path, permissions)
    env = {"CLAUDE_CONFIG_DIR": str(tmp_path)}
    assert wrapper.settings_grant(env, []) == here
    assert wrapper.settings_grant(env, [], needed=True) == there


def test_a_level_flag_wins_over_the_settings_and_their_tools_join(tmp_path):
    wrapper = get_wrapper("claude-code")
    _settings(tmp_path, {"defaultMode": "bypassPermissions", "allow": ["Read"]})
    env = {"CLAUDE_CONFIG_DIR": str(tmp_path)}
    assert launch_grant(wrapper, ["-p", "hi"], env) == Grant(ALL, frozenset({"Read"}))
    assert launch_grant(wrapper, ["-p", "--permission-mode", "plan", "hi"], env) == \
        Grant(ASK, frozenset({"Read"}))
    assert launch_grant(wrapper, ["-p", "hi"], None) == Grant(ASK)  # no env: flags alone


def test_a_launch_records_the_level_its_user_settings_give(tmp_path):
    home = tmp_path / "claude-home"
    _settings(home, {"defaultMode": "bypassPermissions"})
    env = {**os.environ, "DH_CLAUDE_BIN": str(argv_harness(tmp_path)), "CLAUDE_CONFIG_DIR": str(home)}
    dh("run", "claude", "--", "-p", "hi", env=env, cwd=tmp_path)
    world = LocalWorld()
    (session,) = world.sessions()
    launches = [e for e in world.events(session.id) if e.type == events.LAUNCH]
    assert launches and launches[0].details["grant"] == {"level": "all", "tools": []}
    world.close()


def test_this_machine_s_user_settings_count_for_a_session_from_elsewhere(tmp_path):
    sid, env = imported(tmp_path, "claude-code", ["-p", "--dangerously-skip-permissions", "hi"])
    (tmp_path / "here").mkdir()
    refused = dh("resume", sid, "--cwd", str(tmp_path / "here"), env=env, cwd=tmp_path / "here")
    assert refused.returncode == 6, refused.stderr
    _settings(Path(env["CLAUDE_CONFIG_DIR"]), {"defaultMode": "bypassPermissions"})
    resumed = dh("resume", sid, "--cwd", str(tmp_path / "here"), env=env, cwd=tmp_path / "here")
    assert resumed.returncode == 0, resumed.stderr  # the harness's own setting grants it here
