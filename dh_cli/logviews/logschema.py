"""`dh log schema`: what the log's tables and views hold, and queries to start from. The same
examples are in the README ("Querying the log") and tests/test_log_schema.py runs each."""

SCHEMA = """\
The log is one SQLite file ($DH_HOME/dh.db; `dh log status` prints its path). Open it with
sqlite3, sqlite-utils or datasette; every time is ISO 8601 UTC text (records also keep `ts`,
epoch milliseconds).

tables
  sessions      one row per session under dh: harness, native id, cwd, state, attempts
  sources       the native files (or OpenCode store) each session is mirrored from
  records       one row per native record, in order (source_id, generation, offset):
                  raw         the native JSON line as text (NULL when packed)
                  packed      the bytes of a long line, compressed (codec 2 LZ4, 1 deflate),
                              or of a line that is not JSON text (codec 0); `dh log show --raw`
                              prints every line byte-exact whichever column holds it
                  session_id, kind, role, tool_name, tool_call_id, status (a tool result:
                  ok | error), turn_start, model, msg_id, tokens_in, tokens_out,
                  tokens_cache_read, tokens_cache_write, at, flags
  events        dh's own journal per session: launches, exits, crashes, repairs, resumes
  codecs        what each records.codec means
  record_text   full-text index (FTS5) of prompts, answers, tool inputs and outputs

views
  model_calls   one row per model call (counted once), with its model and tokens
  tool_calls    one row per tool call: tool, started_at, finished_at, duration_ms, status
  turns         one row per turn: when, model calls, tool calls, tokens
  attempts      one row per launch of the harness: exit code, signal, outcome, calls kept
"""

# (what it answers, the query): run by the tests against a log of real sessions
EXAMPLES = [
    ("Model calls and tokens per session",
     "select s.id, s.harness, count(*) as calls, sum(m.tokens_in) as tokens_in,"
     " sum(m.tokens_out) as tokens_out from sessions s join model_calls m on m.session_id = s.id"
     " group by s.id order by s.created_at"),
    ("The slowest tool calls, and how they ended",
     "select session_id, tool, status, duration_ms from tool_calls"
     " order by duration_ms desc limit 10"),
    ("Every shell command Claude Code ran (fields of the native JSON lines)",
     "select at, json_extract(raw, '$.message.content[0].input.command') as command"
     " from records where tool_name = 'Bash' order by at"),
]


def text() -> str:
    lines = [SCHEMA, "examples (sqlite-utils query \"$(dh log status --path)\" \"...\")"]
    for title, sql in EXAMPLES:
        lines += [f"  -- {title}", f"  {sql}", ""]
    return "\n".join(lines)
