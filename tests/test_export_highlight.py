"""Highlighting in the trace view is bounded: a record names a code block's language, so
only the lexers on richtext.LEXERS are used (some of Pygments' backtrack without bound), and
no block over HIGHLIGHT_MAX characters is highlighted."""

from __future__ import annotations

from dh_cli.logviews.richtext import HIGHLIGHT_MAX, code_html, markdown_html


def test_a_language_off_the_list_is_shown_as_text():
    for language in ("erlang", "haskell", "perl6", "coq"):
        html = markdown_html(f"```{language}\nx = <b>1</b>\n```\n")
        assert '<span class="' not in html and "&lt;b&gt;1&lt;/b&gt;" in html, language
    assert '<span class="' in markdown_html("```python\nx = 1\n```\n")


def test_a_file_off_the_list_is_shown_as_text():
    assert code_html("x = 1", filename="a.py") != "x = 1"
    assert code_html("x <- 1", filename="a.hs") == "x &lt;- 1"


def test_a_block_over_the_cap_is_shown_as_text():
    big = "x = 1\n" * (HIGHLIGHT_MAX // 6 + 1)
    assert '<span class="' not in code_html(big, "python")
    assert '<span class="' not in markdown_html(f"```python\n{big}```\n")
    assert '<span class="' in code_html("x = 1\n" * 100, "python")
