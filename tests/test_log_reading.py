"""`dh log list` and `dh log show` as a person reads them: one line per session that fits the
terminal, most recent first, filters, short unique ids; a pager on a terminal only; one turn
for a turn that crashed and was resumed; no Python reprs anywhere."""

import datetime as dt
import json
import re
import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest

from dh_cli import wrappers
from dh_cli.errors import HarnessNotFound
from dh_cli.logviews.sessionlist import MIN_PREFIX, relative, short_prefixes
from dh_cli.supervisor.launch import find_binary
from dh_cli.worlds.local import LocalWorld

from .conftest import fixture_home
from .helpers.crashed import CRASH_EVENTS, import_killed_resumed
from .rig import dh

IMPORTS = [("claude-code", "basic"), ("codex", "multiturn"), ("pi", "basic"),
           ("claude-code", "killed-resumed")]


@pytest.fixture
def several(tmp_path, run_dh):
    for harness, scenario in IMPORTS:
        home = fixture_home(harness, scenario, tmp_path / scenario)
        assert run_dh("import", harness, "--all", "--home", str(home)).exit_code == 0
    return {s["harness"] + "/" + (s["title"] or ""): s
            for s in json.loads(run_dh("log", "list", "--json").stdout)}


def test_list_fits_80_columns_one_line_per_session(several, run_dh, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    lines = run_dh("log", "list").stdout.splitlines()
    assert lines[0].split() == ["ID", "HARNESS", "STATE", "ACTIVE", "TURNS", "TOKENS", "COST", "TITLE"]
    assert len(lines) == 1 + len(IMPORTS) and all(len(line) <= 80 for line in lines)
    # the title: the first prompt, clipped after a whole word to fit (how much fits depends on
    # the id column, whose prefixes are as long as the random ids need)
    assert re.search(r"  Create( the( files\.|…)|…)$", lines[1]), lines[1]
    assert "$0.0007" in lines[1]  # 4 Claude calls priced (see test_cost.py)
    monkeypatch.setenv("COLUMNS", "160")
    wide = run_dh("log", "list").stdout.splitlines()
    assert "CWD" in wide[0].split() and all(len(line) <= 160 for line in wide)
    assert any("/tmp/dhfx/" in line for line in wide)


def test_list_is_sorted_by_last_activity_with_iso_times_in_json(several, run_dh):
    listed = json.loads(run_dh("log", "list", "--json").stdout)
    times = [s["last_activity"] for s in listed]
    assert times == sorted(times, reverse=True)
    assert all(dt.datetime.fromisoformat(t.replace("Z", "+00:00")).year == 2026 for t in times)
    assert all(t.endswith("Z") for t in times)


def test_list_filters(several, run_dh, tmp_path, monkeypatch):
    def ids(*args):
        return [s["harness"] for s in json.loads(run_dh("log", "list", "--json", *args).stdout)]

    assert len(ids("--limit", "2")) == 2
    assert ids("--harness", "codex") == ["codex"]
    assert ids("--harness", "claude") == ["claude-code", "claude-code"]
    assert ids("--since", "2030-01-01") == [] and len(ids("--since", "2026-11-01")) == len(IMPORTS)
    assert ids("--since", "1h") == []  # the fixtures were captured days before "now"
    assert ids("--state", "imported") == ids() and ids("--state", "finished") == []
    assert ids("--cwd", "/tmp/dhfx/pi") == ["pi"] and ids("--cwd", "/tmp/dhfx/p") == []
    assert set(ids("--cwd", "/tmp/dhfx")) == {"claude-code", "codex", "pi"}
    monkeypatch.chdir(tmp_path)
    assert ids("--here") == []
    bad = run_dh("log", "list", "--since", "yesterday")
    assert bad.exit_code == 2 and "neither an age nor a date" in str(bad.exception)


def test_displayed_ids_are_the_shortest_unique_prefixes(dh_home):
    world = LocalWorld()
    # a thousand ids made as dh makes them in one busy minute share long prefixes
    made = [world.create_session("pi", id=f"1m8rdd{n:08d}").id for n in range(1000)]
    prefixes = short_prefixes(world)
    for sid in made:
        prefix = prefixes[sid]
        assert world.find_session(prefix).id == sid
        shorter = prefix[:-1]
        assert len(shorter) < MIN_PREFIX or sum(s.startswith(shorter) for s in made) > 1
    assert {len(p) for p in prefixes.values()} == {14}  # all differ in the last digits only
    lone = world.create_session("pi", id="1zzzzzzzzzzzzz").id
    assert short_prefixes(world)[lone] == "1zzz"


def test_relative_times():
    now = dt.datetime(2026, 12, 1, 12, 0, tzinfo=dt.timezone.utc)
    assert [relative(t, now) for t in ["2026-12-01T11:59:30Z", "2026-12-01T11:15:00.000Z",
                                       "2026-12-01T02:00:00Z", "2026-11-28T12:00:00Z",
                                       "2026-11-03T12:00:00Z", "2026-01-05T00:00:00Z"]] == [
        "just now", "45m ago", "10h ago", "3d ago", "4w ago", "2026-01-05"]


# show ---------------------------------------------------------------------------------------------
@pytest.fixture
def resumed(tmp_path, run_dh):
    world, session_id, _ = import_killed_resumed(tmp_path, run_dh)
    return world, session_id


def test_a_resumed_turn_is_one_turn_with_the_cut_marked_inside(resumed, run_dh):
    world, sid = resumed
    text = run_dh("log", "show", sid).stdout
    assert "[turn 1] user: Create the files." in text and "[turn 2]" not in text
    lines = text.splitlines()
    cut = lines.index("  ✗ cut off (the harness stopped here)")
    assert lines[cut - 1].startswith("  tool Bash [ok]") and lines[cut + 1].startswith("  ↻ resumed")
    assert "  user (resuming turn 1): continue" in lines[cut + 2:]
    for type_, details, attempt, phase in CRASH_EVENTS:  # as dh journals a supervised crash
        world.add_event(sid, type_, details, attempt, phase)
    text = run_dh("log", "show", sid).stdout
    assert "  ✗ crash: SIGKILL (attempt 1; $0.0002 of finished calls kept)" in text
    assert "[turn 2]" not in text
    # the one call finished before the kill was not billed again: 10 in, 5 out of Opus 4.8
    saved = json.loads(run_dh("log", "show", sid, "--json").stdout)["totals"]["cost"]
    assert saved["crashes"] == 1 and saved["saved_usd"] == pytest.approx(10 * 5e-6 + 5 * 25e-6)


def test_turn_and_last_select_turns(tmp_path, run_dh):
    home = fixture_home("codex", "multiturn", tmp_path)
    run_dh("import", "codex", "--all", "--home", str(home))
    (session,) = LocalWorld().list_sessions()
    every = run_dh("log", "show", session["id"]).stdout
    turns = [line for line in every.splitlines() if line.startswith("[turn ")]
    assert len(turns) == 3
    second = run_dh("log", "show", session["id"], "--turn", "2").stdout
    assert [line for line in second.splitlines() if line.startswith("[turn ")] == [turns[1]]
    last = run_dh("log", "show", session["id"], "--last", "2").stdout
    assert [line for line in last.splitlines() if line.startswith("[turn ")] == turns[1:]
    items = json.loads(run_dh("log", "show", session["id"], "--json", "--last", "1").stdout)["items"]
    assert items and {i["turn"] for i in items} == {3}


def test_no_python_reprs_in_show_or_help(tmp_path, run_dh):
    home = fixture_home("codex", "basic", tmp_path)
    run_dh("import", "codex", "--all", "--home", str(home))
    world = LocalWorld()
    (session,) = world.list_sessions()
    text = run_dh("log", "show", session["id"]).stdout
    assert "(mock-model)" in text and "None" not in text
    world.update_session(session["id"], cwd=None)
    assert "cwd" not in run_dh("log", "show", session["id"]).stdout.splitlines()[1]
    for args in (["--help"], ["run", "--help"], ["log", "list", "--help"], ["log", "show", "--help"]):
        help_text = run_dh(*args).stdout
        assert "<bool>" not in help_text and "<list" not in help_text and "<str>" not in help_text


def _on_a_terminal(args: list[str], env: dict) -> str:
    """Run dh with its stdout on a pseudo-terminal; returns what the terminal showed."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "dh_cli", *args], stdout=follower,
                            stderr=subprocess.STDOUT, env={**os.environ, **env})
    os.close(follower)
    shown = b""
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:
            break
        if not chunk:
            break
        shown += chunk
    assert proc.wait(timeout=60) == 0
    os.close(leader)
    return shown.decode(errors="replace")


def test_show_pages_on_a_terminal_only(resumed, tmp_path):
    _, sid = resumed
    paged = tmp_path / "paged.txt"
    env = {"PAGER": f"cat > {paged}", "PYTHONPATH": str(Path(__file__).parent.parent)}
    shown = _on_a_terminal(["log", "show", sid], env)
    assert "[turn 1]" not in shown and "[turn 1] user: Create the files." in paged.read_text()
    paged.unlink()
    assert "[turn 1] user" in _on_a_terminal(["log", "show", sid, "--no-pager"], env)
    assert not paged.exists()
    piped = subprocess.run([sys.executable, "-m", "dh_cli", "log", "show", sid], capture_output=True,
                           text=True, env={**os.environ, **env}, timeout=60)
    assert "[turn 1] user" in piped.stdout and not paged.exists()


# small things ------------------------------------------------------------------------------------
def test_the_binary_hint_names_the_readme_variable():
    with pytest.raises(HarnessNotFound) as raised:
        find_binary(wrappers.get("claude-code"), {"PATH": "/nonexistent"})
    assert raised.value.hint == "install it, or set DH_CLAUDE_BIN"
    assert find_binary(wrappers.get("claude-code"), {"DH_CLAUDE_BIN": "/bin/true"}) == ["/bin/true"]


def test_log_status_does_not_create_the_log(dh_home, run_dh):
    result = run_dh("log", "status")
    assert result.exit_code == 0 and "not created yet" in result.stdout
    assert not (dh_home / "dh.db").exists()
    assert run_dh("log", "status", "--path").stdout.strip() == str(dh_home / "dh.db")


def test_a_group_alone_prints_help_and_dh_alone_its_status():
    for args in (["log"], ["world"], ["shim"], ["workspace"]):
        done = dh(*args)
        assert done.returncode == 0 and f"Usage: dh {args[0]}" in done.stdout, (args, done.stdout)
    done = dh()
    assert done.returncode == 0 and "no sessions in the log yet" in done.stdout  # logviews/status.py


def _timed_crash(world, sid: str, attempt: int, at: str) -> None:
    """A harness killed in `attempt`, as dh journals it, seen by dh at `at`."""
    world.add_event(sid, "launch", {"argv": ["claude"]}, attempt, "intent")
    event = world.add_event(sid, "exited", {"code": -9, "signal": 9}, attempt, "outcome")
    with world._write() as conn:
        conn.execute("UPDATE events SET at = ? WHERE session_id = ? AND seq = ?", [at, sid, event.seq])


def _shifted(iso: str, seconds: float) -> str:
    import datetime

    when = datetime.datetime.fromisoformat(iso.replace("Z", "+00:00")) + datetime.timedelta(seconds=seconds)
    return when.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def test_each_crash_is_shown_where_it_happened(resumed, run_dh):
    """A harness killed as it started (before it wrote anything: dh relaunched the command)
    and again mid-turn: the first crash shows at the turn's start, the second where the
    records stop, each with its own attempt; only the second kept finished calls."""
    world, sid = resumed
    items = json.loads(run_dh("log", "show", sid, "--json").stdout)["items"]
    prompt_at = next(i["at"] for i in items if i["type"] == "prompt")
    resume_at = next(i["at"] for i in items if i["type"] == "resume")
    _timed_crash(world, sid, 1, _shifted(prompt_at, -2))
    _timed_crash(world, sid, 2, _shifted(resume_at, -1))
    world.add_event(sid, "launch", {"argv": ["claude", "--resume", "x"]}, 3, "intent")
    items = json.loads(run_dh("log", "show", sid, "--json").stdout)["items"]
    kinds = [i["type"] for i in items]
    crashes = [i for i in items if i["type"] == "crash"]
    assert [(c["attempt"], c["turn"]) for c in crashes] == [(1, 1), (2, 1)]
    assert kinds[kinds.index("prompt") + 1] == "crash"  # right after the prompt
    assert kinds[kinds.index("resume") - 1] == "crash"  # right before the resume
    assert crashes[0]["saved_usd"] is None and crashes[1]["saved_usd"] > 0


def test_crashes_between_synthetic_resume_rows_each_mark_their_resume():
    """Claude Code's TUI, relaunched three times in a row by `dh resume`, wrote only its own
    rows around each resume (synthetic): every crash still marks the resume that followed
    it, not the next prompt a person could have typed."""
    from dh_cli.logviews.logview import _Builder
    from dh_cli.models import Parsed, ToolCall
    from dh_cli.wrappers import get

    def at(second: int) -> str:
        return f"2026-12-04T10:00:{second:02d}.000Z"

    crashes = [{"at": at(s), "attempt": n, "label": "crash: dh was killed"}
               for n, s in ((1, 10), (2, 20), (3, 30))]
    builder = _Builder(get("claude-code"), "main.jsonl", crashes=crashes)
    rows = [Parsed(kind="user", role="user", text="Create the files.", ts=at(1)),
            Parsed(kind="tool_call", role="assistant", text="Step one.", ts=at(2),
                   tool_calls=[ToolCall("toolu_000", "Bash", {"command": "true"})]),
            Parsed(kind="user", role="user", text="Continue.", ts=at(11), synthetic=True),
            Parsed(kind="user", role="user", text="Continue.", ts=at(21), synthetic=True),
            Parsed(kind="assistant", role="assistant", text="No response requested.", ts=at(31),
                   synthetic=True),
            Parsed(kind="user", role="user", text="Continue.", ts=at(32)),
            Parsed(kind="assistant", role="assistant", text="All done.", stop_reason="end_turn",
                   ts=at(40))]
    for row in rows:
        builder.add(row)
    items = list(builder.rest())
    order = [(i["type"], i.get("attempt")) for i in items if i["type"] in ("crash", "resume")]
    assert order == [("crash", 1), ("resume", None), ("crash", 2), ("resume", None),
                     ("crash", 3), ("resume", None)]
    resumes = [i["at"] for i in items if i["type"] == "resume"]
    assert resumes == [at(11), at(21), at(31)]
