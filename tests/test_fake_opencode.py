"""The fake `opencode` against the fake model server, compared with the real 1.18.33 captures.

Each test runs the fake as a subprocess (as dh would) in a private HOME/XDG world, with `PWD` set
like the fixture driver did. Comparisons with the real rows and export use the captured
fixtures the project holds (`tests/fixtures/real/opencode`).
"""

from __future__ import annotations

import collections
import json
import os
import sqlite3
import subprocess
from pathlib import Path

import pytest

from tests.fakes.install import install_fake_harnesses
from tests.fakes.model_server import FakeModelServer

FIXTURE_DIR = Path(__file__).resolve().parent / "fixtures" / "real" / "opencode"
INTERRUPTED = "[Tool execution was interrupted]"


def basic_script(proj: Path, stall_reply_1: float = 0) -> dict:
    replies = [{"text": "I'll start by running a shell command.", "shell": "echo step0 >> steps.log"},
               {"write": {"path": str(proj / "a.txt"), "content": "alpha\n"}},
               {"read": {"path": str(proj / "a.txt")}},
               {"text": "All done."}]
    if stall_reply_1:
        replies[1].update(delay_s=stall_reply_1, delay_times=1)
    return {"replies": replies}


class World:
    """A private HOME/XDG tree, a project dir and a fake model server."""

    def __init__(self, tmp: Path, server: FakeModelServer):
        self.tmp, self.server, self.proj = tmp, server, tmp / "proj"
        self.proj.mkdir()
        config = tmp / "config" / "opencode"
        config.mkdir(parents=True)
        provider = {"npm": "@ai-sdk/openai-compatible", "name": "Mock",
                    "options": {"baseURL": server.url + "/v1", "apiKey": "dummy"},
                    "models": {"mock-model": {"name": "Mock Model", "tool_call": True,
                                              "limit": {"context": 128000, "output": 8192}}}}
        (config / "opencode.json").write_text(json.dumps(
            {"model": "mock/mock-model", "provider": {"mock": provider}}))
        self.data = tmp / "data"
        self.bin = install_fake_harnesses(tmp / "bin")["opencode"]
        self.env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower() and not k.startswith("DH_FAKE")}
        self.env.update(HOME=str(tmp), XDG_CONFIG_HOME=str(tmp / "config"), XDG_DATA_HOME=str(self.data),
                        XDG_STATE_HOME=str(tmp / "state"), XDG_CACHE_HOME=str(tmp / "cache"),
                        TMPDIR=str(tmp), NO_PROXY="*")

    @property
    def db_path(self) -> Path:
        return self.data / "opencode" / "opencode.db"

    def opencode(self, *args: str, cwd: Path | None = None, **env: str) -> subprocess.CompletedProcess:
        cwd = cwd or self.proj
        full_env = {**self.env, "PWD": str(cwd), **env}
        return subprocess.run([str(self.bin), *args], cwd=cwd, env=full_env, text=True,
                              capture_output=True, stdin=subprocess.DEVNULL, timeout=30)

    def run(self, *prompt: str, **env: str) -> subprocess.CompletedProcess:
        return self.opencode("run", "--format", "json", "--print-logs", "--title", "t", *prompt, **env)

    def delete_db(self) -> None:
        for suffix in ("", "-wal", "-shm"):
            Path(f"{self.db_path}{suffix}").unlink(missing_ok=True)

    def db(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.db_path)
        conn.row_factory = sqlite3.Row
        return conn

    def rows(self, table: str) -> list[dict]:
        with self.db() as conn:
            return [dict(r) for r in conn.execute(f"SELECT * FROM {table} ORDER BY rowid")]


@pytest.fixture
def world(tmp_path):
    server = FakeModelServer(basic_script(tmp_path / "proj")).start()
    yield World(tmp_path, server)
    server.stop()


def stdout_events(proc) -> list[dict]:
    return [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]


def real_fixture(scenario: str) -> Path:
    folder = FIXTURE_DIR / scenario
    assert (folder / "db" / "rows.jsonl").exists(), f"real OpenCode fixture {folder} missing"
    return folder


def real_rows(scenario: Path) -> dict[str, list[dict]]:
    tables = collections.defaultdict(list)
    for line in (scenario / "db" / "rows.jsonl").read_text().splitlines():
        row = json.loads(line)
        tables[row.pop("table")].append(row)
    return tables


