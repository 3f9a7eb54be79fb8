"""`dh log export --format html`: the session as a trace view, one self-contained page per N
turns. Each turn is a span with its model calls and tool calls drawn on a time bar (durations,
tokens, cost), the crash and the resume marked where they happened, tool inputs shown as
what they are (a command as a command, an edit as a diff), subagents nested under the call that
started them. The session's documents (todo list, plan, tasks: dh_cli/documents) stand in a
column beside the trace. Prompts and answers are rendered Markdown and code is highlighted
(richtext.py: no markup from a record gets through). Below 40 rem the label column folds
above its bar, so a phone's 400 px reads without scrolling sideways. No scripts, and a
Content-Security-Policy that forbids every fetch.

`pages` is the library entry: a view and its turns in, whole HTML documents out; `body` and
`stylesheet` are the same page for a server to put inside its own."""

from __future__ import annotations

import copy
import difflib
import html
import json
from dataclasses import replace
from typing import Callable, Iterator

from ..documents import html as docs_html
from ..redact import clean, clean_view, mask
from ..tokens import Usage
from .timeline import CSP, html_timeline, timeline
from .render import money, resume_line
from .richtext import code_html, highlight_css, markdown_html
from .trace import Span

TURNS_PER_PAGE = 100

CSS = """
body{font:15px/1.45 system-ui,sans-serif;margin:0 auto;max-width:72rem;padding:1rem 1.5rem;
color:#1d1f21;background:#fafafa}h1{font-size:1.3rem;margin:.2rem 0}
h2{font-size:1.05rem;margin:1.5rem 0 .5rem}.meta{color:#555;font-size:.9rem}
.meta code{background:#eee;padding:0 .25rem;border-radius:3px}
ol.timeline{display:flex;flex-wrap:wrap;gap:.35rem;list-style:none;padding:.5rem;margin:0;
background:#fff;border:1px solid #ddd;border-radius:6px}.mark{padding:.15rem .5rem;
border-radius:1rem;font-size:.8rem;border:1px solid transparent;white-space:nowrap}
.mark.attempt{background:#e3ecff;border-color:#8fb0f5}.mark.crash{background:#ffd9d6;
border-color:#e0564b;color:#8a1c13;font-weight:600}.mark.fatal{background:#8a1c13;color:#fff}
.mark.repair{background:#fff1c7;border-color:#e2b53b}.mark.resume{background:#dcf5e3;
border-color:#4fb06b}.mark.rebuild,.mark.rewrite{background:#efe3ff;border-color:#a57ee0}
.mark.exit,.mark.stop{background:#eee;border-color:#bbb}
section.turn{background:#fff;border:1px solid #ddd;border-radius:8px;margin:1rem 0;padding:.6rem .8rem}
section.turn h3{font-size:1rem;margin:0 0 .4rem}.sum{color:#555;font-weight:400;font-size:.85rem}
.msg{padding:.45rem .7rem;border-radius:6px;margin:.3rem 0;white-space:pre-wrap;overflow-wrap:anywhere}
.md{white-space:normal}.md>:first-child{margin-top:0}.md>:last-child{margin-bottom:0}
.md p{margin:.3rem 0}.md pre{white-space:pre;overflow-x:auto;background:#f6f8fa;padding:.4rem .6rem;
border-radius:4px;font-size:.82rem}.md code{font-family:ui-monospace,monospace;font-size:.88em}
.md table{display:block;overflow-x:auto;border-collapse:collapse}.md th,.md td{border:1px solid #ddd;
padding:.15rem .45rem}.md img,.md .image{color:#555}.indent{margin-left:16.5rem}
.user{background:#e8f0fe}.answer{background:#f6f6f6;border:1px solid #e6e6e6;font-size:.9rem}
.span{display:grid;grid-template-columns:16rem 1fr 5.5rem;gap:.5rem;align-items:center;
font-size:.82rem;padding:.1rem 0}.span .label{font-family:ui-monospace,monospace;overflow:hidden;
text-overflow:ellipsis;white-space:nowrap}.track{position:relative;height:.8rem;background:#f1f1f1;
border-radius:3px}.bar{position:absolute;top:0;bottom:0;border-radius:3px;min-width:2px}
.span.model .bar{background:#7aa2f7}.span.tool .bar{background:#9ece6a}
.span.tool.status-error .bar,.span.tool.status-dangling .bar{background:#f7768e}
.dur{text-align:right;color:#555;font-variant-numeric:tabular-nums}
.cut{margin:.35rem 0;padding:.3rem .6rem;border-radius:6px;font-weight:600;font-size:.85rem}
.cut.crash{background:#ffd9d6;color:#8a1c13;border-left:4px solid #e0564b}
.cut.resume{background:#dcf5e3;color:#1e5b30;border-left:4px solid #4fb06b}
.cut.prompt{background:#f3f3f3;color:#444;font-weight:400}
details.tool{margin:.15rem 0 .4rem 16.5rem;border:1px solid #e3e3e3;border-radius:6px;background:#fff}
details.tool summary{cursor:pointer;padding:.2rem .5rem;font-size:.8rem;color:#444}
details.tool pre{margin:0;padding:.45rem .7rem;border-top:1px solid #eee;white-space:pre-wrap;
overflow-wrap:anywhere;font-size:.8rem}pre.command{background:#f6f8fa}
pre.diff .add{color:#1e7b34;background:#e6ffec}pre.diff .del{color:#a1251b;background:#ffebe9}
pre.diff .hunk{color:#6f42c1}.subagent{margin:.3rem 0 .6rem 2rem;border-left:3px solid #bb9af7;
padding-left:.6rem}.subagent>.title{font-size:.8rem;color:#6b4fa0;font-weight:600}
.status-ok{color:#207a3c}.status-error,.status-dangling{color:#b3261e}
nav.pages{margin:1rem 0;font-size:.9rem}nav.pages a{margin-right:1rem}
"""

