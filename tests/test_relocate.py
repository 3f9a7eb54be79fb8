"""Moving a session to another checkout on another machine, on the real fixtures: each source
gets a new generation whose records carry the new cwd in every field that names it (and only
there: the rest of each line is byte-identical), the harness's path key follows (Claude Code's
project folder, Pi's session folder), and the files rebuilt from the log under the new home
parse and hold exactly that generation. The old generation stays in the log untouched."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from dh_cli import wrappers
from dh_cli.mirror.importer import import_sessions
from dh_cli.resume.cwd_rewrite import moved, rewrite_record, string_spans
from dh_cli.resume.rebuild import rebuild_session
from dh_cli.resume.relocate import relocate_session
from dh_cli.worlds.local import LocalWorld
from dh_cli.wrappers.claude import project_slug
from dh_cli.wrappers.pi import pi_session_dir_name

from .conftest import fixture_home, native_files, scenarios
from tests.helpers import harnesses

CASES = [(h, s) for h in harnesses.ALL for s in scenarios(h)]


def machine_b(tmp_path: Path) -> tuple[dict, str]:
    """Machine B's environment (harness homes in tmp) and its checkout, with a space and a
    non-ASCII letter in the path, which JSON writers must escape or keep consistently."""
    root = tmp_path / "machine-b"
    checkout = root / "src" / "the app ü"
    checkout.mkdir(parents=True)
    env = {"HOME": str(root), "CLAUDE_CONFIG_DIR": str(root / ".claude"),
           "CODEX_HOME": str(root / ".codex"), "PI_CODING_AGENT_DIR": str(root / "pi-agent"),
           "XDG_DATA_HOME": str(root / "share")}
    return env, str(checkout)


def cwd_fields(harness: str, lines: list[dict]) -> list[str]:
    """Every value that names the session's cwd, read the way each harness stores it."""
    if harness == "claude-code":
        return [row["cwd"] for row in lines if "cwd" in row]
    if harness == "pi":
        return [row["cwd"] for row in lines if row.get("type") == "session"]
    found = []
    for row in lines:
        payload = row.get("payload") or {}
        if row.get("type") in ("session_meta", "turn_context"):
            found.append(payload["cwd"])
        for block in payload.get("content") or [] if payload.get("type") == "message" else []:
            found += re.findall(r"<cwd>(.*?)</cwd>", block.get("text") or "")
    return found


def import_fixture(harness: str, scenario: str, tmp_path: Path):
    world = LocalWorld()
    home = fixture_home(harness, scenario, tmp_path)
    report = import_sessions(world, wrappers.get(harness), home, all_=True)
    return world, home, [world.get_session(item["id"]) for item in report.sessions]


@pytest.mark.parametrize("harness,scenario", [c for c in CASES if c[0] != "opencode"])
def test_moved_session_rebuilds_with_only_the_new_cwd(harness, scenario, tmp_path):
    world, home, sessions = import_fixture(harness, scenario, tmp_path)
    env, new = machine_b(tmp_path)
    original = native_files(home)
    wrapper = wrappers.get(harness)
    for session in sessions:
        old = session.cwd
        before = {s.relpath: s for s in world.sources(session.id)}
        plan = relocate_session(world, wrapper, session, env, new_cwd=new)
        assert plan.moved and plan.records > 0 and plan.new_home == str(wrapper.home(env))
        moved_session = world.get_session(session.id)
        assert (moved_session.cwd, moved_session.home) == (new, str(wrapper.home(env)))
        rebuilt = rebuild_session(world, moved_session)
        assert moved_session.native_path == str(rebuilt[0].path)
        for n, (item, (relpath, source)) in enumerate(zip(rebuilt, before.items())):
            target = wrapper.home(env) / expected_relpath(harness, relpath, new)
            assert item.path == target
            data = target.read_bytes()
            if source.kind == "file":  # e.g. a subagent's meta.json: moved as it is
                assert data == original[relpath]
                continue
            lines = [json.loads(line) for line in data.splitlines()]
            fields = cwd_fields(harness, lines)
            assert fields or n > 0
            assert all(f == new or f.startswith(new + "/") for f in fields), fields
            # everything else byte-identical: putting the old cwd back gives the original file
            assert data.replace(new.encode(), old.encode()) == original[relpath]
            # the old generation is still in the log, as it was
            stats = world.source_stats(source.id)
            assert stats[0] == source.generation + 2
            old_gen = b"".join(world.raw_lines(source.id, source.generation))
            assert old_gen == original[relpath]


