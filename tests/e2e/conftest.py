"""Set-up for the end-to-end tests with the real harness CLIs: the pinned programs (installed by
tests/e2e/install.py, or the tests are skipped with the reason), and a Rig per test whose homes,
configs and environment keep each harness private and offline, pointed at a FakeModelServer on
127.0.0.1 (see shared docs: offline-harnesses.md)."""

from __future__ import annotations

import json
import os
import shutil

import pytest

from tests.require import required

from tests.fakes.model_server import FakeModelServer
from tests.rig import Rig

from . import install

CLAUDE_ENV = {
    "IS_SANDBOX": "1",  # we run as root: lets --dangerously-skip-permissions through
    "DISABLE_TELEMETRY": "1", "DISABLE_ERROR_REPORTING": "1", "DISABLE_AUTOUPDATER": "1",
    "DISABLE_UPDATES": "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "CLAUDE_CODE_ENABLE_TELEMETRY": "0", "DISABLE_GROWTHBOOK": "1", "DISABLE_BUG_COMMAND": "1",
    "DISABLE_COST_WARNINGS": "1", "DISABLE_INSTALLATION_CHECKS": "1",
    "CLAUDE_CODE_DISABLE_FEEDBACK_SURVEY": "1", "CLAUDE_CODE_DISABLE_TERMINAL_TITLE": "1",
    "CLAUDE_CODE_DISABLE_OFFICIAL_MARKETPLACE_AUTOINSTALL": "1",
}
OPENCODE_ENV = {
    "OPENCODE_DISABLE_MODELS_FETCH": "1", "OPENCODE_DISABLE_AUTOUPDATE": "1",
    "OPENCODE_DISABLE_SHARE": "1", "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1",
    "OPENCODE_DISABLE_LSP_DOWNLOAD": "1", "OPENCODE_DISABLE_CLAUDE_CODE": "1",
    "OPENCODE_DISABLE_EXTERNAL_SKILLS": "1",
}
PI_ENV = {"PI_OFFLINE": "1", "PI_SKIP_VERSION_CHECK": "1", "PI_TELEMETRY": "0"}
UNSET = ("ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN", "OPENAI_API_KEY", "OPENAI_BASE_URL",
         "CODEX_API_KEY", "CODEX_HOME", "CODEX_SQLITE_HOME", "OPENCODE_DB", "OPENCODE_CONFIG",
         "OPENCODE_CONFIG_CONTENT", "PI_CODING_AGENT_SESSION_DIR")
BIN_VARS = {"claude-code": "DH_CLAUDE_BIN", "codex": "DH_CODEX_BIN", "opencode": "DH_OPENCODE_BIN",
            "pi": "DH_PI_BIN"}

CODEX_CONFIG = """model = "mock-model"
model_provider = "mock"
approval_policy = "never"
sandbox_mode = "danger-full-access"
check_for_update_on_startup = false
web_search = "disabled"

[model_providers.mock]
name = "Mock"
base_url = "{url}/v1"
env_key = "MOCK_API_KEY"
wire_api = "responses"
request_max_retries = 0
stream_max_retries = 0
stream_idle_timeout_ms = 300000

[analytics]
enabled = false
[feedback]
enabled = false

[features]
plugins = false
remote_plugin = false
apps = false
tool_suggest = false
"""


def in_ci() -> bool:
    """When real parts are required (tests/require.py; `.ci/run` sets it) a harness that cannot
    be had fails its tests instead of skipping them: a green run must have run them."""
    return required()


@pytest.fixture(scope="session", params=list(install.VERSION_SETS))
def version_set(request) -> str:
    """Every e2e test runs against the pinned releases and the newest that install here."""
    return request.param


@pytest.fixture(scope="session")
def installed(version_set) -> install.Installed:
    """The real harnesses of the version set, or its e2e tests are skipped with the reason
    (failed under CI=true)."""
    try:
        return install.ensure(log=lambda msg: print(msg, flush=True), version_set=version_set)
    except install.InstallError as exc:
        message = f"real harness CLIs ({version_set}) unavailable (npm install): {exc}"
        if in_ci():
            pytest.fail(message)
        pytest.skip(message)