# After the documents' CSS, which it overrides: one column, labels above their bars.
NARROW = """
@media (max-width:40rem){body{padding:.5rem .6rem}.layout{grid-template-columns:minmax(0,1fr)}
aside.docs{position:static;max-height:none}.span{grid-template-columns:minmax(0,1fr) 4.5rem}
.span .label{grid-column:1/-1;white-space:normal;overflow-wrap:anywhere}
.indent,details.tool{margin-left:0}.subagent{margin-left:.5rem}}
"""


def _e(text) -> str:
    """Every text of the page passes here (escaped for HTML)."""
    return html.escape("" if text is None else str(text))


def seconds(ms: int | None) -> str:
    if ms is None:
        return ""
    return f"{ms} ms" if ms < 1000 else f"{ms / 1000:.2f} s"


# tool inputs, readable -------------------------------------------------------------------------
def tool_view(args) -> tuple[str, str]:
    """(how to show it, the text): a shell command as a command line, an edit as a diff, a
    patch as a patch, a file write as the file, anything else as indented JSON."""
    if isinstance(args, str):
        stripped = args.strip()
        if stripped.startswith("*** Begin Patch") or stripped.startswith("--- "):
            return "diff", args
        try:
            parsed = json.loads(args)
        except ValueError:
            return "text", args
        return tool_view(parsed) if isinstance(parsed, (dict, list)) else ("text", args)
    if isinstance(args, dict):
        command = args.get("command", args.get("cmd"))
        if isinstance(command, list):
            command = " ".join(str(c) for c in command)
        if isinstance(command, str):
            return "command", "$ " + command
        if isinstance(args.get("old_string"), str) and isinstance(args.get("new_string"), str):
            return "diff", _diff(args.get("file_path") or "file", args["old_string"], args["new_string"])
        for key in ("patch", "input"):
            if isinstance(args.get(key), str) and args[key].lstrip().startswith("*** Begin Patch"):
                return "diff", args[key]
        if isinstance(args.get("content"), str) and isinstance(args.get("file_path"), str):
            return "file", f"{args['file_path']}\n\n{args['content']}"
    return "json", json.dumps(args, ensure_ascii=False, indent=2)


