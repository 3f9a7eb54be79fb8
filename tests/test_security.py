"""Secrets, file modes and paths from a log that came from elsewhere.

* Environment values whose names look like keys, tokens, secrets or passwords, secret flag
  values and URL passwords are never stored in dh.db (the database files are searched byte by
  byte, and the events) nor printed by dh (log show/list/export, notices, errors).
* dh.db, its WAL and lock files, and everything `dh log rebuild` or `dh log export` writes is
  private: files 0600, folders 0700 (even under umask 000).
* A log pulled from another machine cannot make dh write outside the harness home: relpaths
  with `..`, absolute paths, symlinked parents, NUL bytes, crafted OpenCode ids and crafted dh
  session ids are refused with one `Error:` line; a source path a row names is never used (the
  file goes to home/relpath of this machine's home, see dh_cli/confine.py)."""

from __future__ import annotations

import json
import os
import secrets
import socket
import stat
import sys
from pathlib import Path

import pytest

from dh_cli.models import Session, Source
from dh_cli.util import new_session_id, now_iso
from dh_cli.worlds.local import RECORD_COLUMNS, LocalWorld

from .conftest import fixture_home
from .helpers.cli import one_error
from .helpers.stand_ins import argv_harness, dh, marker_harness

WRITER = Path(__file__).parent / "fakes" / "pi_writer.py"


def token(prefix: str) -> str:
    return prefix + secrets.token_urlsafe(30).replace("-", "x").replace("_", "y")


SECRET_ENV = {
    "ANTHROPIC_API_KEY": token("sk-ant-api03-"),
    "OPENAI_API_KEY": token("sk-proj-"),
    "GITHUB_TOKEN": token("ghp_"),
    "MY_SERVICE_SECRET": token("svc-"),
    "DB_PASSWORD": token("pw-"),
    "AWS_SECRET_ACCESS_KEY": token("aws"),
}
FLAG_KEY, FLAG_TOKEN = token("sk-live-"), token("tok-")
URL_PW, PROMPT_PW = token("urlpw"), token("promptpw")
ARGS = ["-p", "--api-key", FLAG_KEY, f"--token={FLAG_TOKEN}", "--db-url",
        f"postgres://admin:{URL_PW}@db.internal/app", f"migrate postgres://u:{PROMPT_PW}@h/db now"]
ALL_SECRETS = [*SECRET_ENV.values(), FLAG_KEY, FLAG_TOKEN, URL_PW, PROMPT_PW]


def writer_env(tmp_path: Path, **extra) -> dict:
    (tmp_path / "proj").mkdir(exist_ok=True)
    return {**os.environ, **SECRET_ENV, "PI_CODING_AGENT_DIR": str(tmp_path / "pi-agent"),
            "DH_PI_BIN": f"{sys.executable} {WRITER}", "DH_WRITER_RECORDS": "40",
            "DH_WRITER_RATE": "400", **extra}


def found_in(data: bytes | str) -> list[str]:
    data = data.encode() if isinstance(data, str) else data
    return [s for s in ALL_SECRETS if s.encode() in data]


def test_secrets_are_never_stored_nor_printed(tmp_path, dh_home):
    """A run that crashes once (so there is a resume plan, a relaunch and a tool command that
    outlived the harness, with $GITHUB_TOKEN on its command line), a second session left
    FATAL and resumed by hand; then every byte of the log files and everything dh prints."""
    env = writer_env(tmp_path, DH_WRITER_KILL_AFTER="10", DH_WRITER_KILL_MARKER=str(tmp_path / "k1"),
                     DH_WRITER_TOOL_SECS="1.5", DH_WRITER_RATE="20")
    first = dh("run", "pi", "--", *ARGS, env=env, cwd=tmp_path / "proj")
    assert first.returncode == 0, first.stderr
    assert "resuming session" in first.stderr
    env2 = writer_env(tmp_path, DH_WRITER_KILL_AFTER="10", DH_WRITER_KILL_MARKER=str(tmp_path / "k2"))
    fatal = dh("run", "pi", "--max-restarts", "0", "--", *ARGS, env=env2, cwd=tmp_path / "proj")
    assert fatal.returncode != 0 and "giving up on session" in fatal.stderr
    world = LocalWorld()
    sessions = world.list_sessions()
    resumed = dh("resume", sessions[1]["id"], env=env2, cwd=tmp_path / "proj")
    assert resumed.returncode == 0, resumed.stderr
    assert "--api-key, --token not stored in the log (secret); resuming without it" in resumed.stderr
    relaunch = [e for e in world.events(sessions[1]["id"]) if e.type == "launch"][-1]
    assert "--api-key" not in relaunch.details["argv"] and "***" not in relaunch.details["argv"]
    commands = [t["command"] for e in world.events(sessions[0]["id"]) if e.type == "exited"
                for t in e.details["tools"]]
    assert any("--token ***" in c for c in commands), commands  # the tool's command line, scrubbed
    world.close()

    printed = first.stdout + first.stderr + fatal.stdout + fatal.stderr + resumed.stdout + resumed.stderr
    for args in (["log", "list"], ["log", "list", "--json"], ["config", "show", "--json"], ["doctor"]):
        out = dh(*args, env=env)
        printed += out.stdout + out.stderr
    for session in sessions:
        for args in (["log", "show", session["id"]], ["log", "show", session["id"], "--json"],
                     ["log", "show", session["id"], "--raw"],
                     *(["log", "export", session["id"], "--format", f] for f in ("md", "html", "jsonl"))):
            out = dh(*args, env=env)
            assert out.returncode == 0, out.stderr
            printed += out.stdout + out.stderr
    assert found_in(printed) == []
    stored = b"".join(p.read_bytes() for p in dh_home.rglob("*") if p.is_file())
    assert b"dh-tmp" not in stored and found_in(stored) == []
    assert "***" in json.dumps([e.details for s in sessions for e in LocalWorld().events(s["id"])])


