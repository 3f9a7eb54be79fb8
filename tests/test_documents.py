"""Documents from the real fixtures: `dh log docs --json` ends with the lists the harness
itself holds (Claude Code's own toolUseResult.newTodos and its tasks/<session>/ files,
OpenCode's `todo` table); Codex 0.171.0 refuses update_plan, so it has no plan and the
refused edit is in the history."""

from __future__ import annotations

import html
import json
import re
import sqlite3

import pytest

from .conftest import fixture_home
from .helpers.browser import CHROMIUM, open_in_chromium


def docs_of(run_dh, harness: str, scenario: str, tmp_path) -> dict:
    home = fixture_home(harness, scenario, tmp_path)
    imported = run_dh("import", harness, "--all", "--home", str(home))
    assert imported.exit_code == 0, imported.output
    listed = json.loads(run_dh("log", "list", "--json").output)
    main = [s for s in listed if s["harness"] == harness]
    shown = run_dh("log", "docs", main[0]["id"], "--json")
    assert shown.exit_code == 0, shown.output
    return json.loads(shown.output), home


def native_lines(home, pattern: str) -> list[dict]:
    (path,) = [p for p in home.glob(pattern) if "subagents" not in p.parts]
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_claude_todowrite_ends_with_the_harness_own_todos(run_dh, tmp_path):
    docs, home = docs_of(run_dh, "claude-code", "todowrite", tmp_path)
    lines = native_lines(home, "projects/*/*.jsonl")
    own = [l["toolUseResult"]["newTodos"] for l in lines
           if isinstance(l.get("toolUseResult"), dict) and "newTodos" in l["toolUseResult"]][-1]
    mine = [{"content": i["content"], "status": i["status"], "activeForm": i["active_form"]}
            for i in docs["todos"]["items"]]
    assert mine == own and len(own) == 2
    history = docs["todos"]["history"]
    assert [h["edit"]["call_id"] for h in history] == ["toolu_rig_000", "toolu_rig_002"]
    offsets = {h["record"]["offset"] for h in history}
    for h in history:  # each edit points at the record holding the harness's answer to it
        raw = (home / h["record"]["source"]).read_bytes()[h["record"]["offset"]:].split(b"\n")[0]
        assert h["edit"]["call_id"].encode() in raw and b"tool_result" in raw
    assert len(offsets) == 2


def test_claude_tasks_end_as_the_harness_tasks_folder(run_dh, tmp_path):
    docs, home = docs_of(run_dh, "claude-code", "subagent-tasks", tmp_path)
    files = sorted((home / "tasks").glob("*/*.json"))
    own = [json.loads(p.read_text()) for p in files]
    mine = [{"id": i["id"], "subject": i["content"], "description": i["description"],
             "activeForm": i["active_form"], "status": i["status"]} for i in docs["tasks"]["items"]]
    assert mine == [{k: t[k] for k in ("id", "subject", "description", "activeForm", "status")}
                    for t in own]
    assert [h["edit"]["op"] for h in docs["tasks"]["history"]] == ["create", "update"]


def test_opencode_todos_end_as_its_todo_rows(run_dh, tmp_path):
    docs, db = docs_of(run_dh, "opencode", "todowrite", tmp_path)
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT content, status, priority FROM todo ORDER BY position").fetchall()
    mine = [(i["content"], i["status"], i["priority"]) for i in docs["todos"]["items"]]
    assert mine == rows and len(rows) == 2


def test_codex_refused_update_plan_leaves_no_plan(run_dh, tmp_path):
    docs, _ = docs_of(run_dh, "codex", "update-plan-unsupported", tmp_path)
    plan = docs["plan"]
    assert plan["items"] == []  # Codex itself has no plan: it refused the call
    (entry,) = plan["history"]
    assert entry["edit"]["accepted"] is False and "unsupported call" in entry["edit"]["why"]
    assert [i["content"] for i in entry["edit"]["items"]] == ["Write a.txt", "Report"]


