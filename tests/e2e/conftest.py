"""Set-up for the end-to-end tests with the real harness CLIs: the pinned programs (installed by
tests/e2e/install.py, or the tests are skipped with the reason), and a Rig per test whose homes,
configs and environment keep each harness private and offline, pointed at a FakeModelServer on
127.0.0.1 (see shared docs: offline-harnesses.md)."""

from __future__ import annotations

import json
import shutil

import pytest

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


@pytest.fixture(scope="session")
def installed() -> install.Installed:
    """The pinned real harnesses, or every e2e test is skipped with the reason."""
    try:
        return install.ensure(log=lambda msg: print(msg, flush=True))
    except install.InstallError as exc:
        pytest.skip(f"real harness CLIs unavailable (npm install): {exc}")


def real_env(installed: install.Installed, tmp) -> dict:
    env = {**CLAUDE_ENV, **OPENCODE_ENV, **PI_ENV, "TMPDIR": str(tmp / "tmp"),
           "NO_PROXY": "*", "TERM": "xterm-256color"}
    for harness, var in BIN_VARS.items():
        env[var] = " ".join(installed.bins[harness])
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
