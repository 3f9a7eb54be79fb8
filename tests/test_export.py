"""`dh log export`: Markdown, a self-contained HTML page checked in a real headless browser
(Debian chromium), and the native records byte-exact."""

import html
import json
import re
import shutil
import sqlite3
import stat

import pytest

from tests.require import skip_if_missing

from dh_cli.logviews.render import money
from dh_cli.logviews.timeline import timeline
from dh_cli.worlds.local import LocalWorld

from .conftest import fixture_home, scenarios
from .fakes.transcripts import codex_with_cache_and_reasoning, write_streamed_turn
from tests.helpers import harnesses
from tests.helpers.browser import ARTIFACTS, CHROMIUM, open_in_chromium
from tests.helpers.crashed import CRASH_EVENTS, crashed  # noqa: F401 (a fixture)


def test_timeline_marks_each_attempt_crash_repair_and_resume():
    events = [{"seq": i, "at": f"t{i}", "type": t, "details": d, "attempt": a}
              for i, (t, d, a, _) in enumerate(CRASH_EVENTS, 1)]
    assert [(m["kind"], m["label"]) for m in timeline(events)] == [
        ("attempt", "attempt 1"), ("crash", "crash: SIGKILL"), ("resume", "resume"),
        ("repair", "repair Bash"), ("attempt", "attempt 2"), ("exit", "exit 0")]


def test_jsonl_is_the_native_records_byte_exact(crashed, run_dh):
    session_id, home = crashed
    exported = run_dh("log", "export", session_id, "--format", "jsonl").stdout_bytes
    assert exported == run_dh("log", "show", session_id, "--raw").stdout_bytes
    assert exported == next(home.glob("projects/*/*.jsonl")).read_bytes()


def test_markdown_has_the_conversation_folded_tools_tokens_and_timeline(crashed, run_dh):
    text = run_dh("log", "export", crashed[0], "--format", "md").stdout
    assert text.startswith(f"# dh session {crashed[0]} (claude-code)")
    assert "**crash** crash: SIGKILL" in text and "**resume** resume" in text
    assert "> Create the files." in text
    assert "<summary>tool Bash [ok]</summary>" in text and '"command": "echo step0 >> steps.log"' in text
    assert "- tokens: 40 in (uncached), 0 cache read, 0 cache write (0 for 1 h), 20 out (0 reasoning)" in text


@pytest.mark.parametrize("harness", ["claude-code", "codex"])
def test_markdown_counts_tokens_in_the_kinds_dh_log_show_prints(harness, tmp_path, run_dh):
    """Cache writes for 5 minutes and for an hour (a streamed Claude Code message), cached input
    and reasoning (Codex on gpt-5): the Markdown's lines are `dh log show`'s."""
    if harness == "codex":
        home = fixture_home("codex", "basic", tmp_path)
        codex_with_cache_and_reasoning(home)
    else:
        home = tmp_path / "claude"
        write_streamed_turn(home / "projects" / "-p" / "6a1d3b7e-2c4f-4e8a-9b0d-1f2e3a4b5c6d.jsonl")
    assert run_dh("import", harness, "--all", "--home", str(home)).exit_code == 0
    (listed,) = json.loads(run_dh("log", "list", "--json").stdout)
    text = run_dh("log", "export", listed["id"], "--format", "md").stdout
    shown = run_dh("log", "show", listed["id"], "--no-pager").stdout
    totals = next(line for line in shown.splitlines() if line.startswith("tokens: "))
    assert f"- {totals}" in text.splitlines()
    calls = [line.split(": ", 1)[1] for line in shown.splitlines() if line.startswith("  model call ")]
    exported = [line.split(": ", 1)[1].rstrip("_") for line in text.splitlines()
                if line.startswith("_model call ")]
    assert calls and exported == calls
    kinds = {"claude-code": "(2000 for 1 h)", "codex": "reasoning)"}[harness]
    assert kinds in totals and all(" cache read" in call for call in calls)
    cost = next(line for line in shown.splitlines() if line.startswith("cost: "))
    assert f"- {cost}" in text.splitlines() and "$" in cost


def test_an_export_file_is_private(crashed, run_dh, tmp_path):
    out = tmp_path / "session.html"
    assert run_dh("log", "export", crashed[0], "--format", "html", "-o", str(out)).exit_code == 0
    assert stat.S_IMODE(out.stat().st_mode) == 0o600


