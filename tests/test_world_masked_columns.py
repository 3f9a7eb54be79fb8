"""Masked means every column: a default push to a team world sends no credential in any row
it writes, whether the record's bytes, the text columns parsed from them (tool_input,
tool_output) or an event's details. Secrets of every family redact.py knows are planted in
every text of every record of each real harness fixture (a JSON config as a tool's output
too, its quotes escaped in the record, deeper in a call's arguments), the sessions are
imported, pushed to the real PostgreSQL and Redis servers, and every table / key there is
read back, every record and object decoded. The same push to a world set to raw finds them
all: the planting reaches the server, so the scan can fail."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from dh_cli import wrappers
from dh_cli.mirror.importer import import_sessions
from dh_cli.team.sync import push
from dh_cli.worlds.local import LocalWorld

from .conftest import fixture_home, scenarios
from .helpers.harnesses import ALL as HARNESSES
from .helpers.team_worlds import Team, pg_url, redis_url, team  # noqa: F401  (fixtures)
from .workspace_stored import holds, world_bytes

SECRETS = {
    "api key": "sk-ant-api03-Pl4ntedKeyQx7TqZr9vW2pL4mN8",
    "github token": "ghp_Pl4ntedR2d2C3po4Bb8Ee1Yoda9Luke",
    "aws key": "AKIAPL4NTEDQ7ZXK2M4B",
    "url password": "Pl4ntedUrlPw9x7c5",
    "bearer token": "Pl4ntedBearer.abc123def456ghi",
    "password=": "Pl4ntedPassw0rdEq",
    "json password": "Pl4nted JSON pass",
}
PLANT = (f"{SECRETS['api key']} GITHUB_TOKEN={SECRETS['github token']} {SECRETS['aws key']}"
         f" postgres://app:{SECRETS['url password']}@db/app Authorization: Bearer {SECRETS['bearer token']}"
         f" password={SECRETS['password=']} " + json.dumps({"password": SECRETS["json password"]}))
# Where a harness writes text a person or a tool wrote: each such string gets PLANT appended.
TEXT_KEYS = {"text", "content", "command", "output", "stdout", "stderr", "prompt", "thinking",
             "description", "result", "error", "message", "old_string", "new_string", "patch",
             "query", "input", "arguments", "args", "aggregated_output", "formatted_output"}


def planted(value, key: str | None = None, inside_text: bool = False):
    """value with PLANT appended to every text string in it (a string holding JSON, as a
    Codex call's arguments, gets it inside that JSON: one escaping deeper)."""
    if isinstance(value, dict):
        return {k: planted(v, k, inside_text or k in ("input", "arguments", "args")) for k, v in value.items()}
    if isinstance(value, list):
        return [planted(v, key, inside_text) for v in value]
    if isinstance(value, str) and (key in TEXT_KEYS or inside_text):
        if value[:1] in "{[":
            try:
                return json.dumps(planted(json.loads(value), key, True))
            except ValueError:
                pass
        return PLANT + " " + value  # first: tool_output keeps the opening of a long text
    return value


def plant_files(home: Path) -> None:
    for path in [*home.rglob("*.jsonl"), *home.rglob("*.json")]:
        lines = path.read_text().splitlines()
        try:
            out = [json.dumps(planted(json.loads(line))) if line.strip() else line for line in lines]
        except ValueError:
            continue
        path.write_text("\n".join(out) + "\n")


def plant_opencode(db: Path) -> None:
    conn = sqlite3.connect(db)
    for table in ("message", "part"):
        for rowid, data in conn.execute(f"SELECT rowid, data FROM {table}").fetchall():
            conn.execute(f"UPDATE {table} SET data = ? WHERE rowid = ?",
                         [json.dumps(planted(json.loads(data))), rowid])
    conn.commit()
    conn.close()


def planted_log(tmp_path: Path) -> tuple[LocalWorld, list[str]]:
    """Every real fixture of every harness, planted and imported, each session with an
    event quoting the secrets too; the local log and its session ids."""
    world, ids = LocalWorld(), []
    for harness in HARNESSES:
        (tmp_path / harness).mkdir()
        for scenario in scenarios(harness):
            home = fixture_home(harness, scenario, tmp_path / harness)
            plant_opencode(home) if harness == "opencode" else plant_files(home)
            report = import_sessions(world, wrappers.get(harness), home, all_=True)
            assert report.sessions and not report.skipped, (harness, scenario, report.skipped)
            ids += [s["id"] for s in report.sessions]
    for sid in ids:
        world.add_event(sid, "note", {"said": "the run printed " + PLANT})
    return world, ids


def found(chunks: list[bytes]) -> list[str]:
    return [name for name, secret in SECRETS.items() if holds(chunks, secret.encode())]


def test_the_planting_reaches_every_derived_column(tmp_path):
    """The control: locally every secret is in both derived columns of every harness's
    records, so a push that forgot a column would send them."""
    world, _ = planted_log(tmp_path)
    for column in ("tool_input", "tool_output"):
        rows = world.conn.execute(
            f"SELECT s.harness, {column} FROM records r JOIN sessions s ON s.id = r.session_id"
            f" WHERE {column} IS NOT NULL").fetchall()
        assert {h for h, text in rows if all(s in text for s in SECRETS.values())} == set(HARNESSES), column


@pytest.mark.parametrize("mode", ["masked", "raw"])
def test_a_default_push_sends_no_secret_in_any_table(tmp_path, team: Team, mode):
    world, ids = planted_log(tmp_path)
    remote = team.open()
    try:
        if mode == "raw":
            remote.set_records_mode("raw")
        assert remote.masks_records == (mode == "masked")
        report = push(world, remote)
        assert report.records > 0 and len(report.sessions) == len(ids)
        leaks = found(world_bytes(remote))
    finally:
        remote.close()
    if mode == "raw":  # the control: the same push to a raw world carries every one of them
        assert leaks == list(SECRETS)
    else:
        assert leaks == []
