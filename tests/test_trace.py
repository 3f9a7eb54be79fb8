"""The session as a trace (HTML export): tool inputs shown as what they are, subagents nested
under the call that started them, large sessions paged."""

import json
import re

from dh_cli.logviews.tracehtml import tool_view
from dh_cli.worlds.local import LocalWorld

from .conftest import fixture_home
from .fakes.transcripts import write_claude_transcript


def _export(run_dh, tmp_path, harness, scenario) -> str:
    home = fixture_home(harness, scenario, tmp_path)
    assert run_dh("import", harness, "--all", "--home", str(home)).exit_code == 0
    (session,) = LocalWorld().list_sessions()
    return run_dh("log", "export", session["id"], "--format", "html").stdout


def test_a_codex_patch_is_drawn_as_a_diff_and_a_command_as_a_command(tmp_path, run_dh):
    page = _export(run_dh, tmp_path, "codex", "basic-apply-patch")
    diff = re.search(r'<pre class="diff">(.*?)</pre>', page, re.S).group(1)
    assert "*** Begin Patch" in diff and '<span class="add">' in diff
    assert re.search(r'<pre class="command hl">\$ ', page)


def test_tool_inputs_are_readable():
    # Claude Code's Edit input (file_path, old_string, new_string) becomes a unified diff
    kind, text = tool_view({"file_path": "a.py", "old_string": "x = 1\ny = 2", "new_string": "x = 1\ny = 3"})
    assert kind == "diff" and "--- a/a.py" in text and "-y = 2" in text and "+y = 3" in text
    assert tool_view({"command": "pytest -q", "description": "run"}) == ("command", "$ pytest -q")
    assert tool_view('{"cmd": ["bash", "-lc", "ls"]}') == ("command", "$ bash -lc ls")  # Codex's JSON text
    assert tool_view({"file_path": "b.txt", "content": "hi"}) == ("file", "b.txt\n\nhi")
    assert tool_view({"pattern": "x"}) == ("json", '{\n  "pattern": "x"\n}')


def test_a_subagent_is_nested_under_the_call_that_started_it(tmp_path, run_dh):
    page = _export(run_dh, tmp_path, "claude-code", "subagent-tasks")
    agent = page.index('<div class="span tool status-ok"><span class="label">tool Agent</span>')
    nested = page.index('<div class="subagent">')
    inner_bash = re.search(r'<pre class="command hl">\$ [^\n]*echo[^\n]*sub', page).start()
    after = page.index("tool TaskCreate")
    assert agent < nested < inner_bash < after  # the subagent's Bash sits inside the Agent call
    assert page.count('<section class="turn" id=') == 1  # not a second, unlabelled "Turn 1"


def test_a_large_session_is_paged(tmp_path, run_dh):
    home = tmp_path / "claude"
    write_claude_transcript(home / "projects" / "-p" / "5f0c2a9e-1b7d-4c3e-9a61-2d8f0e4b7c15.jsonl", 1 << 20)
    assert run_dh("import", "claude", "--all", "--home", str(home)).exit_code == 0
    (session,) = LocalWorld().list_sessions()
    turns = json.loads(run_dh("log", "show", session["id"], "--json").stdout)["items"][-1]["turn"]
    out = tmp_path / "out" / "s.html"
    out.parent.mkdir()
    assert run_dh("log", "export", session["id"], "--format", "html", "--turns-per-page", "40",
                  "-o", str(out)).exit_code == 0
    files = sorted(out.parent.iterdir(), key=lambda p: int(re.sub(r"\D", "", p.stem) or 1))
    assert len(files) == -(-turns // 40) > 2
    assert files[0].name == "s.html" and files[1].name == "s-2.html"
    first, middle, last = (f.read_text() for f in (files[0], files[1], files[-1]))
    assert first.count('<section class="turn" id=') == 40
    assert 'href="s-2.html"' in first and 'href="s.html"' in middle and 'href="s-3.html"' in middle
    assert 'rel="next"' not in last
    shown = {int(n) for f in files for n in re.findall(r'<section class="turn" id="turn-(\d+)">', f.read_text())}
    assert shown == set(range(1, turns + 1))
    page2 = run_dh("log", "export", session["id"], "--format", "html", "--turns-per-page", "40",
                   "--page", "2").stdout
    assert page2.count('<section class="turn" id="turn-41">') == 1
    assert run_dh("log", "export", session["id"], "--format", "html", "--page", "99").exit_code == 2
