"""Every view that prints values from a transcript or a world goes through the filter of
`dh log show` (issue 30): credentials masked, terminal control sequences shown as text. A
hostile session (an API key, a GitHub token and escape sequences in a todo item, in its
prompt text, in its cwd and host, and in a world's lease row) is walked through every
command that shows it, on a terminal (pexpect) and through a pipe (--json)."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from dh_cli.worlds.local import LocalWorld

from .conftest import fixture_home
from .pg import pg_url  # noqa: F401  (fixture)
from .helpers.secrets_text import ESCAPES, GH, KEY, TEXT, dh, leaked

SEQUENCES = ("\x1b]0;", "\x1b]52;", "\x1b[8m", "\x07")
HOSTILE = f"/srv/{KEY}/{''.join(ESCAPES)}"


@pytest.fixture
def hostile(tmp_path):
    """A Claude Code session with a todo list, its first todo item and its cwd and host
    replaced by hostile text, imported (so indexed for search)."""
    home = fixture_home("claude-code", "todowrite", tmp_path)
    (native,) = home.rglob("*.jsonl")
    body = native.read_text().replace('"content":"Write a.txt"', '"content":' + json.dumps(TEXT))
    native.write_text(body)
    assert dh("import", "claude-code", "--all", "--home", str(home)).returncode == 0
    (found,) = LocalWorld().sessions()
    db = sqlite3.connect(Path(os.environ["DH_HOME"]) / "dh.db")
    with db:
        db.execute("UPDATE sessions SET cwd = ?, host = ?, state = 'crashed'", [HOSTILE, HOSTILE])
    db.close()
    return found.id


def on_a_terminal(*args: str) -> str:
    import pexpect

    child = pexpect.spawn(sys.executable, ["-m", "dh_cli", *args], env=dict(os.environ),
                          timeout=120, dimensions=(50, 400))
    child.expect(pexpect.EOF)
    return child.before.decode("utf-8", "replace")


def check(args: list[str]) -> None:
    printed = on_a_terminal(*args)
    assert "Traceback" not in printed, (args, printed)
    assert not [s for s in SEQUENCES if s in printed], (args, printed)
    assert leaked(printed) == [], (args, printed)
    piped = dh(*args, "--json") if args and args[0] in ("log", "world") else dh(*args)
    assert leaked(piped.stdout + piped.stderr) == [], (args, piped.stdout)


def test_every_local_view_of_a_hostile_session_is_filtered(hostile):
    shown_somewhere = on_a_terminal("log", "docs", hostile)
    assert "\\x1b]52;" in shown_somewhere  # the todo item is shown, its escapes as text
    for args in (["log", "docs", hostile], ["log", "search", "GITHUB_TOKEN"], ["log", "list"],
                 ["log", "show", hostile]):
        check(args)
    check([])  # bare `dh`: its sessions with their cwd


@pytest.mark.postgres
def test_the_world_s_views_are_filtered(hostile, pg_url):
    pushed = dh("world", "push", "postgres", "--url", pg_url)
    assert pushed.returncode == 0, pushed.stderr
    from dh_cli.team.postgres import PostgresWorld

    world = PostgresWorld(pg_url)
    try:
        world._rows("INSERT INTO dh.leases (session_id, holder_host, holder_boot_id, holder_pid,"
                    " epoch, heartbeat_at, ttl_s, refused) VALUES (%s, %s, 'b', 1, 1, now(), 15, %s)"
                    " RETURNING 1", [hostile, HOSTILE, TEXT])
    finally:
        world.close()
    for args in (["world", "status", "postgres", "--url", pg_url],
                 ["log", "list", "--world", "postgres", "--url", pg_url]):
        check(args)


def test_the_worker_s_lines_are_filtered(tmp_path, capsys, monkeypatch):
    from dh_cli import output
    from dh_cli.team.takeover import Claim
    from dh_cli.team.worker import Worker, WorkerOptions

    class Child:
        pid = os.getpid()

        def __init__(self, *args, **kw):
            pass

    monkeypatch.setattr(subprocess, "Popen", Child)
    worker = Worker(WorkerOptions("postgres", "postgresql://dh@db/dh", notice=output.note_shown))
    worker._start(Claim("1m8v0abcdeQXYZ", "pi", str(tmp_path), HOSTILE, 1, 2))
    err = capsys.readouterr().err
    assert "took over session" in err and "\\x1b]0;" in err
    assert not [s for s in SEQUENCES if s in err] and KEY not in err and GH not in err


@pytest.mark.parametrize("text", [
    TEXT, HOSTILE, "".join(ESCAPES), "a\r\nb\x08c\x0bd\x0ce\x07", "ok :smile: :thumbs_up-text: x:y:z",
    "[bold]not markup[/] \\[x]", "中文 wide  ", "", "\n\n", "tab\tthrough rich", "é\u200bzero width\x7f\x9b",
])
def test_print_text_prints_what_rich_prints(text, monkeypatch):
    from io import StringIO

    from dh_cli import output

    printed = []
    for show in (lambda: output.out.print(output.visible(text), markup=False, soft_wrap=True),
                 lambda: output.print_text(text)):
        monkeypatch.setattr(sys, "stdout", StringIO())
        show()
        printed.append(sys.stdout.getvalue())
    assert printed[0] == printed[1]