def expected_relpath(harness: str, relpath: str, new: str) -> str:
    parts = relpath.split("/")
    if harness == "claude-code" and parts[0] == "projects":  # tasks/<id>/ keep their path
        parts[1] = project_slug(new)
    elif harness == "pi":
        parts[1] = pi_session_dir_name(new)
    return "/".join(parts)


@pytest.mark.parametrize("scenario", scenarios("opencode"))
def test_moved_opencode_session_exports_the_new_directory(scenario, tmp_path):
    world, _db, (session,) = import_fixture("opencode", scenario, tmp_path)
    env, new = machine_b(tmp_path)
    old = session.cwd
    (source,) = world.sources(session.id)
    versions = {r.offset: r.raw for r in world.records(session.id, source.id)}
    plan = relocate_session(world, wrappers.get("opencode"), session, env, new_cwd=new)
    assert plan.records > 0
    added = [r for r in world.records(session.id, source.id) if r.offset not in versions]
    assert len(added) == plan.records
    for record in added:  # each new version is an old one with the cwd moved, nothing else
        assert record.raw.decode().replace(new, old).encode() in versions.values()
    moved_session = world.get_session(session.id)
    (export_file,) = rebuild_session(world, moved_session)
    assert export_file.path.parent == Path(env["XDG_DATA_HOME"]) / "opencode"
    export = json.loads(export_file.path.read_bytes())
    assert export["info"]["directory"] == new
    cwds = [m["info"]["path"]["cwd"] for m in export["messages"] if "path" in m["info"]]
    assert cwds and set(cwds) == {new}


def carrier(harness: str):
    from dh_cli.wrappers import get

    return get(harness).carries_cwd


def test_rewrite_keeps_every_other_byte():
    """Odd spacing, escapes and nested JSON text: only the carrier values change."""
    old, new = "/home/a/proj", "/srv/b/the app"
    raw = (b'{ "type" : "user", "cwd":"/home/a/proj/sub",  "x":"\\u00fc /home/a/proj",'
           b' "message":{"content":[{"cwd":"/home/a/proj"}]}, "n": -1.5e3, "ok": true}\n')
    out = rewrite_record(raw, carrier("claude-code"), old, new)
    assert out == raw.replace(b'"cwd":"/home/a/proj/sub"', b'"cwd":"/srv/b/the app/sub"')
    pi = b'{"type":"session","version":3,"id":"x","cwd":"/home/a/proj"}\n'
    assert rewrite_record(pi, carrier("pi"), old, new) == pi.replace(b"/home/a/proj", b"/srv/b/the app")
    assert rewrite_record(b"not json\n", carrier("pi"), old, new) == b"not json\n"
    row = json.dumps({"table": "message", "data": json.dumps({"path": {"cwd": old, "root": "/"},
                                                              "other": old})}) + "\n"
    rewritten = json.loads(rewrite_record(row.encode(), carrier("opencode"), old, new))
    inner = json.loads(rewritten["data"])
    assert inner == {"path": {"cwd": new, "root": "/"}, "other": old}
    assert moved("file:///home/a/proj/x", old, new) == "file:///srv/b/the app/x"
    assert moved("/home/a/project", old, new) == "/home/a/project"  # not under the old cwd
    assert moved("<env><cwd>/home/a/proj</cwd></env>", old, new) == "<env><cwd>/srv/b/the app</cwd></env>"
    assert [s[3] for s in string_spans('{"a":["x",{"b":"y"}],"c":1}')] == ["x", "y"]
