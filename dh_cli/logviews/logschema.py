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
                  raw         the native JSON line as text: every line under 64 KiB
                  packed      the bytes of a line of 64 KiB or more (file contents, images),
                              compressed (codec 2 LZ4, 1 deflate; `raw` is then NULL), or of a
                              line that is not JSON text (codec 0); `dh log show --raw` prints
                              every line byte-exact whichever column holds it
                  session_id, kind, role, tool_name, tool_call_id, status (a tool result:
                  ok | error), turn_start, model, msg_id, at, flags
                  tool_input  a tool call's input as JSON; tool_output: a result's first
                              300 characters
                  tokens_in (uncached input), tokens_cache_read, tokens_cache_write (5 min),
                  tokens_cache_write_1h, tokens_out (reasoning included), tokens_reasoning:
                              the same kinds for every harness, never counted twice
                  price_usd   a model call's price in USD by genai-prices' table, each kind of
                              token at its rate (NULL for a model the table does not know):
                              what `dh log cost` and `dh log show` print; every call is priced
                              again when another table is installed (`price_table`)
  events        dh's own journal per session: launches, exits, crashes, repairs, resumes
  codecs        what each records.codec means
  price_table   which installed price table records.price_usd came from
  session_digests  what `dh log list` keeps of a session (title, model calls summed per
                model); dropped by any change to its records, made again by the next list
  forks         a session forked on this machine (`dh resume S --world local`) and the
                session it was forked from
  record_text   full-text index (FTS5) of prompts, answers, tool inputs and outputs

views
  model_calls   one row per model call, counted once (a message streamed as several rows:
                its last, final usage): harness, model, every token kind, tokens_prompt
                (all input, cached or not), price_usd
  tool_calls    one row per tool call: harness, tool, input (JSON), started_at, finished_at,
                duration_ms, status, output (its first 300 characters)
  turns         one row per turn (a turn cut by a crash and resumed stays one): when, model
                calls, tool calls, tokens, crashes and resumes inside it
  attempts      one row per launch of the harness: exit code, signal, outcome, calls kept,
                the turn it ended in
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
    ("Every tool call's input and output, whatever the harness",
     "select harness, tool, input, status, output from tool_calls order by started_at"),
    ("What each session cost, in USD (NULL: a model the price table does not know)",
     "select s.id, s.harness, sum(m.price_usd) as usd from sessions s"
     " join model_calls m on m.session_id = s.id group by s.id order by usd desc"),
]


def text() -> str:
    lines = [SCHEMA, "examples (sqlite-utils query \"$(dh log status --path)\" \"...\")"]
    for title, sql in EXAMPLES:
        lines += [f"  -- {title}", f"  {sql}", ""]
    return "\n".join(lines)