def _diff(path: str, old: str, new: str) -> str:
    lines = difflib.unified_diff(old.splitlines(), new.splitlines(), f"a/{path}", f"b/{path}",
                                 lineterm="")
    return "\n".join(lines) or f"(no change to {path})"


def _pre(kind: str, text: str) -> str:
    if kind == "command":
        return f'<pre class="command hl">$ {code_html(text.removeprefix("$ "), "bash")}</pre>'
    if kind == "json":
        return f'<pre class="json hl">{code_html(text, "json")}</pre>'
    if kind == "file":
        path, _, content = text.partition("\n\n")
        return f'<pre class="file hl"><span class="path">{_e(path)}</span>\n\n{code_html(content, filename=path)}</pre>'
    if kind != "diff":
        return f'<pre class="{kind}">{_e(text)}</pre>'
    rows = []
    for line in text.splitlines():
        cls = ("add" if line.startswith("+") and not line.startswith("+++") else
               "del" if line.startswith("-") and not line.startswith("---") else
               "hunk" if line.startswith("@@") else "")
        rows.append(f'<span class="{cls}">{_e(line)}</span>' if cls else _e(line))
    return '<pre class="diff">' + "\n".join(rows) + "</pre>"


# spans -------------------------------------------------------------------------------------------
def token_text(tokens: dict | None) -> str:
    """A call's or a session's tokens in the log's kinds (tokens.py): the uncached input, the
    cache reads and writes, the output with its reasoning part."""
    u = Usage.of(tokens)
    reasoning = f" ({u.reasoning:,} reasoning)" if u.reasoning else ""
    return (f"{u.input:,} in / {u.cache_read:,} cache read / {u.cache_write + u.cache_write_1h:,}"
            f" cache write / {u.output:,} out{reasoning}")



def _bar(span_start, span_end, start, end) -> str:
    if None in (span_start, span_end, start):
        return '<div class="track"></div>'
    total = max(1, span_end - span_start)
    left = min(100.0, max(0.0, (start - span_start) * 100 / total))
    width = min(100.0 - left, max(0.3, ((end or start) - start) * 100 / total))
    return f'<div class="track"><div class="bar" style="left:{left:.2f}%;width:{width:.2f}%"></div></div>'


def _model_row(turn: Span, span: Span) -> str:
    a, tokens = span.attrs, span.attrs.get("tokens") or {}
    label = f"model {a.get('model') or '?'}"
    title = f"{token_text(tokens)} · {money(a.get('cost_usd'))}"
    row = (f'<div class="span model" title="{_e(title)}"><span class="label">{_e(label)}</span>'
           f'{_bar(turn.start, turn.end, span.start, span.end)}<span class="dur">{seconds(span.duration_ms)}'
           f'</span></div>\n<div class="sum indent">{_e(title)}</div>\n')
    if a.get("output"):
        row += f'<div class="msg answer md indent">{markdown_html(a["output"])}</div>\n'
    return row


def _tool_row(turn: Span, span: Span) -> str:
    a = span.attrs
    kind, text = tool_view(a.get("input"))
    brief = json.dumps(json.loads(text), ensure_ascii=False) if kind == "json" else text
    status = a.get("status") or "dangling"
    result = f'<pre class="result">{_e(a["result"])}</pre>' if a.get("result") else ""
    row = (f'<div class="span tool status-{_e(status)}"><span class="label">tool {_e(a.get("tool"))}'
           f'</span>{_bar(turn.start, turn.end, span.start, span.end)}<span class="dur">'
           f'{seconds(span.duration_ms)}</span></div>\n'
           f'<details class="tool" id="call-{_e(a.get("call_id"))}" data-view="{kind}"><summary>{_e(a.get("tool"))} '
           f'<span class="status-{_e(status)}">[{_e(status)}]</span> {_e(_first_line(brief))}'
           f'</summary>{_pre(kind, text)}'
           f'{result}</details>\n')
    if span.children:
        row += ('<div class="subagent"><div class="title">subagent started by this call</div>\n'
                + "".join(_turn(child, nested=True) for child in span.children) + "</div>\n")
    return row


