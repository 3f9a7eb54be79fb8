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
    monkeypatch.setattr(search_module, "INDEX_TEXT_AT", "INSERT INTO no_such_table VALUES (?, ?)")
    with path.open("ab") as handle:
        handle.write(b'{"type":"message","id":"c1","parentId":"b1","message":{"role":"user",'
                     b'"content":"and wombat"}}\n')
    with pytest.raises(sqlite3.OperationalError):
        sync()
    reader = LocalWorld()
    assert reader.conn.execute("SELECT COUNT(*) FROM records").fetchone() == (3,)
    assert reader.conn.execute("SELECT COUNT(*) FROM record_text").fetchone() == (2,)


def test_texts_go_under_their_records_ids_when_some_rows_were_there_already(tail):
    # a batch of which some rows are in the log already (OR IGNORE keeps them out): the
    # ids after the largest are then not the batch's, and each text is found by its place
    from dh_cli.worlds.local_records import insert_rows
    from dh_cli.worlds.rows import ROW_WIDTH

    path, sync, world, session = tail
    (source,) = world.sources(session.id)

    def row(offset: int, word: str) -> tuple:
        line = json.dumps({"type": "message", "id": word, "message": {"role": "user", "content": word}})
        return (source.id, 0, offset, line.encode(), None, "user") + (None,) * (ROW_WIDTH - 6) + (word,)

    with world._write() as conn:
        assert insert_rows(conn, [row(0, "aardvark"), row(100, "bison")]) == 2
    with world._write() as conn:  # the first two again, around two new ones
        assert insert_rows(conn, [row(0, "aardvark"), row(50, "cheetah"), row(100, "bison"),
                                  row(150, "dingo")]) == 2
    by_word = {word: world.conn.execute("SELECT rowid FROM record_text WHERE record_text MATCH ?",
                                        [word]).fetchall()
               for word in ("aardvark", "bison", "cheetah", "dingo")}
    ids = dict(world.conn.execute('SELECT "offset", id FROM records WHERE source_id = ?', [source.id]))
    assert by_word == {"aardvark": [(ids[0],)], "bison": [(ids[100],)], "cheetah": [(ids[50],)],
                       "dingo": [(ids[150],)]}
