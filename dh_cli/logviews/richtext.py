"""Texts of a session as HTML that is safe to open: Markdown (prompts, answers) through
markdown-it with raw HTML off, so a record can never put markup of its own on the page;
links kept only for http(s) and mailto, images shown as their text and address (an export
fetches nothing); code highlighted by Pygments with CSS classes (the page's one stylesheet,
no inline styles). Both libraries arrive with rich."""

from __future__ import annotations

import functools
import html
from urllib.parse import urlparse

from markdown_it import MarkdownIt
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import get_lexer_by_name, get_lexer_for_filename
from pygments.util import ClassNotFound

SAFE_SCHEMES = ("http", "https", "mailto")
_FORMATTER = HtmlFormatter(nowrap=True)  # spans with Pygments' short classes, inside our <pre>
# A record names a code block's language, and some of Pygments' lexers backtrack without
# bound (one took 79 s over 3 KB): only these are used, each linear on what agents write,
# and nothing over HIGHLIGHT_MAX characters is highlighted (shown as plain text).
LEXERS = frozenset({"python", "python3", "py", "pycon", "bash", "sh", "shell", "zsh", "console",
                    "shell-session", "json", "jsonl", "javascript", "js", "typescript", "ts", "tsx", "jsx",
                    "html", "xml", "css", "scss", "yaml", "yml", "toml", "ini", "sql", "diff", "patch",
                    "go", "rust", "rs", "c", "cpp", "c++", "java", "kotlin", "swift", "ruby", "rb", "php",
                    "markdown", "md", "dockerfile", "docker", "make", "makefile", "text", "csharp", "cs"})
HIGHLIGHT_MAX = 50_000


def highlight_css(scope: str = ".hl") -> str:
    """The colours of highlighted code, for the page's stylesheet."""
    return HtmlFormatter(style="friendly").get_style_defs(scope) + "\n"


def code_html(text: str, language: str | None = None, filename: str | None = None) -> str:
    """The code's inner HTML, highlighted when its language is known (by name or by the file
    it is in), escaped as plain text otherwise."""
    lexer = _lexer(language, filename, len(text))
    if lexer is None:
        return html.escape(text)
    return highlight(text, lexer, _FORMATTER).rstrip("\n")


def _lexer(language: str | None, filename: str | None, size: int = 0):
    """The lexer for a language or a file name, when it is on the allow-list and the code
    is small enough; None otherwise (the code is shown as text)."""
    if size > HIGHLIGHT_MAX:
        return None
    try:
        if language:
            lexer = get_lexer_by_name(language, stripnl=False)
        elif filename:
            lexer = get_lexer_for_filename(filename, stripnl=False)
        else:
            return None
    except ClassNotFound:
        return None
    names = {n.lower() for n in lexer.aliases} | {lexer.name.lower()}
    return lexer if names & LEXERS else None


def markdown_html(text: str) -> str:
    """The text rendered as Markdown (CommonMark, tables and strikethrough; a line break is a
    break), safe as said above."""
    return _markdown().render(text or "")


@functools.lru_cache(maxsize=1)
def _markdown() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False, "breaks": True, "linkify": False,
                                   "highlight": _fenced})
    md.enable(["table", "strikethrough"])
    md.validateLink = _safe_link
    md.add_render_rule("image", _image_as_text)
    md.add_render_rule("link_open", _link_open)
    return md


def _safe_link(url: str) -> bool:
    """Only web and mail links; anything else (javascript:, data:, file:, vbscript:...) stays
    text. Relative links would point into the reader's own folders: text too."""
    scheme = urlparse(url.strip()).scheme.lower()
    return scheme in SAFE_SCHEMES


def _fenced(code: str, language: str, _attrs) -> str:
    name = (language or "").split()[0] if language else None
    lexer = _lexer(name, None, len(code)) if name else None
    if lexer is None:
        return ""  # markdown-it escapes it itself
    return f'<pre class="hl"><code>{highlight(code, lexer, _FORMATTER)}</code></pre>\n'


def _image_as_text(self, tokens, idx, options, env) -> str:
    token = tokens[idx]
    alt = self.renderInlineAsText(token.children or [], options, env)
    return f'<span class="image">[image: {html.escape(alt)} {html.escape(token.attrGet("src") or "")}]</span>'


def _link_open(self, tokens, idx, options, env) -> str:
    tokens[idx].attrSet("rel", "noopener noreferrer nofollow")
    return self.renderToken(tokens, idx, options, env)