def _first_line(text: str, limit: int = 100) -> str:
    line = (text or "").strip().splitlines()[0] if (text or "").strip() else ""
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _mark(event: dict) -> str:
    a, name = event.get("attrs") or {}, event["name"]
    if name == "crash":
        kept = f" — {money(a['saved_usd'])} of finished calls kept" if a.get("saved_usd") else ""
        attempt = f" (attempt {a['attempt']})" if a.get("attempt") else ""
        return f'<div class="cut crash" data-mark="crash">✗ {_e(a.get("label"))}{attempt}{_e(kept)}</div>\n'
    if name == "resume":
        return f'<div class="cut resume" data-mark="resume">↻ {_e(a.get("label"))}</div>\n'
    if name in ("prompt", "answer"):
        who = "the harness, on resume" if a.get("synthetic") else "user"
        return f'<div class="cut prompt">{_e(who)}: {_e(a.get("text"))}</div>\n'
    return f'<div class="cut prompt">{_e(name)}: {_e(a.get("text"))}</div>\n'


def _rows(turn: Span) -> list[tuple]:
    """Children and marks in the order they happened (marks before spans at the same time)."""
    rows = [(c.start if c.start is not None else 0, 1, i, c) for i, c in enumerate(turn.children)]
    rows += [(e["at"] if e.get("at") is not None else 0, 0, i, e) for i, e in enumerate(turn.events)]
    return sorted(rows, key=lambda r: r[:3])


def _turn(turn: Span, nested: bool = False) -> str:
    models = [c for c in turn.children if c.kind == "model_call"]
    tools = [c for c in turn.children if c.kind == "tool_call"]
    tokens = sum(Usage.of(m.attrs.get("tokens")).total for m in models)
    costs = [m.attrs.get("cost_usd") for m in models if m.attrs.get("cost_usd") is not None]
    summary = (f"{seconds(turn.duration_ms)} · {len(models)} model call(s) · {len(tools)} tool call(s)"
               f" · {tokens:,} tokens" + (f" · {money(sum(costs))}" if costs else ""))
    anchor = "" if nested else f' id="turn-{turn.attrs.get("turn", 0)}"'
    parts = [f'<section class="turn"{anchor}><h3>{_e(turn.name.capitalize())} '
             f'<span class="sum">{_e(summary)}</span></h3>\n']
    if turn.attrs.get("prompt"):
        parts.append(f'<div class="msg user md">{markdown_html(turn.attrs["prompt"])}</div>\n')
    for _, _, _, row in _rows(turn):
        if isinstance(row, dict):
            parts.append(_mark(row))
        else:
            parts.append(_model_row(turn, row) if row.kind == "model_call" else _tool_row(turn, row))
    return "".join(parts) + "</section>\n"


# pages -------------------------------------------------------------------------------------------
def stylesheet() -> str:
    """The page's whole CSS (a page showing `body` in its own serves this beside it)."""
    return CSS + highlight_css() + docs_html.CSS + NARROW


def _head(view, page: int) -> str:
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">\n'
            f'<meta http-equiv="Content-Security-Policy" content="{CSP}">\n'
            f'<meta name="viewport" content="width=device-width,initial-scale=1">\n'
            f"<title>dh session {_e(view.session['id'])} (page {page})</title>\n"
            f"<style>{stylesheet()}</style></head>\n<body>\n")


def _header(view) -> str:
    s, t = view.session, view.totals
    cost = t.get("cost") or {}
    saved = (f" · saved by resuming after {cost['crashes']} crash(es): {money(cost.get('saved_usd'))}"
             if cost.get("crashes") else "")
    return (f"<h1>dh session {_e(s['id'])} <small>{_e(s['harness'])}</small></h1>\n"
            f'<p class="meta">native id <code>{_e(s["harness_session_id"] or "-")}</code> · '
            f'cwd <code>{_e(s["cwd"] or "-")}</code> · state {_e(s["state"])} · attempts {s["attempts"]}</p>\n'
            f'<p class="meta" id="totals">{t.get("model_calls", 0)} model call(s) · {_e(token_text(t))}'
            f' tokens · cost {money(cost.get("usd"))}{_e(saved)}</p>\n'
            f"{_resumes(t.get('resumes') or [])}"
            f"<h2>Attempts</h2>\n{html_timeline(timeline(view.events))}")