def test_text_output_marks_current_items_and_history(run_dh, tmp_path):
    home = fixture_home("claude-code", "todowrite", tmp_path)
    run_dh("import", "claude-code", "--all", "--home", str(home))
    sid = json.loads(run_dh("log", "list", "--json").output)[0]["id"]
    text = run_dh("log", "docs", sid).output
    assert "[x] Write a.txt" in text and "[~] Report back" in text and "toolu_rig_002" in text


def test_claude_tasks_folder_is_put_back_by_a_resume(run_dh, tmp_path):
    """The machine lost its tasks folder: the resume's rebuild writes it back, byte-shaped as
    Claude Code wrote it."""
    from dh_cli.documents.restore import restore_documents
    from dh_cli.worlds.local import LocalWorld
    from dh_cli.wrappers import get as get_wrapper

    docs, home = docs_of(run_dh, "claude-code", "subagent-tasks", tmp_path)
    (original,) = sorted((home / "tasks").glob("*/1.json"))
    own = original.read_bytes()
    import shutil

    shutil.rmtree(home / "tasks")
    world = LocalWorld()
    session = [s for s in world.sessions() if s.harness == "claude-code"][0]
    written = restore_documents(world, get_wrapper("claude-code"), session)
    assert written == [f"tasks/{session.harness_session_id}/1.json"]
    assert original.read_bytes() == own and (original.parent / ".lock").exists()
    assert restore_documents(world, get_wrapper("claude-code"), session) == []  # present: kept


def test_opencode_todo_rows_are_put_back_after_an_import(run_dh, tmp_path):
    """`opencode import` restores a session's messages and parts, not its `todo` rows: the
    resume's rebuild writes them from the todos document (the real schema and rows)."""
    from dh_cli.documents.restore import restore_documents
    from dh_cli.worlds.local import LocalWorld
    from dh_cli.wrappers import get as get_wrapper

    docs, db = docs_of(run_dh, "opencode", "todowrite", tmp_path)
    query = "SELECT session_id, content, status, priority, position FROM todo ORDER BY position"
    with sqlite3.connect(db) as conn:
        own = conn.execute(query).fetchall()
        conn.execute("DELETE FROM todo")  # as after `opencode import` on a new machine
    world = LocalWorld()
    session = [s for s in world.sessions() if s.harness == "opencode"][0]
    session.home = str(db)
    written = restore_documents(world, get_wrapper("opencode"), session)
    assert len(written) == 2
    with sqlite3.connect(db) as conn:
        assert conn.execute(query).fetchall() == own
    assert restore_documents(world, get_wrapper("opencode"), session) == []  # present: kept


# the HTML export: the documents beside the conversation, checked in headless chromium -------
def own_lists(harness: str, home) -> dict[str, list[tuple[str, str]]]:
    """What the harness itself holds at the end, as (content, status) per document kind:
    Claude Code's last toolUseResult.newTodos (the same list as its last TodoWrite input),
    its tasks/<session>/<id>.json files, OpenCode's `todo` rows; Codex refused its only
    update_plan, so it holds no plan."""
    if harness == "opencode":
        with sqlite3.connect(home) as conn:
            rows = conn.execute("SELECT content, status FROM todo ORDER BY position").fetchall()
        return {"todos": rows}
    if harness == "codex":
        return {"plan": []}
    tasks = [json.loads(p.read_text()) for p in sorted((home / "tasks").glob("*/*.json"))]
    if tasks:
        return {"tasks": [(t["subject"], t["status"]) for t in tasks]}
    lines = native_lines(home, "projects/*/*.jsonl")
    results = [l["toolUseResult"]["newTodos"] for l in lines
               if isinstance(l.get("toolUseResult"), dict) and "newTodos" in l["toolUseResult"]]
    inputs = [b["input"]["todos"] for l in lines if l.get("type") == "assistant"
              for b in l["message"]["content"] if b.get("type") == "tool_use" and b["name"] == "TodoWrite"]
    assert results[-1] == inputs[-1]
    return {"todos": [(t["content"], t["status"]) for t in results[-1]]}


SHOWN = [("claude-code", "todowrite"), ("claude-code", "subagent-tasks"), ("opencode", "todowrite"),
         ("codex", "update-plan-unsupported")]


