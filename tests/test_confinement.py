"""Issue 14, findings 1 and 2: nothing from a world or a transcript decides where dh writes,
what it reads, or which flags a harness gets.

The crafted world is a real PostgreSQL database whose rows are written by SQL, as anyone who
can write to a shared world could: the session names the victim's home, cwd, host (this
machine's own name) and a `native_path` of ~/.bashrc; its source names `.ssh/authorized_keys`
as relpath and ~/.netrc as path. Then `dh world pull`, `dh log rebuild` and `dh resume` run
as the victim, with this machine's configured harness home elsewhere."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
from pathlib import Path

import pytest

from dh_cli.worlds.local import LocalWorld

from . import pg
from .conftest import FIXTURES
from .helpers import harnesses
from .pg import pg_url  # noqa: F401  (fixture)
from .helpers.cli import one_error
from . import rig

NETRC_TOKEN = "netrc-token-6a1c0f2e9d"
NATIVE_ID = "01a2264b-8750-762a-918b-d8a8a906ba5f"
PI_RELPATH = f"sessions/--victim--/2026-12-01T00-00-00-000Z_{NATIVE_ID}.jsonl"


def dh(*args, env, cwd=None) -> subprocess.CompletedProcess:
    return rig.dh(*args, env=env, cwd=cwd, inherit=False)


def argv_harness(folder: Path) -> Path:
    """A harness binary that writes the argv it got, one word a line, and exits 0."""
    script = folder / "harness-argv"
    script.write_text(f"#!/bin/sh\nfor a in \"$@\"; do echo \"$a\"; done > {folder / 'launched'}\n")
    script.chmod(0o755)
    return script


def snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() if p.is_file() else b"<dir>"
            for p in sorted(root.rglob("*"))}


@pytest.fixture
def victim(tmp_path):
    """A home with the files an attacker wants: read (.netrc) or written (.ssh, .bashrc)."""
    home = tmp_path / "victim"
    (home / ".ssh").mkdir(parents=True)
    (home / ".netrc").write_text(f"machine api.example.com login me password {NETRC_TOKEN}\n")
    (home / ".bashrc").write_text("echo hi\n")
    return home


def crafted_world(url: str, victim: Path, harness: str = "pi", relpath: str = ".ssh/authorized_keys",
                  native_id: str = NATIVE_ID, sid: str = "1m8evil0000001") -> str:
    """The rows as an attacker writes them to the shared world, by SQL."""
    import psycopg

    from dh_cli.team.postgres import PostgresWorld

    PostgresWorld(url).close()  # the schema, as any dh that used the world made it
    line = b'{"type":"message","id":"a1","parentId":null,"message":{"role":"user","content":"ssh-ed25519 AAAA attacker"}}\n'
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("INSERT INTO dh.sessions (id, harness, harness_session_id, cwd, home, native_path,"
                     " host, state, argv, created_at, updated_at) VALUES (%s, %s, %s, %s, %s, %s, %s,"
                     " 'crashed', %s, '2026-12-01T00:00:00Z', '2026-12-01T00:00:00Z')",
                     [sid, harness, native_id, str(victim), str(victim), str(victim / ".bashrc"),
                      socket.gethostname(), json.dumps(["-p", "x"])])
        (source_id,) = conn.execute(
            "INSERT INTO dh.sources (session_id, kind, relpath, path, updated_at) VALUES"
            " (%s, 'jsonl', %s, %s, '2026-12-01T00:00:00Z') RETURNING id",
            [sid, relpath, str(victim / ".netrc")]).fetchone()
        conn.execute("INSERT INTO dh.records (source_id, generation, \"offset\", raw, kind)"
                     " VALUES (%s, 0, 0, %s, 'user')", [source_id, line])
    return sid


def machine_env(tmp_path: Path, url: str) -> dict:
    here = tmp_path / "here"
    (here / "pi-home").mkdir(parents=True, exist_ok=True)
    (here / "proj").mkdir(exist_ok=True)
    return {**os.environ, "DH_POSTGRES_URL": url, "PI_CODING_AGENT_DIR": str(here / "pi-home"),
            "DH_PI_BIN": str(argv_harness(here))}


@pytest.mark.postgres
def test_rebuild_of_a_crafted_pulled_session_writes_only_under_this_machines_home(tmp_path, victim, pg_url):
    sid = crafted_world(pg_url, victim)
    env = machine_env(tmp_path, pg_url)
    before = snapshot(victim)
    assert dh("world", "pull", "postgres", env=env).returncode == 0
    rebuilt = dh("log", "rebuild", sid, env=env)
    assert rebuilt.returncode == 0, rebuilt.stderr
    assert snapshot(victim) == before, "dh wrote into the home a world row named"
    home = Path(env["PI_CODING_AGENT_DIR"])
    assert (home / ".ssh" / "authorized_keys").read_bytes().startswith(b'{"type":"message"')


@pytest.mark.postgres
def test_resume_of_a_crafted_pulled_session_reads_and_writes_nothing_outside(tmp_path, victim, pg_url):
    sid = crafted_world(pg_url, victim, relpath=PI_RELPATH)
    env = machine_env(tmp_path, pg_url)
    here = tmp_path / "here"
    before = snapshot(victim)
    assert dh("world", "pull", "postgres", env=env).returncode == 0
    resumed = dh("resume", sid, env=env, cwd=here / "proj")
    assert resumed.returncode == 0, resumed.stderr
    assert snapshot(victim) == before
    argv = (here / "launched").read_text().splitlines()
    session_file = Path(argv[argv.index("--session") + 1])
    assert session_file.is_relative_to(here / "pi-home") and session_file.is_file()
    assert NETRC_TOKEN.encode() not in Path(env["DH_HOME"], "dh.db").read_bytes()
    session = LocalWorld().get_session(sid)
    assert session.cwd == str(here / "proj") and session.home == str(here / "pi-home")
    pushed = dh("world", "push", "postgres", env=env)
    assert pushed.returncode == 0 and NETRC_TOKEN not in pushed.stdout + pushed.stderr


@pytest.mark.postgres
def test_a_second_pull_cannot_move_an_adopted_session_back(tmp_path, victim, pg_url):
    """Adopted once, the session's place here is this machine's; a later pull of newer rows
    naming the victim's paths again changes nothing of where dh reads or writes."""
    import psycopg

    sid = crafted_world(pg_url, victim, relpath=PI_RELPATH)
    env = machine_env(tmp_path, pg_url)
    here = tmp_path / "here"
    assert dh("world", "pull", "postgres", env=env).returncode == 0
    assert dh("resume", sid, env=env, cwd=here / "proj").returncode == 0
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("UPDATE dh.sessions SET home = %s, cwd = %s, native_path = %s,"
                     " updated_at = '2999-01-01T00:00:00Z'", [str(victim), str(victim), str(victim / ".bashrc")])
        conn.execute("UPDATE dh.sources SET path = %s, updated_at = '2999-01-01T00:00:00Z'",
                     [str(victim / ".netrc")])
    assert dh("world", "pull", "postgres", env=env).returncode == 0
    before = snapshot(victim)
    resumed = dh("resume", sid, env=env, cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    argv = (here / "launched").read_text().splitlines()
    assert Path(argv[argv.index("--session") + 1]).is_relative_to(here / "pi-home")
    assert snapshot(victim) == before
    assert NETRC_TOKEN.encode() not in Path(env["DH_HOME"], "dh.db").read_bytes()


# finding 2: a session id is never a flag --------------------------------------------------------
@pytest.mark.postgres
def test_a_world_session_id_shaped_like_a_flag_never_reaches_the_harness(tmp_path, victim, pg_url):
    sid = crafted_world(pg_url, victim, relpath="sessions/--p--/x.jsonl",
                        native_id="--dangerously-skip-permissions")
    env = machine_env(tmp_path, pg_url)
    assert dh("world", "pull", "postgres", env=env).returncode == 0
    one_error(dh("resume", sid, env=env, cwd=tmp_path / "here" / "proj"), 1, "refusing session id")
    assert not (tmp_path / "here" / "launched").exists()


def test_a_codex_rollout_whose_id_is_a_flag_is_never_resumed_with_it(tmp_path):
    home = tmp_path / "codex-home"
    src = next((FIXTURES / "codex" / "killed" / "codex-home").rglob("rollout-*.jsonl"))
    dest = home / src.relative_to(FIXTURES / "codex" / "killed" / "codex-home")
    dest.parent.mkdir(parents=True)
    lines = src.read_text().splitlines()
    first = json.loads(lines[0])
    first["payload"]["id"] = "--dangerously-bypass-approvals-and-sandbox"
    dest.write_text("\n".join([json.dumps(first), *lines[1:]]) + "\n")
    env = {**os.environ, "CODEX_HOME": str(home), "DH_CODEX_BIN": str(argv_harness(tmp_path))}
    imported = dh("import", "codex", "--all", env=env)
    assert "Traceback" not in imported.stderr
    sessions = LocalWorld().list_sessions()
    assert sessions or "not a codex session id" in imported.stderr  # refused at import, or:
    for session in sessions:
        resumed = dh("resume", session["id"], "--cwd", str(tmp_path), env=env, cwd=tmp_path)
        one_error(resumed, 1, "refusing session id")
    assert not (tmp_path / "launched").exists()


def test_a_claude_transcript_named_like_a_flag_is_never_resumed_with_it(tmp_path):
    src = next((FIXTURES / "claude-code" / "killed" / "claude-config" / "projects").rglob("*.jsonl"))
    home = tmp_path / "claude"
    dest = home / "projects" / src.parent.name / "--dangerously-skip-permissions.jsonl"
    dest.parent.mkdir(parents=True)
    shutil.copy(src, dest)
    env = {**os.environ, "CLAUDE_CONFIG_DIR": str(home), "DH_CLAUDE_BIN": str(argv_harness(tmp_path))}
    imported = dh("import", "claude", str(dest), env=env)
    assert "Traceback" not in imported.stderr
    for session in LocalWorld().list_sessions():
        resumed = dh("resume", session["id"], "--cwd", str(tmp_path), env=env, cwd=tmp_path)
        if resumed.returncode == 0:  # resumed by the id inside the file, never the file name
            argv = (tmp_path / "launched").read_text().splitlines()
            assert "--dangerously-skip-permissions" not in argv
            assert all(not a.startswith("--resume=--") for a in argv)
        else:
            assert "refusing session id" in resumed.stderr
    launched = tmp_path / "launched"
    assert not launched.exists() or "--dangerously-skip-permissions" not in launched.read_text().splitlines()


def test_every_wrapper_refuses_ids_that_are_not_its_shape():
    from dh_cli.pathrule import Refused, check_native_id
    from dh_cli.wrappers import get

    good = {"claude": NATIVE_ID, "codex": NATIVE_ID, "pi": NATIVE_ID,
            "opencode": "ses_dd9b3ee01ffeavu65Bcb9NtGc8"}
    for name, native_id in good.items():
        wrapper = get(name)
        assert check_native_id(wrapper, native_id) == native_id
        for bad in ("--yolo", f"{native_id} --yolo", f"-{native_id}", "", None, ["x"], "x" * 100000,
                    f"{native_id}\n", "../" + native_id):
            with pytest.raises(Refused):
                check_native_id(wrapper, bad)


# property: whatever relpath, id or home a row holds, nothing lands outside the allowed root ----
from hypothesis import HealthCheck, given, settings, strategies as st  # noqa: E402

PART = st.sampled_from(["..", ".", "", "a", "b.jsonl", "link", "sessions", "\x00", "-x", "~",
                        "/", "\\", " ", "\n", "..\x00", "%2e%2e", "projects"])
RELPATH = st.one_of(st.lists(PART, max_size=6).map("/".join), st.text(max_size=30))
IDS = st.one_of(st.text(max_size=60), st.sampled_from([NATIVE_ID, "ses_dd9b3ee01ffeavu65Bcb9NtGc8",
                                                      "--yolo", f"{NATIVE_ID} -x", "-" + NATIVE_ID]),
                st.integers(), st.none(), st.lists(st.text(max_size=3), max_size=2))


def _planted(root: Path) -> tuple[Path, Path]:
    """A home holding a symlink `link` to a folder outside it."""
    home, outside = root / "home", root / "outside"
    if not home.exists():
        (home / "sessions").mkdir(parents=True)
        outside.mkdir()
        (home / "link").symlink_to(outside)
        (home / "sessions" / "link").symlink_to(outside)
    return home, outside


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(relpath=RELPATH)
def test_property_no_relpath_writes_outside_the_home(tmp_path, relpath):
    from dh_cli.pathrule import Refused, under
    from dh_cli.resume.rebuild import write_file

    home, outside = _planted(tmp_path)
    try:
        target = under(home, relpath)
    except Refused:
        return
    assert target.resolve().is_relative_to(home.resolve())
    if not target.exists():
        write_file(target, b"x\n", force=False)
        assert target.resolve().is_relative_to(home.resolve())
        target.unlink()
    assert list(outside.iterdir()) == []


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(relpath=RELPATH, path=st.one_of(st.none(), st.sampled_from(["/etc/passwd", "~/.netrc", "x"])),
       row_home=st.sampled_from(["/", "/root", "/etc", "", "relative"]), kind=st.sampled_from(["jsonl", "opencode"]))
def test_property_a_pulled_source_is_read_only_under_the_configured_home(tmp_path, relpath, path,
                                                                         row_home, kind):
    """A source of a session that came from elsewhere (no place here): the one path dh may
    read or write for it is under this machine's configured home, whatever the row says."""
    from dh_cli.confine import source_path
    from dh_cli.pathrule import Refused
    from dh_cli.models import Session, Source
    from dh_cli.wrappers import get

    home, _ = _planted(tmp_path)
    harness = "opencode" if kind == "opencode" else "pi"
    env = {"PI_CODING_AGENT_DIR": str(home), "OPENCODE_DB": str(home / "opencode.db")}
    session = Session(id="1m8pulled00001", harness=harness, home=row_home, cwd=row_home, host=socket.gethostname())
    source = Source(7, session.id, kind, relpath, path)

    class Pulled:  # the local log of a session pulled, never adopted: no place, no mirror
        def place(self, _sid):
            return None

        def mirrored_path(self, _id):
            return path

    try:
        found = source_path(Pulled(), get(harness), session, source, env)
    except Refused:
        return
    assert found.resolve().is_relative_to(home.resolve())


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(relpath=RELPATH, row_path=st.one_of(st.none(), st.sampled_from(["/etc/passwd", "~/.netrc", "x"])),
       mirrored=st.one_of(st.none(), st.sampled_from(["/etc/passwd", "x"])), placed=st.booleans(),
       harness=st.sampled_from(["pi", "opencode"]))
def test_property_the_rule_alone_reads_a_source_under_the_home_or_where_this_mirror_read_it(
        tmp_path, relpath, row_path, mirrored, placed, harness):
    """The pure rule (pathrule.source_file, no log): the file is under the home, or the one
    this machine's mirror recorded when the session has a place here and the row names it."""
    from dh_cli.pathrule import Refused, source_file
    from dh_cli.wrappers import get

    home, _ = _planted(tmp_path)
    try:
        found = source_file(get(harness), home, relpath, row_path, mirrored, placed)
    except Refused:
        return
    recorded = placed and mirrored is not None and mirrored == row_path
    assert found == Path(mirrored) if recorded else found.resolve().is_relative_to(home.resolve())


def test_the_rule_alone_settles_a_row_to_its_place_here_and_leaves_a_settled_one():
    from dh_cli.models import Session
    from dh_cli.pathrule import settled_values

    pulled = Session(id="1m8pulled00001", harness="pi", home="/root", cwd="/etc", host="elsewhere",
                     native_path="/etc/passwd")
    assert settled_values(pulled, "/h", "/w", "/h/s.jsonl") == {
        "home": "/h", "cwd": "/w", "native_path": "/h/s.jsonl", "host": socket.gethostname()}
    settled = Session(id="1m8pulled00001", harness="pi", home="/h", cwd="/w", native_path="/h/s.jsonl")
    assert settled_values(settled, "/h", "/w", "/h/s.jsonl") is None


@settings(max_examples=500, deadline=None)
@given(native_id=IDS, harness=st.sampled_from(harnesses.ALL))
def test_property_an_accepted_id_is_one_plain_word(native_id, harness):
    from dh_cli.pathrule import Refused, check_native_id
    from dh_cli.wrappers import get

    wrapper = get(harness)
    try:
        accepted = check_native_id(wrapper, native_id)
    except Refused:
        return
    assert isinstance(accepted, str) and not accepted.startswith("-")
    assert accepted.isprintable() and " " not in accepted and "/" not in accepted
    argv = wrapper.resume_args(["-p", "x"], accepted, None, "go", True)
    carrying = [a for a in argv if accepted in a]
    assert carrying and all(a == accepted or a.endswith("=" + accepted) for a in carrying)
