"""`dh log search`: FTS5 over prompts, answers, tool inputs and outputs of every session, kept
in step by the mirror (indexed in the same transaction as the records)."""

import json
import sqlite3

import pytest

from dh_cli.worlds import search as search_module

from dh_cli.worlds.local import LocalWorld
from dh_cli.worlds.search import search

from .conftest import fixture_home


def _import(run_dh, tmp_path, harness, scenario):
    home = fixture_home(harness, scenario, tmp_path / scenario)
    assert run_dh("import", harness, "--all", "--home", str(home)).exit_code == 0


def test_search_finds_a_word_from_a_tool_output_of_a_real_session(tmp_path, run_dh):
    _import(run_dh, tmp_path, "codex", "basic")
    _import(run_dh, tmp_path, "claude-code", "basic")
    # "d210a1" occurs only in the output of Codex's third exec_command ("Chunk ID: d210a1")
    (hit,) = json.loads(run_dh("log", "search", "d210a1", "--json").stdout)
    assert hit["harness"] == "codex" and hit["kind"] == "tool_result" and hit["turn"] == 1
    assert "Chunk ID: d210a1" in hit["snippet"] and hit["at"].startswith("2026-11-29T")
    # Claude Code's Write result, by two of its words, and a prompt
    (write,) = json.loads(run_dh("log", "search", "created successfully", "--json").stdout)
    assert write["harness"] == "claude-code" and "File created successfully" in write["snippet"]
    prompts = json.loads(run_dh("log", "search", "Create the files", "--json").stdout)
    assert {h["harness"] for h in prompts} == {"codex", "claude-code"}
    text = run_dh("log", "search", "d210a1").stdout
    assert text.startswith(hit["session_id"][:4]) and "turn 1" in text and "d210a1" in text


def test_search_filters_and_bad_queries(tmp_path, run_dh):
    _import(run_dh, tmp_path, "codex", "basic")
    _import(run_dh, tmp_path, "pi", "basic")
    both = json.loads(run_dh("log", "search", "step0", "--json").stdout)
    assert {h["harness"] for h in both} == {"codex", "pi"}
    only = json.loads(run_dh("log", "search", "step0", "--harness", "pi", "--json").stdout)
    assert only and {h["harness"] for h in only} == {"pi"}
    assert json.loads(run_dh("log", "search", "step0", "--since", "2030-01-01", "--json").stdout) == []
    # FTS5 syntax in what the user typed is searched for, not parsed
    assert run_dh("log", "search", 'step0 AND "NEAR(', "--json").exit_code == 0
    assert run_dh("log", "search", '"*"').exit_code == 2


def test_the_mirror_indexes_records_in_the_same_transaction(tail, monkeypatch):
    path, sync, world, session = tail
    path.write_bytes(b'{"type":"session","id":"s1","cwd":"/w"}\n'
                     b'{"type":"message","id":"a1","parentId":null,"message":{"role":"user",'
                     b'"content":"please grep for zanzibar"}}\n'
                     b'{"type":"message","id":"b1","parentId":"a1","message":{"role":"toolResult",'
                     b'"toolCallId":"t1","toolName":"bash","content":[{"type":"text",'
                     b'"text":"quokka.txt:1: found"}],"isError":false}}\n')
    sync()
    assert [h.kind for h in search(world.conn, "zanzibar")] == ["user"]
    assert [h.kind for h in search(world.conn, "quokka")] == ["tool_result"]
    sync()  # nothing new: nothing indexed twice
    indexed = world.conn.execute("SELECT COUNT(*) FROM record_text WHERE record_text MATCH 'quokka'")
    assert indexed.fetchone() == (1,)
    # a record and its text are one commit: when indexing fails, the record is not kept either
    monkeypatch.setattr(search_module, "INDEX_TEXT", "INSERT INTO no_such_table VALUES (?, ?, ?, ?, ?)")
    with path.open("ab") as handle:
        handle.write(b'{"type":"message","id":"c1","parentId":"b1","message":{"role":"user",'
                     b'"content":"and wombat"}}\n')
    with pytest.raises(sqlite3.OperationalError):
        sync()
    reader = LocalWorld()
    assert reader.conn.execute("SELECT COUNT(*) FROM records").fetchone() == (3,)
    assert reader.conn.execute("SELECT COUNT(*) FROM record_text").fetchone() == (2,)
