"""A test rig for running dh over a harness: private homes for all four harnesses, their
config pointing at a scripted fake model server on loopback, the fake executables first on
PATH (or real ones, for the end-to-end suite), and a private DH_HOME."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from tests.fakes.install import install_fake_harnesses
from tests.fakes.model_server import FakeModelServer
from tests.helpers import harnesses

HEADLESS_ARGS = {
    "claude-code": lambda p: ["-p", p, "--output-format", "stream-json", "--verbose",
                              "--dangerously-skip-permissions"],
    "codex": lambda p: ["exec", "--json", "--skip-git-repo-check",
                        "--dangerously-bypass-approvals-and-sandbox", p],
    "opencode": lambda p: ["run", "--format", "json", "--title", "dh-test", p],
    "pi": lambda p: ["-p", "--mode", "json", "--provider", "mock", "--model", "mock-claude", p],
}
HARNESSES = harnesses.ALL  # a harness without HEADLESS_ARGS fails where it is used


def dh(*args: str, env: dict | None = None, cwd=None, timeout: float = 120, wait: bool = True,
       inherit: bool = True, **popen):
    """Run this checkout's dh (`python -m dh_cli ARGS`): the one way the tests start a dh.

    Output is captured as text and stdin is closed (a dh that asked would hang the test).
    `env` is added to os.environ, or is the whole environment with inherit=False. With
    wait=False the Popen comes back, stdout and stderr piped; else the CompletedProcess."""
    cmd = [sys.executable, "-m", "dh_cli", *args]
    full = {**os.environ, **(env or {})} if inherit else dict(env or {})
    popen.setdefault("text", True)
    if "input" not in popen:
        popen.setdefault("stdin", subprocess.DEVNULL)
    if not wait:
        return subprocess.Popen(cmd, env=full, cwd=cwd, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, **popen)
    return subprocess.run(cmd, env=full, cwd=cwd, capture_output=True, timeout=timeout, **popen)


@dataclass
class Rig:
    tmp: Path
    server: FakeModelServer
    bin_dir: Path | None = None
    env: dict = field(default_factory=dict)
    extra_env: dict = field(default_factory=dict)  # set last (e.g. DH_<HARNESS>_BIN for real CLIs)

    def __post_init__(self):
        self.proj = self.tmp / "proj"
        self.proj.mkdir(exist_ok=True)
        self.env = self._env()
        write_configs(self.tmp, self.server.url)

    def _env(self) -> dict:
        env = {k: v for k, v in os.environ.items()
               if not k.endswith(("_PROXY", "_proxy")) and not k.startswith(("DH_FAKE", "ANTHROPIC_", "OPENAI_"))}
        home = self.tmp
        env.update(
            HOME=str(home), TMPDIR=str(home), NO_PROXY="*", IS_SANDBOX="1", PWD=str(self.proj),
            DH_HOME=str(home / "dh-home"), CLAUDE_CONFIG_DIR=str(home / ".claude"),
            ANTHROPIC_BASE_URL=self.server.url, ANTHROPIC_API_KEY="test-key",
            PI_CODING_AGENT_DIR=str(home / "pi-agent"), PI_OFFLINE="1", PI_SKIP_VERSION_CHECK="1",
            CODEX_HOME=str(home / ".codex"), MOCK_API_KEY="dummy",
            XDG_CONFIG_HOME=str(home / ".config"), XDG_DATA_HOME=str(home / ".local/share"),
            XDG_STATE_HOME=str(home / ".local/state"), XDG_CACHE_HOME=str(home / ".cache"),
            OPENCODE_DISABLE_MODELS_FETCH="1", OPENCODE_DISABLE_AUTOUPDATE="1",
            DH_RAISE_ERRORS="1")
        if self.bin_dir is None:
            self.bin_dir = self.tmp / "bin"
            install_fake_harnesses(self.bin_dir)
        env["PATH"] = f"{self.bin_dir}{os.pathsep}{env.get('PATH', '')}"
        env.update(self.extra_env)
        return env

    def dh(self, *args: str, crash: str | None = None, timeout: float = 60, **popen) -> subprocess.CompletedProcess:
        env = dict(self.env)
        if crash:
            env["DH_FAKE_CRASH"] = crash
            env["DH_FAKE_CRASH_ONCE"] = str(self.tmp / f"crashed-{len(list(self.tmp.glob('crashed-*')))}")
        popen.setdefault("text", False)  # the rig's callers read bytes
        return dh(*args, env=env, cwd=self.proj, timeout=timeout, inherit=False, **popen)

    def run(self, harness: str, prompt: str = "Create the files.", *dh_opts: str, **kw):
        return self.dh("run", harness, *dh_opts, "--", *HEADLESS_ARGS[harness](prompt), **kw)

    def world(self):
        from dh_cli.worlds.local import LocalWorld

        return LocalWorld(Path(self.env["DH_HOME"]) / "dh.db")


def write_configs(home: Path, url: str) -> None:
    agent = home / "pi-agent"
    agent.mkdir(parents=True, exist_ok=True)
    (agent / "models.json").write_text(json.dumps({"providers": {"mock": {
        "baseUrl": url, "api": "anthropic-messages", "apiKey": "x",
        "models": [{"id": "mock-claude", "reasoning": False, "contextWindow": 200000, "maxTokens": 8192}]}}}))
    codex = home / ".codex"
    codex.mkdir(parents=True, exist_ok=True)
    (codex / "config.toml").write_text(
        'model = "mock-model"\nmodel_provider = "mock"\napproval_policy = "never"\n'
        'sandbox_mode = "danger-full-access"\ncheck_for_update_on_startup = false\n'
        f'[model_providers.mock]\nname = "Mock"\nbase_url = "{url}/v1"\nenv_key = "MOCK_API_KEY"\n'
        'wire_api = "responses"\nrequest_max_retries = 0\nstream_max_retries = 0\n'
        '[features]\nplugins = false\nremote_plugin = false\napps = false\ntool_suggest = false\n')
    config = home / ".config" / "opencode"
    config.mkdir(parents=True, exist_ok=True)
    (config / "opencode.json").write_text(json.dumps({
        "autoupdate": False, "share": "disabled", "model": "mock/mock-model",
        "small_model": "mock/mock-model", "enabled_providers": ["mock"],
        "provider": {"mock": {"npm": "@ai-sdk/openai-compatible", "name": "Mock",
                              "options": {"baseURL": url + "/v1", "apiKey": "dummy"},
                              "models": {"mock-model": {"name": "Mock Model", "tool_call": True,
                                                        "limit": {"context": 128000, "output": 8192}}}}},
        "permission": {"edit": "allow", "bash": "allow", "webfetch": "deny", "external_directory": "allow"},
        "lsp": False, "formatter": False}))


SCRIPT = {"replies": [{"text": "Running a command.", "shell": "echo step0 >> steps.log"},
                      {"write": {"path": "a.txt", "content": "alpha\n"}},
                      {"read": {"path": "a.txt"}},
                      {"text": "All done."}]}
