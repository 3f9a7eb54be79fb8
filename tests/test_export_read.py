"""The HTML export made to be read: Markdown rendered and code highlighted without letting a
record put markup of its own on the page, and a layout that reads at 400 px (checked in a
real Chromium, with screenshots at 1400 and 400 px kept for a person to look at)."""

import json
import re
import shutil

import pytest

from tests.require import skip_if_missing

from dh_cli.logviews.richtext import markdown_html
from dh_cli.logviews.tracehtml import token_text
from dh_cli.worlds.local import LocalWorld

from .conftest import fixture_home
from .helpers.browser import ARTIFACTS, CHROMIUM

ANSWER = """Done: **two files** written, see `a.txt`.

```python
def f(x):
    return x + 1
```

<script>alert(1)</script> <img src=x onerror=alert(2)>
[click](javascript:alert(3)) [data](data:text/html,hi) [docs](https://example.org/d)
![logo](http://example.org/logo.png)

| file | lines |
|------|-------|
| a.txt | 1 |
"""


def test_markdown_is_rendered_and_no_markup_from_a_record_gets_through():
    out = markdown_html(ANSWER)
    assert "<strong>two files</strong>" in out and "<code>a.txt</code>" in out
    assert '<pre class="hl"><code><span class="k">def</span>' in out  # highlighted by Pygments
    assert "<script" not in out and "<img" not in out and "onerror=" not in out.replace("onerror=alert", "")
    assert "&lt;script&gt;" in out
    assert "javascript:" not in re.findall(r'href="([^"]*)"', out).__str__()
    assert re.findall(r'href="([^"]*)"', out) == ["https://example.org/d"]
    assert "[image: logo http://example.org/logo.png]" in out  # shown, never fetched
    assert "<table>" in out


@pytest.fixture
def answered(tmp_path, run_dh):
    """The real crashed Claude Code session, its last answer replaced by ANSWER."""
    home = fixture_home("claude-code", "killed-resumed", tmp_path)
    (path,) = home.glob("projects/*/*.jsonl")
    path.write_text(path.read_text().replace('"All done."', json.dumps(ANSWER)))
    assert run_dh("import", "claude", "--all", "--home", str(home)).exit_code == 0
    (session,) = LocalWorld().list_sessions()
    page = tmp_path / "session.html"
    page.write_bytes(run_dh("log", "export", session["id"], "--format", "html").stdout_bytes)
    return page


def test_the_export_renders_the_answer_and_highlights_tool_inputs(answered):
    page = answered.read_text()
    answers = re.findall(r'<div class="msg answer md indent">(.*?)</div>\n', page, re.S)
    assert answers[-1] == markdown_html(ANSWER)
    assert re.search(r'<pre class="command hl">\$ <span class="nb">echo</span>', page)
    assert re.search(r'<pre class="json hl"><span class="p">\{</span>', page)  # Read's input


def _measure(browser, page, width: int, shot) -> dict:
    tab = browser.new_page(viewport={"width": width, "height": 900})
    try:
        tab.goto(page.as_uri())
        tab.evaluate("document.querySelectorAll('details').forEach(d => d.open = true)")
        found = tab.evaluate("""() => ({
            page: document.documentElement.scrollWidth, view: document.documentElement.clientWidth,
            wide: [...document.querySelectorAll('body *')].filter(e => {
                const r = e.getBoundingClientRect();
                return r.width > 0 && r.right > document.documentElement.clientWidth + 0.5;
            }).map(e => e.tagName + '.' + e.className).slice(0, 5)})""")
        tab.screenshot(path=str(shot), full_page=True)
    finally:
        tab.close()
    return found


@skip_if_missing(not CHROMIUM, "chromium is not installed (.ci/run installs it with apt-get)")
def test_the_page_reads_at_400_px_without_scrolling_sideways(answered, tmp_path, browser):
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    for width in (1400, 400):
        shot = tmp_path / f"export-{width}.png"
        found = _measure(browser, answered, width, shot)
        assert found["page"] <= found["view"] and found["wide"] == [], (width, found)
        shutil.copy(shot, ARTIFACTS / f"export-{width}px.png")  # kept for a person to look at


def test_token_text_shows_each_kind_once():
    """The log's kinds (tokens.py): both cache writes together, reasoning as part of output."""
    tokens = {"input": 10, "cache_read": 13_000, "cache_write": 500, "cache_write_1h": 44,
              "output": 50, "reasoning": 20}
    assert token_text(tokens) == "10 in / 13,000 cache read / 544 cache write / 50 out (20 reasoning)"
