"""`dh restore` has the harness list a restored session again where its list is an index of
its own (Wrapper.relist): Codex's picker lists `threads` rows, which `codex delete` drops
with the rollout, and Codex's app-server writes them back when it lists with a rescan
(wrappers/codex_index.py). Over the fake Codex (tests/fakes/fake_codex_app_server.py); the
real programs' proof, their pickers read in tmux, is tests/e2e/test_restore_listed_real.py."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from dh_cli.wrappers import codex_index

from .fakes.model_server import FakeModelServer
from .rig import SCRIPT, Rig


@pytest.fixture
def rig(tmp_path):
    server = FakeModelServer(SCRIPT).start()
    yield Rig(tmp_path, server)
    server.stop()


def codex_session(rig) -> tuple[dict, Path]:
    assert rig.run("codex").returncode == 0
    world = rig.world()
    session = world.list_sessions()[-1]
    main = Path(world.mirrored_path(world.sources(session["id"])[0].id))
    world.close()
    return session, main


def thread_ids(rig) -> set[str]:
    conn = sqlite3.connect(Path(rig.env["CODEX_HOME"]) / "state_5.sqlite")
    try:
        return {row[0] for row in conn.execute("SELECT id FROM threads")}
    finally:
        conn.close()


def codex_delete(rig, thread_id: str, rollout: Path) -> None:
    """What `codex delete` leaves (0.171.0): neither the rollout nor the thread's row."""
    rollout.unlink()
    conn = sqlite3.connect(Path(rig.env["CODEX_HOME"]) / "state_5.sqlite")
    with conn:
        conn.execute("DELETE FROM threads WHERE id = ?", [thread_id])
    conn.close()


def test_a_restored_codex_thread_gets_its_row_back_from_codex_itself(rig):
    session, rollout = codex_session(rig)
    thread = session["harness_session_id"]
    codex_delete(rig, thread, rollout)
    assert thread not in thread_ids(rig)
    done = rig.dh("restore", "--lost", "--yes", "--json")
    assert done.returncode == 0, done.stderr
    restored = json.loads(done.stdout)
    assert restored[0]["status"] == "restored"
    assert restored[0]["listed"] == {"via": codex_index.VIA, "listed": True, "left": codex_index.UNNAMED}
    assert thread in thread_ids(rig)  # written by the (fake) app-server's rescan
    codex_delete(rig, thread, rollout)
    text = rig.dh("restore", "--lost", "--yes")
    assert b"listed again by the harness (codex app-server thread/list)" in text.stdout
    assert codex_index.UNNAMED.encode() in text.stdout  # what it could not bring, said


def test_a_dry_run_or_a_session_still_there_asks_nothing_of_codex(rig):
    session, rollout = codex_session(rig)
    codex_delete(rig, session["harness_session_id"], rollout)
    listed = json.loads(rig.dh("restore", "--lost", "--dry-run", "--json").stdout)
    assert listed[0]["status"] == "would restore" and listed[0]["listed"] is None
    assert session["harness_session_id"] not in thread_ids(rig)
    rig.dh("restore", "--lost", "--yes")
    present = json.loads(rig.dh("restore", session["id"], "--json").stdout)
    assert present[0]["status"] == "present" and present[0]["listed"] is None


def test_the_thread_is_looked_for_page_after_page(rig, monkeypatch):
    first = [codex_session(rig) for _ in range(3)][0][0]["harness_session_id"]
    conn = sqlite3.connect(Path(rig.env["CODEX_HOME"]) / "state_5.sqlite")
    with conn:  # the rollout is there, its row is not
        conn.execute("DELETE FROM threads WHERE id = ?", [first])
    conn.close()
    monkeypatch.setattr(codex_index, "PAGE", 1)  # the oldest thread comes on the last page
    home = Path(rig.env["CODEX_HOME"])
    done = codex_index.relist_thread(["codex"], rig.env, home, first)
    assert done == {"via": codex_index.VIA, "listed": True, "left": codex_index.UNNAMED} and first in thread_ids(rig)
    missing = codex_index.relist_thread(["codex"], rig.env, home, "not-a-thread")
    assert missing["listed"] is False and "did not list" in missing["why"]


def test_a_codex_that_cannot_list_is_said_so_and_the_file_stays_restored(rig, tmp_path):
    session, rollout = codex_session(rig)
    codex_delete(rig, session["harness_session_id"], rollout)
    broken = tmp_path / "old-codex"
    broken.write_text("#!/bin/sh\necho 'error: unrecognized subcommand app-server' >&2\nexit 2\n")
    broken.chmod(0o755)
    rig.env["DH_CODEX_BIN"] = str(broken)
    done = rig.dh("restore", "--lost", "--yes", "--json")
    assert done.returncode == 0
    restored = json.loads(done.stdout)[0]
    assert restored["status"] == "restored" and rollout.exists()
    assert restored["listed"]["listed"] is False
    assert "unrecognized subcommand" in restored["listed"]["why"]