def test_a_bad_postgres_url_is_reported_without_its_password(tmp_path):
    env = {**os.environ, "DH_POSTGRES_URL": f"postgresql://dh:{URL_PW}@127.0.0.1:9/dh"}
    result = dh("world", "push", "postgres", env=env)
    assert result.returncode != 0 and found_in(result.stdout + result.stderr) == []


# private files and folders ----------------------------------------------------------------------
def modes(root: Path) -> dict[str, int]:
    return {str(p.relative_to(root)): stat.S_IMODE(p.lstat().st_mode) for p in [root, *root.rglob("*")]}


def assert_private(root: Path, created: set[str] | None = None) -> None:
    for name, mode in modes(root).items():
        path = root / name
        if created is not None and name not in created:
            continue
        expected = 0o700 if path.is_dir() else 0o600
        assert mode == expected, f"{path}: {oct(mode)}"


def test_log_and_rebuilt_files_are_private_even_under_umask_000(tmp_path, dh_home):
    env = writer_env(tmp_path)
    home = fixture_home("pi", "basic", tmp_path)
    assert dh("import", "pi", "--all", "--home", str(home), env=env, umask=0).returncode == 0
    assert dh("run", "pi", "--", "-p", "go", env=env, cwd=tmp_path / "proj", umask=0).returncode == 0
    assert {"dh.db", "locks"} <= set(modes(dh_home))
    assert any(name.startswith("locks/") for name in modes(dh_home))
    assert_private(dh_home)

    imported = LocalWorld().list_sessions()[0]["id"]
    out = tmp_path / "restore" / "deep" / "er"
    assert dh("log", "rebuild", imported, "--to", str(out), env=env, umask=0).returncode == 0
    assert_private(tmp_path / "restore")

    native = next(home.rglob("*.jsonl"))
    new_dirs = {str(native.parent.relative_to(home)), str(native.relative_to(home))}
    native.unlink()
    native.parent.rmdir()
    assert dh("log", "rebuild", imported, env=env, umask=0).returncode == 0
    assert_private(home, created=new_dirs)

    exported = tmp_path / "new-folder" / "session.html"
    assert dh("log", "export", imported, "--format", "html", "-o", str(exported), env=env,
              umask=0).returncode == 0
    assert_private(tmp_path / "new-folder")


# a log from elsewhere cannot make dh write outside the harness home ---------------------------
@pytest.fixture
def outside(tmp_path):
    folder = tmp_path / "outside"
    folder.mkdir()
    yield folder
    assert list(folder.iterdir()) == [], "something was written outside the harness home"


def crafted(home: Path, relpath: str, path: str | None = None, harness: str = "pi",
            native_id: str = "n1", host: str = "elsewhere", session_id: str | None = None) -> str:
    """A session as `dh world pull` brings it (put_session/put_source, as the pull writes):
    every field chosen by the other side, and no place decided on this machine."""
    world = LocalWorld()
    session = Session(id=session_id or new_session_id(), harness=harness, harness_session_id=native_id,
                      home=str(home), cwd=str(home if home.is_dir() else home.parent), host=host,
                      state="crashed", native_path=path, argv=json.dumps(["-p", "x"]),
                      created_at=now_iso(), updated_at=now_iso())
    world.put_session(session)
    kind = "opencode" if harness == "opencode" else "jsonl"
    source = world.put_source(Source(0, session.id, kind, relpath, path))
    line = b'{"type":"message","id":"a1","parentId":null,"message":{"role":"user","content":"hi"}}\n'
    if harness == "opencode":
        line = (json.dumps({"table": "session", "id": native_id, "directory": str(home.parent),
                            "title": "x", "time_created": 1, "time_updated": 1}) + "\n").encode()
    world.append_rows([(source.id, 0, 0, line) + (None,) * (len(RECORD_COLUMNS) - 4)])
    world.close()
    return session.id