def _resumes(resumes: list[dict]) -> str:
    """What each resume re-cached (logviews/resumecost.py), one line an attempt."""
    if not resumes:
        return ""
    rows = "".join(f"<li>{_e(resume_line(r))}</li>" for r in resumes)
    return f'<ul class="meta" id="resumes">{rows}</ul>\n'


def _nav(page: int, more: bool, link: Callable[[int], str] | None) -> str:
    if link is None or (page == 1 and not more):
        return ""
    prev = f'<a rel="prev" href="{_e(link(page - 1))}">← page {page - 1}</a>' if page > 1 else ""
    nxt = f'<a rel="next" href="{_e(link(page + 1))}">page {page + 1} →</a>' if more else ""
    return f'<nav class="pages">page {page} {prev}{nxt}</nav>\n'


def pages(view, turns: Iterator[Span], per_page: int = TURNS_PER_PAGE,
          link: Callable[[int], str] | None = None, documents: dict | None = None,
          show_secrets: bool = False) -> Iterator[bytes]:
    """The pages in order, each a whole HTML document of at most `per_page` turns; `link(n)`
    names page n for the links between pages; `documents` (kind -> Document) are drawn beside
    the trace of every page. Holds one page of turns at a time."""
    page, batch = 1, []
    for turn in turns:
        if len(batch) == per_page:
            yield _page(view, page, batch, True, link, documents, show_secrets)
            page, batch = page + 1, []
        batch.append(turn)
    yield _page(view, page, batch, False, link, documents, show_secrets)


def _page(view, page: int, turns: list[Span], more: bool, link, documents=None,
          show_secrets: bool = False) -> bytes:
    return (_head(view, page) + body(view, page, turns, more, link, documents, show_secrets)
            + "</body></html>\n").encode("utf-8")


def masked(span: Span) -> Span:
    """The span with every text in it masked (redact.py). Done on the text, before Markdown,
    highlighting and escaping split it: `password = "…"` highlighted is `password`, `=` and
    `"…"` in three elements, which no mask of the page finds."""
    return replace(span, attrs=_masked_data(span.attrs), events=_masked_data(span.events),
                   children=[masked(child) for child in span.children])


def _masked_data(value):
    """Each string masked (a tool's output as the text it is), then the whole as JSON text, so
    that a key names its value's kind (`{"API_TOKEN": "…"}` in a tool's arguments)."""
    value = clean(value)
    try:
        return json.loads(mask(json.dumps(value, ensure_ascii=False)))
    except (TypeError, ValueError):
        return value


def body(view, page: int, turns: list[Span], more: bool, link=None, documents=None,
         show_secrets: bool = False) -> str:
    """What a page shows, without the document around it (`dh serve` draws it in its own),
    every text masked first unless `show_secrets`."""
    if not show_secrets:
        view, turns = clean_view(copy.copy(view)), [masked(t) for t in turns]
    nav = _nav(page, more, link)
    trace_html = "".join(_turn(t) for t in turns) or '<p class="meta">No turns.</p>\n'
    trace = '<h2>Trace</h2>\n<main id="trace">\n' + trace_html + "</main>\n"
    side = docs_html.aside(documents or {}, _calls(turns))
    if side:
        trace = f'<div class="layout"><div>{trace}</div>\n{side}</div>\n'
    return _header(view) + nav + trace + nav


def _calls(turns: list[Span]) -> dict[str, int]:
    """call id -> the number of the (main) turn it is drawn in, subagents' calls included."""
    found: dict[str, int] = {}
    for turn in turns:
        number, stack = turn.attrs.get("turn", 0), list(turn.children)
        while stack:
            span = stack.pop()
            if span.kind == "tool_call" and span.attrs.get("call_id"):
                found.setdefault(span.attrs["call_id"], number)
            stack += span.children
    return found