@pytest.mark.skipif(not CHROMIUM, reason="chromium is not installed (.ci/run installs it with apt-get)")
@pytest.mark.parametrize("harness,scenario", SHOWN)
def test_html_export_shows_the_documents_beside_the_conversation(harness, scenario, run_dh, tmp_path):
    docs, home = docs_of(run_dh, harness, scenario, tmp_path)
    sid = [s for s in json.loads(run_dh("log", "list", "--json").output) if s["harness"] == harness][0]["id"]
    page = tmp_path / "session.html"
    assert run_dh("log", "export", sid, "--format", "html", "-o", str(page)).exit_code == 0
    dom, requests = open_in_chromium(page, tmp_path, f"docs-{harness}")
    assert requests == []
    layout = dom[dom.index('<div class="layout">'):]
    assert layout.index('<main id="trace">') < layout.index('<aside class="docs" id="documents">')
    side = layout[layout.index("<aside"):layout.index("</aside>")]
    shown = {kind: [(html.unescape(c), s) for s, c in re.findall(
        r'<li class="item status-[^"]*" data-status="([^"]*)"><span class="box">[^<]*</span>'
        r'(?:#\S+ )?([^<]*)</li>', body)]
        for kind, body in re.findall(r'<section class="doc" data-kind="(\w+)">(.*?)</section>', side, re.S)}
    assert shown == own_lists(harness, home) == {
        kind: [(i["content"], i["status"]) for i in doc["items"]] for kind, doc in docs.items()}
    # every edit of the history is there, naming the record that made it, linked to its call
    edits = re.findall(r'<li(?: class="refused")? data-call="([^"]+)" data-record="([^"]+)">(.*?)</li>', side)
    wanted = [(h["edit"]["call_id"], f'{h["record"]["source"].rsplit("/", 1)[-1]}@'
               f'{h["record"]["generation"]}:{h["record"]["offset"]}')
              for doc in docs.values() for h in doc["history"]]
    assert [(html.unescape(c), html.unescape(r)) for c, r, _ in edits] == wanted and wanted
    for call, _, text in edits:
        assert f'<a href="#call-{call}">' in text
        assert f'<details class="tool" id="call-{call}"' in dom  # the link lands on the call
    refused = [h for doc in docs.values() for h in doc["history"] if not h["edit"]["accepted"]]
    assert side.count('class="refused"') == len(refused)


def test_html_export_without_documents_has_no_column(run_dh, tmp_path):
    run_dh("import", "pi", "--all", "--home", str(fixture_home("pi", "basic", tmp_path)))
    sid = json.loads(run_dh("log", "list", "--json").output)[0]["id"]
    page = run_dh("log", "export", sid, "--format", "html").stdout
    assert "<aside" not in page and 'class="layout"' not in page and '<main id="trace">' in page


@pytest.mark.parametrize("harness, scenario", [("claude-code", "todowrite"),
                                               ("claude-code", "subagent-tasks")])
def test_only_the_records_of_document_calls_and_their_results_are_parsed(harness, scenario, run_dh,
                                                                         tmp_path, monkeypatch):
    """The documents column of a long session parsed every record of it; it parses those that
    name a document tool or answer such a call, and ends with the same documents."""
    from dh_cli.documents.build import session_documents
    from dh_cli.worlds.local import LocalWorld
    from dh_cli.wrappers import get as get_wrapper

    docs_of(run_dh, harness, scenario, tmp_path)
    world, wrapper = LocalWorld(), get_wrapper(harness)
    (session,) = [s for s in world.sessions() if s.harness == wrapper.name][:1]
    every = sum(1 for _ in world.records(session.id))
    parsed, parse = [], wrapper.parse
    monkeypatch.setattr(type(wrapper), "parse", lambda self, raw: parsed.append(raw) or parse(raw))
    docs = session_documents(world, wrapper, session.id)
    assert docs and all(doc.history for doc in docs.values())
    tools = [name.encode() for name in wrapper.document_tools]
    assert parsed and all(any(t in raw for t in tools) or b"tool" in raw.lower() for raw in parsed)
    assert len(parsed) < every / 2, (len(parsed), every)
