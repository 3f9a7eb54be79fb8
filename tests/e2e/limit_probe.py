"""Capture what a real harness does at a provider's limit: `python -m tests.e2e.limit_probe
HARNESS VERSION_SET STYLE WINDOW [ADVERTISE] [--api anthropic|openai] [--out DIR]` runs the
harness headless (no dh) against the fake model server refusing from its 2nd model request
on, and writes to DIR the server's request timeline, the harness's output and exit code, and
its native session state as dh logs it (native.jsonl: the Pi and OpenCode fixtures under
tests/fixtures/limits/ are these files)."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

from tests.e2e import install
from tests.e2e.conftest import make_real_rig
from tests.rig import HEADLESS_ARGS, SCRIPT

# the provider configs that make Pi speak Chat Completions and OpenCode the Messages API
PI_OPENAI = {"baseUrl": "{url}/v1", "api": "openai-completions", "apiKey": "x",
             "models": [{"id": "mock-gpt", "reasoning": False, "contextWindow": 200000, "maxTokens": 8192}]}
OPENCODE_ANTHROPIC = {"npm": "@ai-sdk/anthropic", "name": "MockA",
                      "options": {"baseURL": "{url}/v1", "apiKey": "x"},
                      "models": {"mock-claude": {"name": "Mock Claude", "tool_call": True,
                                                 "limit": {"context": 128000, "output": 8192}}}}


def other_api(rig, harness: str) -> list[str]:
    """Point the harness at the other API; the headless args to use."""
    url = rig.server.url
    if harness == "pi":
        models = rig.tmp / "pi-agent" / "models.json"
        data = json.loads(models.read_text())
        data["providers"]["mockoai"] = json.loads(json.dumps(PI_OPENAI).replace("{url}", url))
        models.write_text(json.dumps(data))
        return ["-p", "--mode", "json", "--provider", "mockoai", "--model", "mock-gpt", "Create the files."]
    if harness == "opencode":
        config = rig.tmp / ".config" / "opencode" / "opencode.json"
        data = json.loads(config.read_text())
        data["provider"]["mocka"] = json.loads(json.dumps(OPENCODE_ANTHROPIC).replace("{url}", url))
        data["enabled_providers"] = ["mock", "mocka"]
        data["model"] = data["small_model"] = "mocka/mock-claude"
        config.write_text(json.dumps(data))
        return HEADLESS_ARGS[harness]("Create the files.")
    raise SystemExit(f"{harness}: one API only")


NATIVE = {"pi": "pi-agent/sessions", "opencode": ".local/share/opencode",
          "claude-code": ".claude/projects", "codex": ".codex/sessions"}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("harness")
    ap.add_argument("version_set")
    ap.add_argument("style")
    ap.add_argument("window", type=float)
    ap.add_argument("advertise", type=float, nargs="?")
    ap.add_argument("--api", default="native")
    ap.add_argument("--out", default="/tmp/limits-explore")
    ap.add_argument("--timeout", type=float, default=300)
    a = ap.parse_args()
    installed = install.ensure(version_set=a.version_set)
    name = f"{a.harness}-{a.version_set}-{a.style}-{a.api}-{int(a.window)}-{a.advertise}"
    tmp = Path(a.out) / name
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    rig = make_real_rig(tmp, SCRIPT, installed)
    args = HEADLESS_ARGS[a.harness]("Create the files.") if a.api == "native" else other_api(rig, a.harness)
    rig.server.limit_window(a.style, a.window, from_request=2, advertise=a.advertise)
    exe = installed.bins[a.harness]
    start = time.time()
    proc = subprocess.Popen([*exe, *args], cwd=rig.proj, env=rig.env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=a.timeout)
        code = proc.returncode
    except subprocess.TimeoutExpired:  # its helpers keep the pipes open: end the group
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        code = "timeout"
    took = time.time() - start
    rig.server.stop()
    (tmp / "stdout").write_bytes(out)
    (tmp / "stderr").write_bytes(err)
    timeline = [(round(e["t"] - start, 1), e["kind"], e["refused"]) for e in rig.server.log
                if e["event"] == "request"]
    summary = {"exit": code, "seconds": round(took, 1), "requests": timeline,
               "completed": rig.server.completed_counts()}
    (tmp / "summary.json").write_text(json.dumps(summary, indent=1))
    if a.harness in ("pi", "opencode"):
        (tmp / "native.jsonl").write_bytes(b"".join(native_rows(a.harness, tmp)))
    print(name, json.dumps(summary))


if __name__ == "__main__":
    main()


def native_rows(harness: str, tmp: Path) -> list[bytes]:
    """The session's native state as dh logs it, from the user's prompt on: Pi's session
    file lines, OpenCode's message and part rows (`{"table": …, <columns>}`)."""
    if harness == "pi":
        (path,) = (tmp / NATIVE["pi"]).rglob("*.jsonl")
        lines = path.read_bytes().splitlines(keepends=True)
        first = next(i for i, line in enumerate(lines) if b'"role":"user"' in line)
        return lines[first:]
    if harness == "opencode":
        from dh_cli.wrappers.opencode_db import list_sessions, session_rows

        db = tmp / NATIVE["opencode"] / "opencode.db"
        ((session, _),) = list_sessions(db)
        return [row for row in session_rows(db, session) if json.loads(row)["table"] in ("message", "part")]
    raise SystemExit(f"{harness}: captured by hand (tests/fixtures/limits/MANIFEST.md)")
