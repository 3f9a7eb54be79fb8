"""Version awareness (issue 20): each wrapper's tried range, the installed release read from
the npm package a binary belongs to (both Pi package names and binary layouts) or from
`--version`, and the one line `dh run` says the first time it meets an untried release."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from dh_cli import versions
from dh_cli.wrappers import REGISTRY, get

from .fakes.model_server import FakeModelServer
from .rig import SCRIPT, Rig


@pytest.fixture
def rig(tmp_path):
    server = FakeModelServer(SCRIPT).start()
    yield Rig(tmp_path, server)
    server.stop()


def npm_package(root: Path, name: str, version: str, entry: str) -> Path:
    folder = root / "node_modules" / name
    (folder / entry).parent.mkdir(parents=True, exist_ok=True)
    (folder / "package.json").write_text(json.dumps({"name": name, "version": version}))
    (folder / entry).write_text("#!/usr/bin/env node\n")
    return folder / entry


@pytest.mark.parametrize("name, version, entry", [
    ("@mariozechner/pi-coding-agent", "0.73.1", "dist/cli.js"),
    ("@earendil-works/pi-coding-agent", "1.6.0", "dist/bundle/cli.js")])
def test_pi_under_both_package_names_and_layouts(tmp_path, name, version, entry):
    pi = get("pi")
    script = npm_package(tmp_path, name, version, entry)
    shim = tmp_path / "node_modules" / ".bin" / "pi"
    shim.parent.mkdir(parents=True, exist_ok=True)
    shim.symlink_to(script)
    assert entry in pi.entry_points
    assert versions.package_version(pi, [str(shim)]) == version  # `pi` on PATH
    assert versions.package_version(pi, ["/usr/bin/node", str(script)]) == version  # node cli.js
    assert versions.in_tried_range(pi, version)


def test_platform_packages_give_the_release(tmp_path):
    """Codex's binary sits in an aliased platform package whose version has a suffix."""
    codex = get("codex")
    binary = npm_package(tmp_path, "@openai/codex", "0.171.0-linux-x64",
                         "vendor/x86_64-unknown-linux-musl/bin/codex")
    assert versions.package_version(codex, [str(binary)]) == "0.171.0"
    claude = npm_package(tmp_path, "@anthropic-ai/claude-code-linux-x64", "2.1.332", "claude")
    assert versions.package_version(get("claude"), [str(claude)]) == "2.1.332"
    other = npm_package(tmp_path, "left-pad", "9.9.9", "bin/codex")
    assert versions.package_version(codex, [str(other)]) is None  # not the wrapper's package


def test_every_wrapper_names_its_tried_range():
    for wrapper in REGISTRY.values():
        low, high = (versions.numbers(v) for v in wrapper.tried_versions)
        assert low and high and low <= high, wrapper.name
        assert wrapper.packages, wrapper.name
    claude = get("claude")
    assert versions.in_tried_range(claude, "2.1.200")
    assert not versions.in_tried_range(claude, "2.1.333")
    assert not versions.in_tried_range(claude, "2.0.999")
    assert not versions.in_tried_range(claude, None)


def test_version_output_is_remembered_per_binary(tmp_path):
    binary = tmp_path / "claude"
    count = tmp_path / "count"
    binary.write_text(f"#!/bin/sh\necho x >> {count}\necho '2.1.400 (Claude Code)'\n")
    binary.chmod(0o755)
    cache = tmp_path / "cache.json"
    claude = get("claude")
    assert versions.installed_version(claude, [str(binary)], dict(os.environ), cache) == "2.1.400"
    assert versions.installed_version(claude, [str(binary)], dict(os.environ), cache) == "2.1.400"
    assert count.read_text() == "x\n"  # asked once


def fake_at(rig, harness: str, version: str) -> None:
    """The rig's fake harness made to report another release."""
    path = rig.bin_dir / {"claude-code": "claude"}.get(harness, harness)
    wrapped = rig.bin_dir / f"real-{path.name}"
    path.rename(wrapped)
    path.write_text(f'#!/bin/sh\nif [ "$1" = "--version" ]; then echo "{version}"; exit 0; fi\n'
                    f'exec "{wrapped}" "$@"\n')
    path.chmod(0o755)


def test_run_says_once_that_a_release_was_not_tried(rig):
    fake_at(rig, "codex", "0.172.0")
    first = rig.run("codex")
    assert first.returncode == 0, first.stderr.decode()
    line = "dh: codex 0.172.0 was not tried with dh (tried: 0.171.0); going on"
    assert first.stderr.decode().count(line) == 1
    second = rig.run("codex")
    assert second.returncode == 0 and line not in second.stderr.decode()
    world = rig.world()
    sessions = world.list_sessions()
    assert [s["harness_version"] for s in sessions] == ["0.172.0", "0.172.0"]
    for session in sessions:  # recorded in each session it ran in
        assert [e.details["version"] for e in world.events(session["id"])
                if e.type == "untried_version"] == ["0.172.0"]


def test_a_tried_release_is_recorded_without_a_word(rig):
    result = rig.run("claude-code")
    assert result.returncode == 0 and "not tried" not in result.stderr.decode()
    (session,) = rig.world().list_sessions()
    assert session["harness_version"] == "2.1.197"


def test_a_resume_on_another_release_than_the_session_ran_on_says_so_once(rig):
    first = rig.run("claude-code")
    assert first.returncode == 0, first.stderr.decode()
    (session,) = rig.world().list_sessions()
    fake_at(rig, "claude-code", "2.1.332")
    resumed = rig.dh("resume", session["id"], "--prompt", "go on")
    assert resumed.returncode == 0, resumed.stderr.decode()
    lines = [line for line in resumed.stderr.decode().splitlines() if "the session ran on" in line]
    assert lines == ["dh: resuming with claude-code 2.1.332; the session ran on 2.1.197 until now "
                     "(a new release changes the prompt, so the provider's cache starts over)"]
    assert rig.world().get_session(session["id"]).harness_version == "2.1.332"
    again = rig.dh("resume", session["id"], "--prompt", "go on")  # the release it now ran on
    assert again.returncode == 0 and "the session ran on" not in again.stderr.decode(), again.stderr.decode()
