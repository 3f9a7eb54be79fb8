"""`dh import`, `dh log list/show` on the real fixtures: every tool call with its result
status, and the token totals the harness itself recorded."""

import json

import pytest

from dh_cli.worlds.local import LocalWorld

from .conftest import FIXTURES, fixture_home, scenarios
from tests.helpers import harnesses

ALL = [(h, s) for h in harnesses.ALL for s in scenarios(h)]


def harness_totals(harness: str, scenario: str, home) -> tuple[int, int] | None:
    """Token totals as the harness itself recorded them, read independently of dh."""
    src = FIXTURES / harness / scenario
    if harness == "claude-code":
        runs = sorted(src.glob("run*.stdout.jsonl"))
        results = [json.loads(l) for r in runs for l in r.read_text().splitlines() if '"type":"result"' in l]
        if len(results) != len(runs):
            return None  # a killed run printed no result line
        return (sum(r["usage"]["input_tokens"] for r in results),
                sum(r["usage"]["output_tokens"] for r in results))
    if harness == "codex":
        lines = [json.loads(l) for p in home.glob("sessions/*/*/*/*.jsonl") for l in p.read_text().splitlines()]
        counts = [l["payload"]["info"]["total_token_usage"] for l in lines
                  if l["type"] == "event_msg" and l["payload"].get("type") == "token_count" and l["payload"].get("info")]
        return counts[-1]["input_tokens"], counts[-1]["output_tokens"]
    if harness == "pi":
        lines = [json.loads(l) for p in home.glob("sessions/*/*.jsonl") for l in p.read_text().splitlines()]
        usages = [l["message"]["usage"] for l in lines if l.get("type") == "message" and "usage" in l["message"]]
        return sum(u["input"] for u in usages), sum(u["output"] for u in usages)
    rows = [json.loads(l) for l in (src / "db" / "rows.jsonl").read_text().splitlines()]
    session = next(r for r in rows if r["table"] == "session")
    return session["tokens_input"], session["tokens_output"]


@pytest.mark.parametrize("harness,scenario", ALL)
def test_show_lists_every_tool_call_and_the_harness_token_totals(harness, scenario, tmp_path, run_dh):
    home = fixture_home(harness, scenario, tmp_path)
    assert run_dh("import", harness, "--all", "--home", str(home)).exit_code == 0
    (session,) = json.loads(run_dh("log", "list", "--json").stdout)
    view = json.loads(run_dh("log", "show", session["id"], "--json").stdout)
    main = view["sources"][0]["relpath"]
    calls = [i for i in view["items"] if i["type"] == "tool_call"]
    assert calls and all(c["status"] in ("ok", "error") for c in calls), calls
    expected = harness_totals(harness, scenario, home)
    if expected is not None:
        tokens = [i["tokens"] for i in view["items"] if i["type"] == "model_call" and i["source"] == main]
        assert (sum(t["input"] for t in tokens), sum(t["output"] for t in tokens)) == expected
    text = run_dh("log", "show", session["id"]).stdout
    assert "tool " in text and "tokens:" in text


def test_show_raw_prints_native_records_byte_exact(tmp_path, run_dh):
    home = fixture_home("claude-code", "basic", tmp_path)
    run_dh("import", "claude", "--all", "--home", str(home))
    (session,) = LocalWorld().list_sessions()
    raw = run_dh("log", "show", session["harness_session_id"], "--raw").stdout_bytes
    assert raw == next(home.glob("projects/*/*.jsonl")).read_bytes()


def test_killed_fixture_shows_an_open_turn(tmp_path, run_dh):
    home = fixture_home("pi", "killed", tmp_path)
    run_dh("import", "pi", "--all", "--home", str(home))
    (session,) = LocalWorld().list_sessions()
    view = json.loads(run_dh("log", "show", session["id"][:6], "--json").stdout)
    assert view["turn_complete"] is False


def test_import_twice_changes_nothing(tmp_path, run_dh):
    home = fixture_home("codex", "multiturn", tmp_path)
    run_dh("import", "codex", "--all", "--home", str(home))
    before = LocalWorld().list_sessions()
    again = json.loads(run_dh("import", "codex", "--all", "--home", str(home), "--json").stdout)
    assert again["records_added"] == 0
    assert LocalWorld().list_sessions() == before


def test_import_one_session_by_id_and_by_path(tmp_path, run_dh):
    home = fixture_home("claude-code", "multiturn", tmp_path)
    path = next(home.glob("projects/*/*.jsonl"))
    by_path = run_dh("import", "claude-code", str(path), "--json")
    assert json.loads(by_path.stdout)["sessions"][0]["harness_session_id"] == path.stem
    other = fixture_home("claude-code", "basic", tmp_path)
    sid = next(other.glob("projects/*/*.jsonl")).stem
    assert run_dh("import", "claude", sid, "--home", str(other)).exit_code == 0
    assert len(LocalWorld().list_sessions()) == 2


def test_session_refs_unknown_and_ambiguous(tmp_path, run_dh):
    for scenario in ("basic", "multiturn"):
        run_dh("import", "pi", "--all", "--home", str(fixture_home("pi", scenario, tmp_path)))
    missing = run_dh("log", "show", "zzzz")
    assert missing.exit_code == 1 and "no session matches" in str(missing.exception)
    ambiguous = run_dh("log", "show", "01a2264b")  # both Pi ids start like this
    assert ambiguous.exit_code == 2 and "matches 2 sessions" in str(ambiguous.exception)


def test_unknown_harness_is_a_usage_error(run_dh):
    result = run_dh("import", "cladue", "--all")
    assert result.exit_code == 2
    assert "unknown harness 'cladue'" in str(result.exception)
