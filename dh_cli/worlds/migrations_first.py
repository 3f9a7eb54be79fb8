"""The log's first schema (m001-m010): sessions, their native sources and records byte-exact,
the supervisor's events, the queryable record columns, the search index and the first views.
Shipped migrations: never edited (migrations.py holds their one ordered list)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sqlite_utils import Database


def m001_sessions(db: Database) -> None:
    # One row per logical session under dh, across every relaunch of the harness.
    db["sessions"].create(
        {
            "id": str, "harness": str, "harness_session_id": str, "harness_version": str,
            "cwd": str, "home": str, "native_path": str, "project_key": str, "argv": str,
            "host": str, "state": str, "attempts": int, "created_at": str, "updated_at": str,
        },
        pk="id",
        not_null={"harness", "state", "created_at", "updated_at"},
        defaults={"state": "new", "attempts": 0},
    )
    db["sessions"].create_index(["harness", "harness_session_id"])


def m002_sources(db: Database) -> None:
    # A native file (or store) tracked for a session. `offset` is what is committed: every
    # complete record before it is in `records`; bytes after it are re-read next time.
    db["sources"].create(
        {
            "id": int, "session_id": str, "kind": str, "relpath": str, "path": str,
            "generation": int, "offset": int, "size": int, "inode": int, "head_hash": str,
            "tail_hash": str, "pending": int, "status": str, "updated_at": str,
        },
        pk="id",
        foreign_keys=[("session_id", "sessions", "id")],
        not_null={"session_id", "kind", "relpath"},
        defaults={"generation": 0, "offset": 0, "pending": 0, "status": "live"},
    )
    db["sources"].create_index(["session_id", "relpath"], unique=True)


def m003_records(db: Database) -> None:
    # Native records byte-exact in `raw` (deflated when `codec` is 1: large JSON lines shrink
    # 2-3x, which keeps the log smaller than the native files), plus columns extracted for
    # queries; `ts` is epoch milliseconds. The natural key (source, generation, offset) makes
    # every append idempotent.
    db["records"].create(
        {
            "id": int, "source_id": int, "generation": int, "offset": int, "raw": bytes,
            "codec": int, "kind": str, "native_id": str, "parent_id": str, "role": str,
            "tool_name": str, "tool_call_id": str, "model": str, "msg_id": str, "tokens_in": int,
            "tokens_out": int, "tokens_cache_read": int, "tokens_cache_write": int,
            "ts": int, "flags": str,
        },
        pk="id",
        not_null={"source_id", "generation", "offset", "raw"},
    )
    db["records"].create_index(["source_id", "generation", "offset"], unique=True)


def m004_events(db: Database) -> None:
    # dh's own journal: an intent before each action, an outcome after.
    db["events"].create(
        {
            "session_id": str, "seq": int, "at": str, "attempt": int, "type": str,
            "phase": str, "details": str,
        },
        pk=("session_id", "seq"),
        not_null={"type", "at"},
    )


def m005_records_kind_index(db: Database) -> None:
    # `raw` comes before the extracted columns, so for a long line SQLite walks its overflow
    # pages to reach `kind`: counting a session's tool results or finding its last prompt read
    # the whole session (66 ms for 100 MB, paid on every relaunch). This index answers both.
    db["records"].create_index(["source_id", "generation", "kind", "offset"],
                               index_name="records_by_kind")


def m006_codecs(db: Database) -> None:
    # Long lines are stored LZ4-compressed from here on (codec 2; see worlds/rows.py). The
    # table names each codec a record may carry, and a dh older than this migration refuses
    # the log ("written by a newer dh") instead of handing back compressed bytes as native.
    db["codecs"].insert_all([
        {"id": 0, "name": "stored as written"},
        {"id": 1, "name": "raw deflate, 4 KiB window"},
        {"id": 2, "name": "LZ4 block, uncompressed size first"},
    ], pk="id")

def m007_queryable_records(db: Database) -> None:
    # The log is queried the way people query `llm`'s log (sqlite-utils, datasette), and it
    # was not pleasant to: 9 % of `raw` held LZ4 bytes, so any `json_extract(raw, ...)` over
    # the table failed the whole query ("malformed JSON"); `raw` was a BLOB (datasette showed
    # each record as <Binary>); records could not be joined to sessions; codec was NULL or 0
    # for the same thing. The table is rebuilt: `raw` is the native line as TEXT whenever it
    # is JSON text (what SQLite's JSON functions read), else NULL with the bytes in `packed`
    # (codec 0 as written, 1 deflate, 2 LZ4), so no query over `raw` can fail; `session_id`
    # and `source_id` are foreign keys; `status` is a tool result's outcome, `turn_start` marks
    # the record that opens a turn (both filled by m008 for older rows); `at` is `ts` as
    # ISO 8601 UTC text, the format of every other time in the log. raw and packed come last:
    # reading the extracted columns no longer walks a long line's overflow pages.
    db.conn.create_function("dh_text", 1, _utf8_text, deterministic=True)
    db.execute(RECORDS_TABLE.format(name="records_new"))
    db.execute(f"""
        INSERT INTO records_new (id, session_id, {_KEPT}, codec, raw, packed)
        SELECT id, (SELECT session_id FROM sources o WHERE o.id = r.source_id), {_KEPT},
               COALESCE(codec, 0), CASE WHEN json_valid(t) THEN t END,
               CASE WHEN json_valid(t) THEN NULL ELSE raw END
        FROM (SELECT *, CASE WHEN COALESCE(codec, 0) = 0 THEN dh_text(raw) END AS t
              FROM records) r""")
    db.execute("DROP TABLE records")
    db.execute("ALTER TABLE records_new RENAME TO records")
    for sql in RECORDS_INDEXES:
        db.execute(sql)


_KEPT = ('source_id, generation, "offset", kind, native_id, parent_id, role, tool_name,'
         ' tool_call_id, model, msg_id, tokens_in, tokens_out, tokens_cache_read,'
         ' tokens_cache_write, ts, flags')
RECORDS_TABLE = """
    CREATE TABLE {name} (
        id INTEGER PRIMARY KEY,
        session_id TEXT REFERENCES sessions(id),
        source_id INTEGER NOT NULL REFERENCES sources(id),
        generation INTEGER NOT NULL,
        "offset" INTEGER NOT NULL,
        codec INTEGER NOT NULL DEFAULT 0 REFERENCES codecs(id),
        kind TEXT, native_id TEXT, parent_id TEXT, role TEXT,
        tool_name TEXT, tool_call_id TEXT, status TEXT, turn_start INTEGER,
        model TEXT, msg_id TEXT,
        tokens_in INTEGER, tokens_out INTEGER, tokens_cache_read INTEGER, tokens_cache_write INTEGER,
        ts INTEGER,
        at TEXT GENERATED ALWAYS AS (strftime('%Y-%m-%dT%H:%M:%fZ', ts / 1000.0, 'unixepoch')) VIRTUAL,
        flags TEXT,
        raw TEXT,
        packed BLOB,
        CHECK ((raw IS NULL) <> (packed IS NULL)))"""
RECORDS_INDEXES = [
    'CREATE UNIQUE INDEX idx_records_source_id_generation_offset'
    ' ON records (source_id, generation, "offset")',
    'CREATE INDEX records_by_kind ON records (source_id, generation, kind, "offset")',
    "CREATE INDEX records_by_session ON records (session_id, tool_call_id)",
]


def m008_status_and_model(db: Database) -> None:
    # m007's `status` and `turn_start` columns, and the model of Codex calls (named in the rollout's
    # turn_context, not on its token records, so `dh log show` printed None), for what was
    # logged before: each source's lines are read again through its harness's wrapper, once.
    from .backfill import fill_status_and_model

    fill_status_and_model(db.conn)


def m009_search(db: Database) -> None:
    # `dh log search`: full text of prompts, answers, tool inputs and outputs, one FTS5 row per
    # record (rowid = records.id). Contentless, so the text is not stored twice (the log would
    # grow by about the size of its text); a hit's snippet is cut from the record itself. The
    # mirror adds a record's text in the same transaction as the record; this fills it for
    # what was logged before.
    from .search import index_records

    # detail=none (no positions: a search is every word, not a phrase) and no diacritics
    # folding: indexing 100 MB of lines took 1.7 s instead of 2.6 s, and the index is smaller.
    db.execute("CREATE VIRTUAL TABLE record_text USING fts5(text, content='', detail=none,"
               " tokenize='unicode61 remove_diacritics 0')")
    index_records(db.conn)


def m010_views(db: Database) -> None:
    # The questions people ask of the log, as views to join in datasette or sqlite-utils.
    for sql in VIEWS:
        db.execute(sql)


VIEWS = [
    # one row per model call, counted once (an OpenCode message row is logged at each update:
    # its last version wins), in the latest generation of each source, as `dh log` totals them
    """CREATE VIEW model_calls AS
       SELECT id AS record_id, session_id, source_id, generation, "offset", at, model, msg_id,
              tokens_in, tokens_out, tokens_cache_read, tokens_cache_write
       FROM (SELECT r.*, ROW_NUMBER() OVER (PARTITION BY r.source_id, r.generation,
                    CASE WHEN o.kind = 'opencode' THEN r.msg_id ELSE r.id END
                    ORDER BY r."offset" DESC) AS version
             FROM records r JOIN sources o ON o.id = r.source_id
             WHERE r.tokens_in IS NOT NULL AND r.generation =
                   (SELECT MAX(x.generation) FROM records x WHERE x.source_id = r.source_id))
       WHERE version = 1""",
    # one row per tool call: its name, when it started and finished, and how it ended
    """CREATE VIEW tool_calls AS
       SELECT session_id, tool_call_id AS call_id, MAX(tool_name) AS tool,
              MIN(CASE WHEN tool_name IS NOT NULL THEN at END) AS started_at,
              MAX(CASE WHEN status IS NOT NULL THEN at END) AS finished_at,
              MAX(CASE WHEN status IS NOT NULL THEN ts END)
                - MIN(CASE WHEN tool_name IS NOT NULL THEN ts END) AS duration_ms,
              COALESCE(MAX(CASE WHEN status = 'error' THEN 'error' END), MAX(status), 'no result')
                AS status,
              MIN(CASE WHEN tool_name IS NOT NULL THEN id END) AS call_record_id,
              MAX(CASE WHEN status IS NOT NULL THEN id END) AS result_record_id
       FROM records WHERE tool_call_id IS NOT NULL AND tool_call_id <> ''
       GROUP BY session_id, tool_call_id""",
    # one row per turn of each source's latest generation, numbered from 1 as `dh log show` does
    """CREATE VIEW turns AS
       WITH starts AS (
           SELECT r.session_id, r.source_id, r.generation, r."offset", r.at, r.id,
                  LEAD(r."offset") OVER w AS next_offset, ROW_NUMBER() OVER w AS turn
           FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY source_id, generation,
                        COALESCE(native_id, id) ORDER BY "offset") AS version
                 FROM records WHERE turn_start = 1) r
           WHERE r.version = 1 AND r.generation =
                 (SELECT MAX(x.generation) FROM records x WHERE x.source_id = r.source_id)
           WINDOW w AS (PARTITION BY r.source_id, r.generation ORDER BY r."offset"))
       SELECT s.session_id, s.source_id, s.turn, s.id AS prompt_record_id, s.at AS started_at,
              (SELECT MAX(x.at) FROM records x WHERE x.source_id = s.source_id
                 AND x.generation = s.generation AND x."offset" >= s."offset"
                 AND (s.next_offset IS NULL OR x."offset" < s.next_offset)) AS last_at,
              (SELECT COUNT(DISTINCT x.tool_call_id) FROM records x WHERE x.source_id = s.source_id
                 AND x.generation = s.generation AND x.tool_name IS NOT NULL AND x."offset" >= s."offset"
                 AND (s.next_offset IS NULL OR x."offset" < s.next_offset)) AS tool_calls,
              COUNT(m.record_id) AS model_calls, SUM(m.tokens_in) AS tokens_in,
              SUM(m.tokens_out) AS tokens_out, SUM(m.tokens_cache_read) AS tokens_cache_read,
              SUM(m.tokens_cache_write) AS tokens_cache_write
       FROM starts s LEFT JOIN model_calls m ON m.source_id = s.source_id
            AND m.generation = s.generation AND m."offset" >= s."offset"
            AND (s.next_offset IS NULL OR m."offset" < s.next_offset)
       GROUP BY s.session_id, s.source_id, s.turn""",
    # one row per launch of the harness under dh (from dh's own journal)
    """CREATE VIEW attempts AS
       SELECT session_id, attempt, MIN(at) AS started_at, MAX(at) AS ended_at,
              MAX(CASE WHEN type = 'exited' THEN json_extract(details, '$.code') END) AS exit_code,
              MAX(CASE WHEN type = 'exited' THEN json_extract(details, '$.signal') END) AS signal,
              MAX(CASE WHEN type = 'state' THEN json_extract(details, '$.outcome') END) AS outcome,
              MAX(CASE WHEN type = 'resume_plan' THEN json_extract(details, '$.kept') END)
                AS calls_kept
       FROM events WHERE attempt IS NOT NULL GROUP BY session_id, attempt""",
]


def _utf8_text(data):
    """The bytes as text when they are UTF-8 without NUL (what a TEXT column holds exactly)."""
    if not isinstance(data, bytes) or b"\x00" in data:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None