def shape(data: dict) -> tuple:
    """What must match the real rows: the key sets of a message's or part's data, by kind."""
    state = data.get("state") or {}
    time_keys = frozenset(data["time"]) if isinstance(data.get("time"), dict) else None
    return (data.get("type") or data.get("role"), data.get("tool"), state.get("status"),
            frozenset(data), frozenset(state), frozenset(state.get("metadata") or {}), time_keys)


def shapes(rows: list[dict]) -> set[tuple]:
    return {shape(json.loads(r["data"])) for r in rows}


def export_shape(export: dict) -> set[tuple]:
    found = {("top", frozenset(export)), ("info", frozenset(export["info"]))}
    for msg in export["messages"]:
        found.add(("message", msg["info"]["role"], frozenset(msg["info"]), frozenset(msg)))
        found |= {("part",) + shape(p) for p in msg["parts"]}
    return found


# ---------------------------------------------------------------- a headless turn


def test_headless_turn_writes_rows_like_the_real_one(world):
    proc = world.run("Create the files.")
    assert proc.returncode == 0, proc.stderr
    events = stdout_events(proc)
    assert [e["type"] for e in events] == ["step_start", "text", "tool_use", "step_finish",
                                           "step_start", "tool_use", "step_finish",
                                           "step_start", "tool_use", "step_finish",
                                           "step_start", "text", "step_finish"]
    assert {e["sessionID"] for e in events} == {world.rows("session")[0]["id"]}
    assert (world.proj / "steps.log").read_text() == "step0\n"
    assert (world.proj / "a.txt").read_text() == "alpha\n"
    assert Path(f"{world.db_path}-wal").stat().st_size > 0  # left un-checkpointed, like the real one
    log = proc.stderr.splitlines()
    assert 'message="exiting loop"' in log[-2]
    assert log[-1].endswith(f'message="disposing instance" directory={world.proj}')

    session = world.rows("session")[0]
    assert (session["project_id"], session["directory"]) == ("global", str(world.proj))
    assert (session["tokens_input"], session["tokens_output"]) == (400, 40)
    user_part = json.loads(world.rows("part")[0]["data"])
    assert user_part == {"type": "text", "text": '"Create the files."'}
    messages = [json.loads(m["data"]) for m in world.rows("message")]
    assert [m.get("finish") for m in messages] == [None, "tool-calls", "tool-calls", "tool-calls", "stop"]
    assert {m.get("parentID") for m in messages[1:]} == {world.rows("message")[0]["id"]}


def test_rows_have_the_real_tables_columns_and_data_keys(world):
    assert world.run("Create the files.").returncode == 0
    real = real_fixture("basic")
    expected = real_rows(real)
    for table in ("session", "message", "part", "event", "event_sequence"):
        mine = world.rows(table)
        assert len(mine) == len(expected[table]), table
        assert set(mine[0]) == set(expected[table][0]), table
    assert shapes(world.rows("message")) == shapes(expected["message"])
    assert shapes(world.rows("part")) == shapes(expected["part"])
    count = collections.Counter
    assert count(e["type"] for e in world.rows("event")) == count(e["type"] for e in expected["event"])
    with world.db() as conn:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert tables >= {"session", "message", "part", "event", "event_sequence", "todo", "project"}


# ---------------------------------------------------------------- export / import


def test_export_has_the_real_shape_and_import_rebuilds_the_session(world):
    assert world.run("Create the files.").returncode == 0
    sid = world.rows("session")[0]["id"]
    exported = world.opencode("export", sid)
    assert exported.returncode == 0 and exported.stderr.strip() == f"Exporting session: {sid}"
    export = json.loads(exported.stdout)
    real = real_fixture("basic")
    assert export_shape(export) == export_shape(json.loads((real / "export.json").read_text()))

    before = {t: world.rows(t) for t in ("session", "message", "part")}
    (world.tmp / "x.json").write_text(exported.stdout)
    world.delete_db()
    imported = world.opencode("import", str(world.tmp / "x.json"))
    assert imported.stdout.strip() == f"Imported session: {sid}"

    assert world.rows("session") == before["session"]
    keep = {"message": ("id", "session_id", "time_created", "data"),  # part times are not exported
            "part": ("id", "message_id", "session_id", "data")}
    for table, cols in keep.items():
        assert [[r[c] for c in cols] for r in world.rows(table)] == [[r[c] for c in cols] for r in before[table]]
    assert json.loads(world.opencode("export", sid).stdout) == export


