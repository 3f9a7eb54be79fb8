"""The soak's own rules (tests/soak/), checked on made-up states: what counts as a reply the
harness kept, and as dh's word reaching the model."""

from tests.soak import checks, state

FINAL = state.FINAL_TEXT.encode()


def test_codex_s_final_answer_counts_as_kept_only_once_its_usage_came():
    written = b'{"type":"function_call","call_id":"call_007"}\n{"type":"message","text":"' + FINAL + b'"}\n'
    assert state._kept_in(written, "codex") == {7}  # the response's last frame never came
    whole = written + b'{"type":"event_msg","payload":{"type":"token_count"}}\n'
    assert state._kept_in(whole, "codex") == {7, 8}
    assert state._kept_in(written, "claude-code") == {7, 8}  # others: the text is enough


class Server:
    def __init__(self, bodies: list[dict]):
        self.log = [e for seq, body in enumerate(bodies) for e in (
            {"seq": seq, "event": "request", "kind": "main", "reply_index": 0, "body": body},
            {"seq": seq, "event": "response_done"})]


def test_dh_s_word_counts_in_the_last_user_message_or_the_system_prompt():
    word = f"[dh] a step {checks.MAY_HAVE_RUN}."
    user = {"messages": [{"role": "user", "content": [{"type": "text", "text": f"Go.\n\n{word}"}]}]}
    system = {"system": [{"type": "text", "text": f"You code.\n{word}"}],
              "messages": [{"role": "user", "content": "Go."}]}
    developer = {"input": [{"role": "developer", "content": word}, {"role": "user", "content": "Go."}]}
    plain = {"system": "You code.", "messages": [{"role": "user", "content": "Go."}]}
    assert checks.warned_deliveries(Server([user, system, developer, plain]), 0) == 3
    assert checks.warned_deliveries(Server([plain]), 0) == 0


def test_an_opencode_database_not_yet_migrated_holds_no_reply(tmp_path):
    import sqlite3

    db = tmp_path / "opencode.db"
    sqlite3.connect(db).close()  # made, no table yet: a kill in OpenCode's first second
    assert state._opencode_bytes(db) == b""
    conn = sqlite3.connect(db)
    conn.executescript("CREATE TABLE message (data TEXT); CREATE TABLE part (data TEXT);"
                       "INSERT INTO part VALUES ('call_003');")
    conn.close()
    assert state._kept_in(state._opencode_bytes(db), "opencode") == {3}