def test_html_is_self_contained(crashed, run_dh):
    page = run_dh("log", "export", crashed[0], "--format", "html").stdout
    assert "<script" not in page and "<link" not in page and "@import" not in page
    assert not re.search(r"""(src|href)\s*=\s*["']?\s*(https?:)?//""", page)
    assert not re.search(r"url\(", page)
    assert "default-src 'none'" in page  # the browser may not fetch anything at all



@skip_if_missing(not CHROMIUM, "chromium is not installed (.ci/run installs it with apt-get)")
def test_html_trace_renders_in_a_headless_browser_with_the_crash_inside_the_turn(crashed, run_dh, tmp_path):
    page = tmp_path / "session.html"
    page.write_bytes(run_dh("log", "export", crashed[0], "--format", "html").stdout_bytes)
    dom, requests = open_in_chromium(page, tmp_path, "export")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shutil.copy(tmp_path / "export.png", ARTIFACTS / "export-trace.png")  # kept for a person to look at
    assert requests == []
    strip = re.search(r'<ol class="timeline" id="timeline">(.*?)</ol>', dom, re.S).group(1)
    assert re.findall(r'class="mark (\w+)"', strip) == ["attempt", "crash", "resume", "repair",
                                                         "attempt", "exit"]
    # one turn: the crash and the resume drawn inside it, after the call that finished first
    (turn,) = re.findall(r'<section class="turn" id="turn-(\d+)">', dom)
    body = dom[dom.index('<section class="turn" id="turn-1">'):]
    order = re.findall(r'class="span (model|tool)|data-mark="(crash|resume)"', body)
    order = [a or b for a, b in order]
    assert order == ["model", "tool", "crash", "resume", "model", "tool", "model", "tool", "model"]
    kept = _first_call_price()  # the one model call drawn before the crash (order above)
    assert kept > 0 and f">✗ crash: SIGKILL (attempt 1) — {money(kept)} of finished calls kept</div>" in body
    assert '<div class="msg user md"><p>Create the files.</p>\n</div>' in dom
    assert dom.count('<details class="tool"') == 3
    commands = re.findall(r'<pre class="command hl">(.*?)</pre>', dom, re.S)
    assert html.unescape(re.sub("<[^>]+>", "", commands[0])) == "$ echo step0 >> steps.log"
    assert re.search(r'class="span model".*?<span class="dur">\d+ ms</span>', dom, re.S)  # durations


def _first_call_price() -> float:
    """The price the mirror logged beside the main conversation's first model call."""
    with sqlite3.connect(LocalWorld().path) as conn:
        return conn.execute("SELECT price_usd FROM model_calls WHERE source_id ="
                            " (SELECT MIN(id) FROM sources) ORDER BY offset LIMIT 1").fetchone()[0]


@skip_if_missing(not CHROMIUM, "chromium is not installed (.ci/run installs it with apt-get)")
def test_the_network_check_sees_a_page_that_does_fetch(tmp_path):
    """The control: the same net-log check catches a page with remote assets."""
    page = tmp_path / "remote.html"
    page.write_text('<html><body><p>remote</p><img src="http://assets.invalid/x.png">'
                    + "<p>" + "filler " * 2000 + "</p></body></html>")
    dom, requests = open_in_chromium(page, tmp_path, "control")
    assert "<p>remote</p>" in dom
    assert [r["url"] for r in requests] == ["http://assets.invalid/x.png"]


ALL = [(h, s) for h in harnesses.ALL for s in scenarios(h)]


@pytest.mark.parametrize("harness,scenario", ALL)
def test_every_fixture_exports_with_every_tool_call_folded(harness, scenario, tmp_path, run_dh):
    run_dh("import", harness, "--all", "--home", str(fixture_home(harness, scenario, tmp_path)))
    (session,) = LocalWorld().list_sessions()
    view = json.loads(run_dh("log", "show", session["id"], "--json").stdout)
    calls = sum(1 for item in view["items"] if item["type"] == "tool_call")
    page = run_dh("log", "export", session["id"], "--format", "html").stdout
    assert page.count('<details class="tool"') == calls
    assert run_dh("log", "export", session["id"], "--format", "md").stdout.count("<details>") == calls