def test_import_rehomes_the_session_to_its_own_cwd(world):
    assert world.run("Create the files.").returncode == 0
    sid = world.rows("session")[0]["id"]
    (world.tmp / "x.json").write_text(world.opencode("export", sid).stdout)
    other = world.tmp / "elsewhere"
    other.mkdir()
    world.delete_db()
    assert world.opencode("import", str(world.tmp / "x.json"), cwd=other).returncode == 0
    session = world.rows("session")[0]
    assert (session["directory"], session["path"]) == (str(other), str(other).lstrip("/"))


# ---------------------------------------------------------------- crash and resume


def test_crash_while_waiting_on_the_model_then_resume(world):
    world.server.set_script(basic_script(world.proj, stall_reply_1=10))
    killed = world.run("Create the files.", DH_FAKE_CRASH="during-model=2")
    assert killed.returncode == -9
    assert stdout_events(killed)[-1]["type"] == "step_start"
    sid = stdout_events(killed)[0]["sessionID"]
    interrupted = world.rows("message")[-1]
    assert "finish" not in json.loads(interrupted["data"])
    assert [json.loads(p["data"]) for p in world.rows("part") if p["message_id"] == interrupted["id"]] == \
           [{"type": "step-start"}]
    expected = real_rows(real_fixture("killed"))
    assert shapes(world.rows("message")) == shapes(expected["message"])
    assert [e["type"] for e in world.rows("event")] == [e["type"] for e in expected["event"]]

    resumed = world.opencode("run", "--format", "json", "--session", sid, "continue")
    assert resumed.returncode == 0, resumed.stderr
    assert world.server.rebilled() == 0
    first_resumed = world.server.main_requests()[2]["body"]["messages"]
    assert [m["role"] for m in first_resumed] == ["system", "user", "assistant", "tool", "user"]
    assert first_resumed[-1]["content"] == "continue"
    assert world.rows("message")[2] == interrupted
    assert (world.proj / "a.txt").read_text() == "alpha\n"


@pytest.mark.parametrize("dh_text", [None, "dh: the command may already have run"])
def test_dangling_tool_part_is_answered_on_resume(world, dh_text):
    killed = world.run("Create the files.", DH_FAKE_CRASH="during-tool=1")
    assert killed.returncode == -9
    tool = next(p for p in world.rows("part") if json.loads(p["data"])["type"] == "tool")
    data = json.loads(tool["data"])
    assert data["state"]["status"] == "running"
    if dh_text:
        data["state"] = {"status": "error", "input": data["state"]["input"], "error": dh_text,
                         "time": {"start": data["state"]["time"]["start"], "end": data["state"]["time"]["start"]}}
        with world.db() as conn:
            conn.execute("UPDATE part SET data=? WHERE id=?", (json.dumps(data), tool["id"]))
    sid = world.rows("session")[0]["id"]
    assert world.opencode("run", "--session", sid, "continue").returncode == 0
    resumed = world.server.main_requests()[1]["body"]["messages"]
    results = [m["content"] for m in resumed if m["role"] == "tool"]
    assert results == [dh_text or INTERRUPTED]
    assert world.server.rebilled() == 0


# ---------------------------------------------------------------- smaller surfaces


def test_title_side_call_todowrite_and_version(world):
    todos = [{"id": "1", "content": "Write a.txt", "status": "completed", "priority": "high"},
             {"id": "2", "content": "Report back", "status": "in_progress", "priority": "medium"}]
    world.server.set_script({"replies": [{"tool_call": {"name": "todowrite", "arguments": {"todos": todos}}},
                                         {"text": "ok"}], "side_text": "Fixture title"})
    proc = world.opencode("run", "--format", "json", "plan it")
    assert proc.returncode == 0, proc.stderr
    assert len(world.server.side_requests()) == 1
    assert world.rows("session")[0]["title"] == "Fixture title"
    assert [(t["content"], t["status"], t["position"]) for t in world.rows("todo")] == \
           [("Write a.txt", "completed", 0), ("Report back", "in_progress", 1)]
    tool_use = next(e for e in stdout_events(proc) if e["type"] == "tool_use")
    assert tool_use["part"]["state"]["title"] == "1 todos"
    assert world.opencode("--version").stdout.strip() == "1.18.33"