@pytest.mark.parametrize("relpath", ["../../escape.jsonl", "sessions/../../../escape.jsonl",
                                     "sessions/link/escape.jsonl", "a\x00b.jsonl", "", ".",
                                     "ABSOLUTE"])
def test_rebuild_refuses_paths_that_leave_the_home(tmp_path, outside, relpath):
    home = tmp_path / "home"
    (home / "sessions").mkdir(parents=True)
    (home / "sessions" / "link").symlink_to(outside)
    relpath = str(outside / "abs.jsonl") if relpath == "ABSOLUTE" else relpath
    session = crafted(home, relpath)
    env = {**os.environ, "PI_CODING_AGENT_DIR": str(home)}  # this machine's home is `home`
    one_error(dh("log", "rebuild", session, env=env), 1, "refusing")
    to = dh("log", "rebuild", session, "--to", str(tmp_path / "to"), env=env)
    if relpath == "sessions/link/escape.jsonl":  # no symlink under --to: a plain folder there
        assert to.returncode == 0 and (tmp_path / "to" / relpath).is_file()
        assert not (tmp_path / "to" / "sessions" / "link").is_symlink()
    else:
        one_error(to, 1, "refusing")
    assert not (tmp_path / "escape.jsonl").exists() and not (tmp_path.parent / "escape.jsonl").exists()


def test_a_crafted_opencode_session_id_names_no_file(tmp_path, outside):
    """OpenCode's session id names the export file dh writes (`dh log rebuild`) and the one
    it hands to `opencode import` (`dh resume` when the database lacks the session)."""
    db = tmp_path / "oc" / "opencode.db"
    db.parent.mkdir()
    session = crafted(db, "opencode.db", path=str(db), harness="opencode",
                      native_id=f"../../{outside.name}/x")
    env = {**os.environ, "DH_OPENCODE_BIN": str(marker_harness(tmp_path)),
           "XDG_DATA_HOME": str(tmp_path / "data")}
    one_error(dh("log", "rebuild", session, env=env), 1, "refusing")
    resumed = dh("resume", session, env=env, cwd=tmp_path)
    *notes, last = resumed.stderr.strip().splitlines()  # a note may say where it restores to
    assert resumed.returncode == 1 and "Traceback" not in resumed.stderr
    assert last.startswith("Error: refusing") and not any(n.startswith("Error") for n in notes)
    assert not (tmp_path / "launched").exists()


def test_resume_ignores_a_pulled_source_path_and_restores_under_this_home(tmp_path, outside):
    """A pulled session whose source path points elsewhere (here: a folder outside the home):
    that path is never written nor read; the file is restored at home/relpath of THIS
    machine's configured home, and the harness gets that file."""
    home = tmp_path / "home"
    home.mkdir()
    target = outside / "evil.jsonl"
    native_id = "01a2264b-8750-762a-918b-d8a8a906ba5f"
    session = crafted(tmp_path / "victim", "sessions/x.jsonl", path=str(target), native_id=native_id)
    env = {**os.environ, "DH_PI_BIN": str(argv_harness(tmp_path)), "PI_CODING_AGENT_DIR": str(home)}
    resumed = dh("resume", session, env=env, cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert not target.exists() and (home / "sessions" / "x.jsonl").is_file()
    argv = (tmp_path / "launched").read_text().split("\n")
    assert argv[argv.index("--session") + 1] == str(home / "sessions" / "x.jsonl")


def test_a_session_recorded_on_this_machine_may_live_outside_the_home(tmp_path):
    """The rule above does not break local sessions whose file dh itself recorded elsewhere
    (Pi's --session-dir): those are restored where they were."""
    from dh_cli.confine import source_path
    from dh_cli.wrappers import get as get_wrapper

    world = LocalWorld()
    session = world.create_session("pi", home=str(tmp_path / "home"), host=socket.gethostname())
    source = world.add_source(session.id, "jsonl", "x.jsonl", str(tmp_path / "elsewhere" / "x.jsonl"))
    assert source_path(world, get_wrapper("pi"), session, source) == tmp_path / "elsewhere" / "x.jsonl"


def test_resume_refuses_a_crafted_session_id(tmp_path, dh_home):
    home = tmp_path / "home"
    home.mkdir()
    session = crafted(home, "sessions/x.jsonl", session_id="../../../pwned")
    env = {**os.environ, "DH_PI_BIN": str(marker_harness(tmp_path))}
    one_error(dh("resume", session, env=env, cwd=tmp_path), 1, "refusing session id")
    assert not (tmp_path / "launched").exists()
    assert not (dh_home.parent.parent / "pwned.lock").exists()
    assert not list(tmp_path.parent.rglob("pwned.lock"))