E2E_NODES = "tests/e2e/"  # node ids are relative to the project's root (pyproject.toml)
# The real harnesses' tests in two groups, each run in order by one xdist worker (pytest-xdist's
# --dist loadgroup, pyproject.toml), the other tests filling in around them: one group took
# the whole run's length (29.9 min, the rest waiting on it). These modules are about half
# the end-to-end time (820 s of 1,799 s); two real harness runs at once is what the soak
# does (--jobs 2).
FIRST_GROUP = frozenset({"test_limits_real.py", "test_tui.py", "test_identity_real.py",
                         "test_shims.py", "test_resume_argv_real.py"})


def e2e_group(nodeid: str) -> str:
    module = nodeid.split("::", 1)[0].rsplit("/", 1)[-1]
    return "e2e" if module in FIRST_GROUP else "e2e-2"


# tryfirst: pytest-xdist reads the group in its own hook, which runs first when this conftest
# was loaded at start-up (`pytest tests/e2e`: the tests were then spread over both workers)
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """A harness whose newest release is its pinned one runs once: its `newest` items are
    deselected (Codex 0.171.0 and OpenCode 1.18.33 have no newer release here); so are the
    items of a set a test's `version_sets` marker leaves out (a slow case run once)."""
    same = {h for h, package in install.NEWEST.items() if package == install.PACKAGES[h]}
    keep, dropped = [], []
    for item in items:
        if item.nodeid.startswith(E2E_NODES):
            item.add_marker(pytest.mark.xdist_group(e2e_group(item.nodeid)))
        params = getattr(getattr(item, "callspec", None), "params", {})
        harnesses = {params["harness"]} if "harness" in params else set(_marked(item))
        only = item.get_closest_marker("version_sets")
        if params.get("version_set") == "newest" and harnesses and harnesses <= same:
            dropped.append(item)
        elif only and params.get("version_set") not in only.args:
            dropped.append(item)
        else:
            keep.append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = keep


def _marked(item) -> list[str]:
    marker = item.get_closest_marker("harnesses")
    return list(marker.args) if marker else []


def real_env(installed: install.Installed, tmp) -> dict:
    env = {**CLAUDE_ENV, **OPENCODE_ENV, **PI_ENV, "TMPDIR": str(tmp / "tmp"),
           "NO_PROXY": "*", "TERM": "xterm-256color"}
    for harness, var in BIN_VARS.items():
        env[var] = " ".join(installed.bins[harness])
    if installed.path_first:  # Pi 1.x: a Node >= 22.19 first on PATH
        env["PATH"] = os.pathsep.join([*installed.path_first, os.environ.get("PATH", "")])
    return env


def write_real_configs(rig: Rig, installed: install.Installed) -> None:
    """On top of the Rig's configs: Codex's full offline config, OpenCode's plugin pre-install
    (or it looks the plugin up on the registry at every start)."""
    home = rig.tmp
    (home / "tmp").mkdir(exist_ok=True)
    (home / ".codex" / "config.toml").write_text(CODEX_CONFIG.format(url=rig.server.url))
    install.copy_opencode_config(installed, home / ".config" / "opencode")
    config = home / ".config" / "opencode" / "opencode.json"
    data = json.loads(config.read_text())
    data["$schema"] = "https://opencode.ai/config.json"
    config.write_text(json.dumps(data))


def make_real_rig(tmp, script, installed: install.Installed) -> Rig:
    server = FakeModelServer(script).start()
    rig = Rig(tmp, server, bin_dir=tmp / "bin", extra_env=real_env(installed, tmp))
    for name in UNSET:
        rig.env.pop(name, None)
    write_real_configs(rig, installed)
    return rig


@pytest.fixture
def real_rig(tmp_path, installed):
    """make(script) -> a Rig over the real CLIs; its servers are stopped at the end."""
    made: list[Rig] = []

    def make(script, sub: str = "") -> Rig:
        folder = tmp_path / sub if sub else tmp_path
        folder.mkdir(exist_ok=True)
        made.append(make_real_rig(folder, script, installed))
        return made[-1]

    yield make
    for rig in made:
        rig.server.stop()
    shutil.rmtree(tmp_path / "tmp", ignore_errors=True)
