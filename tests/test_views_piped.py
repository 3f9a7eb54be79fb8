"""Text views print no control sequences through a pipe either (`dh log show | head` ends on
a terminal): a record's OSC 0 title, OSC 52 clipboard write and hidden text are shown as
visible `\\x1b…` text by `dh log search`, `dh log show`, `dh log list`, bare `dh`,
`dh workspace diff` and the Markdown export; `--raw` keeps the bytes and `--json` escapes
them."""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import pytest

from dh_cli.worlds.local import LocalWorld

from .helpers.crafted_snapshots import crafted, file
from .helpers.secrets_text import ESCAPES, KEY, TEXT, dh, imported_pi_prompt

SEQUENCES = ("\x1b]0;", "\x1b]52;", "\x1b[8m", "\x07")
HOSTILE_NAME = "notes" + "".join(ESCAPES)


@pytest.fixture
def hostile(tmp_path):
    """A Pi session whose last prompt and cwd hold escapes, with one workspace snapshot
    holding a file named with them."""
    sid, native = imported_pi_prompt(tmp_path, TEXT)
    world = LocalWorld()
    crafted(world, sid, [file(HOSTILE_NAME)])
    world.close()
    db = sqlite3.connect(Path(os.environ["DH_HOME"]) / "dh.db")
    with db:
        db.execute("UPDATE sessions SET cwd = ?, state = 'crashed'", ["/srv/" + "".join(ESCAPES)])
    db.close()
    return sid, native


def test_text_views_show_escapes_as_text_through_a_pipe(hostile):
    sid, _ = hostile
    for args in (["log", "show", sid], ["log", "show", sid, "--no-pager"], ["log", "search", "pwned"],
                 ["log", "list"], [], ["workspace", "diff", sid], ["log", "export", sid, "--format", "md"]):
        out = dh(*args, env={"COLUMNS": "200"})  # wide enough for `dh log list` to show the cwd
        assert out.returncode == 0, (args, out.stderr)
        assert not [s for s in SEQUENCES if s in out.stdout], (args, out.stdout)
        assert "\\x1b]" in out.stdout, (args, out.stdout)  # shown, as text


def test_search_finds_a_word_with_an_underscore_and_never_shows_part_of_a_key(hostile):
    out = dh("log", "search", "GITHUB_TOKEN")
    assert out.returncode == 0, out.stderr
    assert "GITHUB_TOKEN=***" in out.stdout
    secret = KEY.removeprefix("sk-ant-api03-")  # the prefix stays, naming what was masked
    assert not [piece for piece in (secret[i:i + 8] for i in range(len(secret) - 8)) if piece in out.stdout]


def test_raw_and_json_keep_their_forms(hostile):
    sid, native = hostile
    raw = dh("log", "show", sid, "--raw", "--show-secrets")
    assert raw.stdout.encode("utf-8", "surrogateescape") == native.read_bytes()  # byte-exact
    for args in (["log", "show", sid, "--json"], ["workspace", "diff", sid, "--json"]):
        out = dh(*args)
        assert out.returncode == 0, (args, out.stderr)
        assert "\\u001b]52;" in out.stdout and "\x1b" not in out.stdout, args
        json.loads(out.stdout)
