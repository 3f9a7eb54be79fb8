"""The trace view (`dh log export --format html` and `dh serve`'s session page, one
renderer: tracehtml.body) masks every text before Markdown, highlighting and escaping split
it: a password in highlighted code, a `PGPASSWORD=` in a command, a key in a tool's JSON
arguments or output."""

from __future__ import annotations

import json

from dh_cli.logviews.logview import SessionView
from dh_cli.logviews.trace import Span
from dh_cli.logviews.tracehtml import body

SECRETS = ["pg-s3cr3t-pw", "code-s3cr3t-val", "json-s3cr3t-out", "args-s3cr3t-key", "tok-s3cr3t-val",
           "file-s3cr3t-val", "doc-s3cr3t"]


def crafted_turn() -> Span:
    tools = [
        Span("tool_call", "Bash", 1, 2, {"tool": "Bash", "call_id": "c1", "status": "ok",
                                         "input": {"command": "PGPASSWORD=pg-s3cr3t-pw psql -h db"},
                                         "result": json.dumps({"password": "json-s3cr3t-out", "rows": 3})}),
        Span("tool_call", "deploy", 2, 3, {"tool": "deploy", "call_id": "c2", "status": "ok",
                                           "input": {"env": {"API_TOKEN": "args-s3cr3t-key"}}}),
        Span("tool_call", "Write", 3, 4, {"tool": "Write", "call_id": "c3", "status": "ok",
                                          "input": {"file_path": "conf.py", "content": 'password = "file-s3cr3t-val"\n'}}),
    ]
    model = Span("model_call", "m", 0, 1, {"model": "m", "tokens": {"input": 3}, "cost_usd": 0.01,
                                          "output": "Run `export API_TOKEN=tok-s3cr3t-val` first."})
    prompt = 'Fix this:\n\n```python\npassword = "code-s3cr3t-val"\n```\n'
    return Span("turn", "turn 1", 0, 4, {"turn": 1, "prompt": prompt}, [model, *tools],
                [{"name": "prompt", "at": 2, "attrs": {"text": "secret: doc-s3cr3t"}}])


def view() -> SessionView:
    session = {"id": "s1", "harness": "claude-code", "harness_session_id": "n1", "cwd": "/p",
               "state": "finished", "attempts": 1}
    return SessionView(session=session, totals={"model_calls": 1, "cost": {"usd": 0.01}})


def test_secrets_are_masked_on_the_text_before_it_is_rendered():
    page = body(view(), 1, [crafted_turn()], False)
    assert [s for s in SECRETS if s in page] == []
    assert 'class="hl"' in page or "hl" in page  # the code was still highlighted
    assert page.count("***") >= len(SECRETS)


def test_show_secrets_shows_them():
    page = body(view(), 1, [crafted_turn()], False, show_secrets=True)
    assert "pg-s3cr3t-pw" in page and "args-s3cr3t-key" in page
