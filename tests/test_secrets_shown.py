"""Issue 14, finding 7: credentials inside transcripts are masked wherever dh shows or sends
them (log show / --json / --raw / --follow, log list, export, a world push) unless
--show-secrets; a password in the config is always masked (config show, --json, doctor);
terminal escape sequences in records never reach a terminal. The local log keeps the native
bytes (`dh log rebuild` is byte-exact)."""

from __future__ import annotations

import json
import os
import sys

import pytest


from .pg import pg_url  # noqa: F401  (fixture)
from .helpers.secrets_text import KEY, TEXT, dh, imported_pi_prompt, leaked


@pytest.fixture
def session(tmp_path):
    return imported_pi_prompt(tmp_path, TEXT)


def test_show_list_and_export_mask_secrets_unless_asked(session, tmp_path):
    sid, native = session
    commands = [["log", "show", sid], ["log", "show", sid, "--json"], ["log", "show", sid, "--raw"],
                ["log", "list", "--json"], *(["log", "export", sid, "--format", f] for f in ("md", "html", "jsonl"))]
    for args in commands:
        out = dh(*args)
        assert out.returncode == 0, (args, out.stderr)
        assert leaked(out.stdout + out.stderr) == [], args
    for args in commands[:3] + commands[4:]:
        shown = dh(*args, "--show-secrets")
        assert shown.returncode == 0 and leaked(shown.stdout), args
    exported = tmp_path / "s.md"
    assert dh("log", "export", sid, "-o", str(exported)).returncode == 0
    assert leaked(exported.read_text()) == []
    rebuilt = dh("log", "rebuild", sid, "--to", str(tmp_path / "to"))
    assert rebuilt.returncode == 0
    (copy,) = (tmp_path / "to").rglob("*.jsonl")
    assert copy.read_bytes() == native.read_bytes()  # the log kept the native bytes


def test_escape_sequences_never_reach_a_terminal(session):
    import pexpect

    sid, _ = session
    for args in (["log", "show", sid], ["log", "show", sid, "--raw"], ["log", "show", sid, "--show-secrets"]):
        child = pexpect.spawn(sys.executable, ["-m", "dh_cli", *args], env=dict(os.environ),
                              timeout=60, dimensions=(50, 400))
        child.expect(pexpect.EOF)
        printed = child.before.decode("utf-8", "replace")
        for sequence in ("\x1b]0;", "\x1b]52;", "\x1b[8m", "\x07"):
            assert sequence not in printed, (args, sequence)
        if "--raw" not in args:  # (a JSON line holds ESC as \u001b, harmless as it is)
            assert "\\x1b]52;" in printed, args  # shown, as text


def test_a_config_password_is_always_masked(tmp_path):
    config = tmp_path / "cfg" / "dh" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text('postgres_url = "host=127.0.0.1 port=9 user=dh password=Hunter2Secret dbname=dh"\n')
    env = {"XDG_CONFIG_HOME": str(tmp_path / "cfg")}
    for args in (["config", "show"], ["config", "show", "--json"], ["doctor"], ["doctor", "--json"]):
        out = dh(*args, env=env)
        assert "Hunter2Secret" not in out.stdout + out.stderr, args
        assert "Traceback" not in out.stderr


@pytest.mark.postgres
def test_a_push_masks_by_default_and_a_raw_world_keeps_bytes(session, tmp_path, pg_url):
    import psycopg

    sid, native = session
    env = {"DH_POSTGRES_URL": pg_url}
    assert dh("world", "push", "postgres", env=env).returncode == 0
    with psycopg.connect(pg_url) as conn:
        stored = b"".join(bytes(r[0]) for r in conn.execute("SELECT raw FROM dh.records"))
        flagged = conn.execute("SELECT count(*) FROM dh.records WHERE flags LIKE '%masked%'").fetchone()[0]
    assert leaked(stored.decode("utf-8", "replace")) == [] and flagged == 1
    again = dh("world", "push", "postgres", env=env)
    assert again.returncode == 0 and "0 record(s)" in again.stdout and "diverged" not in again.stderr
    status = dh("world", "status", "postgres", "--json", env=env)
    assert [r["status"] for r in json.loads(status.stdout)] == ["in sync"]
    other = {**env, "DH_HOME": str(tmp_path / "B"), "PI_CODING_AGENT_DIR": str(tmp_path / "B-pi")}
    assert dh("world", "pull", "postgres", env=other).returncode == 0
    rebuilt = dh("log", "rebuild", sid, env=other)
    assert rebuilt.returncode == 0 and "came from a world that masks credentials" in rebuilt.stderr
    assert dh("world", "records", "postgres", "raw", env=env).stdout.strip().endswith("records raw")
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("TRUNCATE dh.ws_snapshots, dh.records, dh.events, dh.sources, dh.sessions, dh.leases")
    assert dh("world", "push", "postgres", env=env).returncode == 0
    with psycopg.connect(pg_url) as conn:
        stored = b"".join(bytes(r[0]) for r in conn.execute("SELECT raw FROM dh.records"))
    assert KEY.encode() in stored
