"""A record whose token counts no call can have (negative, or past tokens.MOST) breaks no
view: SQLite's 64-bit SUM raised "integer overflow" on two records of -2**63 and stopped
`dh log list`, `dh log cost`, `dh log show` and the serve list. Read from a harness's file
the counts are taken as 0 and the record flagged (`dh log show` says so); pulled from a team
world that forged them, on PostgreSQL and Redis, they are stored as none and flagged."""

from __future__ import annotations

import re
from pathlib import Path

from dh_cli import wrappers
from dh_cli.mirror.importer import import_sessions
from dh_cli.serve.reads import Filters, list_page
from dh_cli.team.sync import _fresh, pull
from dh_cli.worlds.local import LocalWorld
from dh_cli.worlds.rows import RECORD_COLUMNS

from .conftest import fixture_home
from .helpers.cli import dh
from .helpers.team_worlds import Team, pg_url, redis_url, team  # noqa: F401  (fixtures)

FORGED = -(1 << 63)


def forged_home(tmp_path: Path) -> Path:
    """Claude Code's basic fixture with every call's input count set to -2**63."""
    home = fixture_home("claude-code", "basic", tmp_path)
    for path in home.rglob("*.jsonl"):
        path.write_text(re.sub(r'"input_tokens":\s*\d+', f'"input_tokens":{FORGED}', path.read_text()))
    return home


def views_work(sid: str) -> str:
    """dh log list, log cost and log show of the one session: each exits 0 with no negative
    count or cost; what show printed."""
    for args in (["log", "list"], ["log", "cost"], ["log", "show", sid]):
        done = dh(*args)
        assert done.returncode == 0 and "Error" not in done.stderr, (args, done.stderr)
        assert not re.search(r"\s-\d|\$-", done.stdout), (args, done.stdout)
    return done.stdout


def test_impossible_counts_in_a_harness_file_are_flagged_not_summed(tmp_path):
    report = import_sessions(LocalWorld(), wrappers.get("claude"), forged_home(tmp_path), all_=True)
    shown = views_work(report.sessions[0]["id"])
    assert "flagged record (bad_field)" in shown
    assert list_page(LocalWorld(), Filters.of({}))["rows"]  # the serve list


def test_impossible_counts_forged_in_a_world_are_dropped_on_pull(tmp_path, team: Team, monkeypatch):
    home = fixture_home("claude-code", "basic", tmp_path)
    first = LocalWorld()
    sid = import_sessions(first, wrappers.get("claude"), home, all_=True).sessions[0]["id"]
    remote = team.open()
    try:
        forge(first, remote, sid)
        monkeypatch.setenv("DH_HOME", str(tmp_path / "other-machine"))
        assert pull(remote, LocalWorld(), [sid]).records > 0
    finally:
        remote.close()
    views_work(sid)
    stored = LocalWorld().conn.execute(
        "SELECT tokens_in FROM records WHERE flags LIKE '%bad_field%'").fetchall()
    assert stored and all(count is None for (count,) in stored)
    assert list_page(LocalWorld(), Filters.of({}))["rows"]


def forge(local: LocalWorld, remote, sid: str) -> None:
    """The session written to the world as a forging team member would: every counted call
    claiming -2**63 input tokens, in its bytes and its column."""
    at = RECORD_COLUMNS.index("tokens_in")
    remote.put_session(local.get_session(sid))
    for source in local.sources(sid):
        target = remote.put_source(_fresh(source))
        for rows in local.read_rows(source, as_source_id=target.id):
            remote.append_rows([_forged(row, at) for row in rows])
        remote.put_source(source, update=True)


def _forged(row: tuple, at: int) -> tuple:
    if row[at] is None:
        return row
    raw = re.sub(rb'"input_tokens":\s*\d+', b'"input_tokens":%d' % FORGED, bytes(row[3]))
    return (*row[:3], raw, 0, *row[5:at], FORGED, *row[at + 1:])
