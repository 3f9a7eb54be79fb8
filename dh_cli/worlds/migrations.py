"""The local log's schema, as named migrations. Shipped migrations are never edited: a change
is a new function appended at the end with the next number."""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sqlite_utils import Database, Migrations

# Importing sqlite_utils takes longer than the rest of dh's start-up, and a log that is up to
# date needs none of it: the applied names are read with plain SQL, and sqlite_utils'
# `Migrations` is built only when one is pending.
MIGRATIONS: list = []
SET_NAME = "dh"


def migration(fn):
    MIGRATIONS.append(fn)
    return fn


@migration
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


@migration
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


@migration
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


@migration
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


@migration
def m005_records_kind_index(db: Database) -> None:
    # `raw` comes before the extracted columns, so for a long line SQLite walks its overflow
    # pages to reach `kind`: counting a session's tool results or finding its last prompt read
    # the whole session (66 ms for 100 MB, paid on every relaunch). This index answers both.
    db["records"].create_index(["source_id", "generation", "kind", "offset"],
                               index_name="records_by_kind")


@migration
def m006_codecs(db: Database) -> None:
    # Long lines are stored LZ4-compressed from here on (codec 2; see worlds/rows.py). The
    # table names each codec a record may carry, and a dh older than this migration refuses
    # the log ("written by a newer dh") instead of handing back compressed bytes as native.
    db["codecs"].insert_all([
        {"id": 0, "name": "stored as written"},
        {"id": 1, "name": "raw deflate, 4 KiB window"},
        {"id": 2, "name": "LZ4 block, uncompressed size first"},
    ], pk="id")

@migration
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


@migration
def m008_status_and_model(db: Database) -> None:
    # m007's `status` and `turn_start` columns, and the model of Codex calls (named in the rollout's
    # turn_context, not on its token records, so `dh log show` printed None), for what was
    # logged before: each source's lines are read again through its harness's wrapper, once.
    from .backfill import fill_status_and_model

    fill_status_and_model(db.conn)


@migration
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


@migration
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


@migration
def m013_places(db: Database) -> None:
    # Where a session lives on THIS machine (its harness home and cwd) and which file each
    # source was mirrored from, as dh decided them here (dh run, dh import, an explicit
    # adoption on resume). Never copied by a world push or pull: a session row pulled from a
    # shared world carries the other machine's home, cwd and paths, which an attacker who can
    # write to that world chooses (issue 14); confine.py trusts only these tables.
    db["places"].create({"session_id": str, "home": str, "cwd": str, "decided_at": str},
                        pk="session_id", not_null={"home"})
    db["mirrored_paths"].create({"source_id": int, "path": str}, pk="source_id",
                                not_null={"path"})


@migration
def m025_workspace_objects(db: Database) -> None:
    # Workspace snapshots (dh_cli/workspace/): content-addressed blobs and per-folder trees,
    # named by their sha256, so a file shared by a hundred snapshots is stored once.
    db.execute("CREATE TABLE ws_objects (hash TEXT PRIMARY KEY, kind TEXT NOT NULL,"
               " size INTEGER NOT NULL, codec INTEGER NOT NULL, data BLOB NOT NULL) WITHOUT ROWID")


@migration
def m026_workspace_snapshots(db: Database) -> None:
    # One row per snapshot of a session's cwd: after a tool call that may write, at a turn's
    # end. `root` names the top tree in ws_objects; seq orders a session's snapshots.
    db.execute("CREATE TABLE ws_snapshots (session_id TEXT NOT NULL REFERENCES sessions (id),"
               " seq INTEGER NOT NULL, at TEXT NOT NULL, turn INTEGER, step TEXT,"
               " reason TEXT NOT NULL, root TEXT NOT NULL, head TEXT, branch TEXT,"
               " files INTEGER, bytes INTEGER, skipped INTEGER, PRIMARY KEY (session_id, seq))")



@migration
def m035_token_kinds_and_tool_text(db: Database) -> None:
    # One token vocabulary (dh_cli/tokens.py): 1-hour cache writes apart from the 5-minute ones
    # (priced higher) and reasoning tokens; a tool call's input (JSON) and the opening of a
    # tool's output beside their record, so `tool_calls` shows them whatever the harness. Every
    # logged call's usage is read again from its native line: counts kept in another harness's
    # sense (OpenAI's input with its cached tokens inside) are set right, and each row of a
    # streamed message gets its usage (the views count the message's last, final row).
    from .backfill import fill_tokens_and_tools

    for name in ("tokens_cache_write_1h INTEGER", "tokens_reasoning INTEGER", "tool_input TEXT",
                 "tool_output TEXT"):
        db.execute(f"ALTER TABLE records ADD COLUMN {name}")
    fill_tokens_and_tools(db.conn)


@migration
def m036_unpacked_records(db: Database) -> None:
    # Lines under rows.PACK_MIN (64 KiB) are kept as text in `raw` from here on: packed, a
    # current Claude Code tool_use line (1,040-1,106 bytes) was NULL to every JSON query. Rows
    # packed before are unpacked the same way; larger ones stay packed.
    from .rows import PACK_MIN, decode_raw

    def text_of(packed, codec):
        if packed is None or codec not in (1, 2):
            return None
        line = decode_raw(packed, codec)
        return _utf8_text(line) if len(line) < PACK_MIN else None

    db.conn.create_function("dh_unpacked", 2, text_of, deterministic=True)
    db.execute("""UPDATE records SET raw = t, packed = NULL, codec = 0
                  FROM (SELECT id AS rid, dh_unpacked(packed, codec) AS t FROM records
                        WHERE packed IS NOT NULL AND codec IN (1, 2))
                  WHERE id = rid AND t IS NOT NULL AND json_valid(t)""")


@migration
def m037_views(db: Database) -> None:
    # The views again (never edited in m010): model_calls and turns in the one token vocabulary,
    # a streamed message counted once with its last (final) usage; tool_calls with the harness,
    # the input and the output's opening; a turn cut and resumed stays one turn, its crashes
    # and resumes counted in it, and each attempt names the turn it ended in.
    for name in ("attempts", "turns", "tool_calls", "model_calls"):
        db.execute(f"DROP VIEW IF EXISTS {name}")
    for sql in VIEWS_M037:
        db.execute(sql)


VIEWS_M037 = [
    # one row per model call in the latest generation of each source. A message streamed as
    # several rows (one per content block, output_tokens growing) is its last row of the run;
    # an OpenCode message row is logged at each update: its last version wins. Both windows
    # are partitioned by session and source alone, so that SQLite pushes a `session_id = ?` or
    # `source_id = ?` into them (partitioned apart, it read the whole table: 0.42 s for one
    # session of a 30-session, 12,000-record log against 0.007 s).
    """CREATE VIEW model_calls AS
       SELECT u.id AS record_id, u.session_id, s.harness, u.source_id, u.generation, u."offset",
              u.at, u.model, u.msg_id, u.tokens_in, u.tokens_cache_read, u.tokens_cache_write,
              COALESCE(u.tokens_cache_write_1h, 0) AS tokens_cache_write_1h, u.tokens_out,
              COALESCE(u.tokens_reasoning, 0) AS tokens_reasoning,
              u.tokens_in + COALESCE(u.tokens_cache_read, 0) + COALESCE(u.tokens_cache_write, 0)
                + COALESCE(u.tokens_cache_write_1h, 0) AS tokens_prompt
       FROM (SELECT r.*, o.kind AS source_kind,
                    LEAD(r.msg_id) OVER (PARTITION BY r.session_id, r.source_id
                                         ORDER BY r."offset") AS next_msg,
                    LEAD(r.msg_id) OVER (PARTITION BY r.session_id, r.source_id
                                         ORDER BY r.msg_id, r."offset") AS next_version
             FROM records r JOIN sources o ON o.id = r.source_id
             WHERE (r.tokens_in IS NOT NULL OR r.turn_start = 1) AND r.generation =
                   (SELECT MAX(x.generation) FROM records x WHERE x.source_id = r.source_id)) u
       JOIN sessions s ON s.id = u.session_id
       WHERE u.tokens_in IS NOT NULL
         AND (u.msg_id IS NULL OR CASE WHEN u.source_kind = 'opencode' THEN u.next_version
                                       ELSE u.next_msg END IS NOT u.msg_id)""",
    # one row per tool call: its harness, name, input (JSON), when it started and finished,
    # how it ended and the opening of its output
    """CREATE VIEW tool_calls AS
       SELECT t.session_id, s.harness, t.call_id, t.tool, c.tool_input AS input, t.started_at,
              t.finished_at, t.duration_ms, t.status, o.tool_output AS output, t.call_record_id,
              t.result_record_id
       FROM (SELECT session_id, tool_call_id AS call_id, MAX(tool_name) AS tool,
                    MIN(CASE WHEN tool_name IS NOT NULL THEN at END) AS started_at,
                    MAX(CASE WHEN status IS NOT NULL THEN at END) AS finished_at,
                    MAX(CASE WHEN status IS NOT NULL THEN ts END)
                      - MIN(CASE WHEN tool_name IS NOT NULL THEN ts END) AS duration_ms,
                    COALESCE(MAX(CASE WHEN status = 'error' THEN 'error' END), MAX(status),
                             'no result') AS status,
                    MIN(CASE WHEN tool_name IS NOT NULL THEN id END) AS call_record_id,
                    MAX(CASE WHEN status IS NOT NULL THEN id END) AS result_record_id,
                    MAX(CASE WHEN tool_input IS NOT NULL THEN id END) AS input_record_id
             FROM records WHERE tool_call_id IS NOT NULL AND tool_call_id <> ''
             GROUP BY session_id, tool_call_id) t
       LEFT JOIN sessions s ON s.id = t.session_id
       LEFT JOIN records c ON c.id = t.input_record_id
       LEFT JOIN records o ON o.id = t.result_record_id""",
    # one row per turn of each source's latest generation, numbered from 1 as `dh log show`
    # does. The first prompt row after a resume that went on with a cut turn (dh's own journal:
    # a resume_plan whose `cut` is true) continues that turn, whatever the harness wrote around
    # it; the session's crashes and resumes are counted in the turn of its main source they
    # fell in.
    """CREATE VIEW turns AS
       WITH cuts AS (
           SELECT session_id, at FROM events WHERE type = 'resume_plan'
              AND COALESCE(json_extract(details, '$.cut'), json_extract(details, '$.continues') <> '') = 1),
       marked AS (
           SELECT r.session_id, r.source_id, r.generation, r."offset", r.at, r.id
           FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY source_id, generation,
                        COALESCE(native_id, id) ORDER BY "offset") AS version
                 FROM records WHERE turn_start = 1) r
           WHERE r.version = 1 AND r.generation =
                 (SELECT MAX(x.generation) FROM records x WHERE x.source_id = r.source_id)),
       starts AS (
           SELECT m.*, LEAD(m."offset") OVER w AS next_offset, LEAD(m.at) OVER w AS next_at,
                  ROW_NUMBER() OVER w AS turn,
                  m.source_id = (SELECT MIN(o.id) FROM sources o WHERE o.session_id = m.session_id)
                    AS main
           FROM marked m
           WHERE NOT EXISTS (
               SELECT 1 FROM cuts c WHERE c.session_id = m.session_id AND c.at <= m.at
                  AND m.source_id = (SELECT MIN(o.id) FROM sources o WHERE o.session_id = m.session_id)
                  AND EXISTS (SELECT 1 FROM marked p WHERE p.source_id = m.source_id
                                 AND p."offset" < m."offset" AND p.at < c.at)
                  AND NOT EXISTS (SELECT 1 FROM marked y WHERE y.source_id = m.source_id
                                     AND y."offset" < m."offset" AND y.at >= c.at))
           WINDOW w AS (PARTITION BY m.source_id ORDER BY m."offset"))
       SELECT s.session_id, s.source_id, s.turn, s.id AS prompt_record_id, s.at AS started_at,
              (SELECT MAX(x.at) FROM records x WHERE x.source_id = s.source_id
                 AND x.generation = s.generation AND x."offset" >= s."offset"
                 AND (s.next_offset IS NULL OR x."offset" < s.next_offset)) AS last_at,
              (SELECT COUNT(DISTINCT x.tool_call_id) FROM records x WHERE x.source_id = s.source_id
                 AND x.generation = s.generation AND x.tool_name IS NOT NULL AND x."offset" >= s."offset"
                 AND (s.next_offset IS NULL OR x."offset" < s.next_offset)) AS tool_calls,
              (SELECT COUNT(*) FROM events e WHERE s.main AND e.session_id = s.session_id
                 AND e.type = 'state' AND json_extract(e.details, '$.outcome') IN ('crashed', 'hung')
                 AND e.at >= s.at AND (s.next_at IS NULL OR e.at < s.next_at)) AS crashes,
              (SELECT COUNT(*) FROM cuts c WHERE s.main AND c.session_id = s.session_id
                 AND c.at >= s.at AND (s.next_at IS NULL OR c.at < s.next_at)) AS resumes,
              COUNT(m.record_id) AS model_calls, SUM(m.tokens_in) AS tokens_in,
              SUM(m.tokens_cache_read) AS tokens_cache_read,
              SUM(m.tokens_cache_write) AS tokens_cache_write,
              SUM(m.tokens_cache_write_1h) AS tokens_cache_write_1h, SUM(m.tokens_out) AS tokens_out,
              SUM(m.tokens_reasoning) AS tokens_reasoning
       FROM starts s LEFT JOIN model_calls m ON m.source_id = s.source_id
            AND m.generation = s.generation AND m."offset" >= s."offset"
            AND (s.next_offset IS NULL OR m."offset" < s.next_offset)
       GROUP BY s.session_id, s.source_id, s.turn""",
    # one row per launch of the harness under dh (from dh's own journal), with the turn of the
    # main conversation it ended in and whether the turn it resumed had been cut
    """CREATE VIEW attempts AS
       SELECT a.*, (SELECT MAX(t.turn) FROM turns t WHERE t.session_id = a.session_id
                      AND t.source_id = (SELECT MIN(o.id) FROM sources o WHERE o.session_id = a.session_id)
                      AND t.started_at <= a.ended_at) AS turn
       FROM (SELECT session_id, attempt, MIN(at) AS started_at, MAX(at) AS ended_at,
                    MAX(CASE WHEN type = 'exited' THEN json_extract(details, '$.code') END) AS exit_code,
                    MAX(CASE WHEN type = 'exited' THEN json_extract(details, '$.signal') END) AS signal,
                    MAX(CASE WHEN type = 'state' THEN json_extract(details, '$.outcome') END) AS outcome,
                    MAX(CASE WHEN type = 'resume_plan' THEN json_extract(details, '$.kept') END)
                      AS calls_kept,
                    MAX(CASE WHEN type = 'resume_plan' THEN json_extract(details, '$.cut') END)
                      AS resumed_cut_turn
             FROM events WHERE attempt IS NOT NULL GROUP BY session_id, attempt) a""",
]

@migration
def m040_places_argv(db: Database) -> None:
    # The args the user ran the session with on THIS machine: the only argv a resume here
    # replays as it is. A session's own `argv` column may come from a world (a pull
    # overwrites it), and a world must not choose the harness's flags (issue 30).
    db.execute("ALTER TABLE places ADD COLUMN argv TEXT")


@migration
def m041_session_worlds(db: Database) -> None:
    # The shared world a session replicated to from this machine, with its URL minus the
    # password: a plain `dh resume` of it asks that world first, so a machine that comes
    # back after a takeover never runs the turn again (issue 30). Local only, like places.
    db.execute("CREATE TABLE session_worlds (session_id TEXT PRIMARY KEY, world TEXT NOT NULL,"
               " url TEXT, at TEXT NOT NULL)")


@migration
def m042_record_prices(db: Database) -> None:
    # Each model call's price in USD beside its tokens, so that the log answers "what did it
    # cost" to plain sqlite3, sqlite-utils and datasette, which cannot run genai-prices: dh
    # prices a record as it writes it (rows.INSERT_RECORD calls dh_price(), pricing.py), and
    # here every call logged before. Local only, like the search index: each machine prices
    # the records it holds with its own price table.
    from ..pricing import register_price
    from .prices import PRICE_RECORDS

    register_price(db.conn)
    db.execute("ALTER TABLE records ADD COLUMN price_usd REAL")
    db.execute(PRICE_RECORDS)


@migration
def m043_model_call_prices(db: Database) -> None:
    # model_calls of m037 with each call's price (records.price_usd, NULL for a model the
    # price table does not know). `turns` reads model_calls by name and is left as it is.
    db.execute("DROP VIEW model_calls")
    db.execute(MODEL_CALLS_M043)


MODEL_CALLS_M043 = VIEWS_M037[0].replace(
    "AS tokens_prompt\n", "AS tokens_prompt,\n              u.price_usd\n", 1)


@migration
def m044_price_table(db: Database) -> None:
    # Which price table the log's prices came from (pricing.table_signature): when another is
    # installed, worlds/prices.py prices every call again, so that a query of the log reads
    # what `dh log cost` prints. m042 priced with the one installed now.
    from ..pricing import table_signature
    from .prices import mark_priced

    db.execute("CREATE TABLE price_table (signature TEXT)")
    mark_priced(db.conn, table_signature())


@migration
def m045_session_digests(db: Database) -> None:
    # What `dh log list` shows of a session that only its records decide (its title, its model
    # calls summed per model), kept so a list reads one row per session: reading the
    # model_calls view for every session was 0.7-0.9 s of a list of 10,001. A digest is
    # dropped by any change to its session's records or sources, and made again by the next
    # list (logviews/sessionlist.py); `rules` names the dh that made it.
    db.execute("CREATE TABLE session_digests (session_id TEXT PRIMARY KEY, rules TEXT NOT NULL,"
               " title TEXT NOT NULL, calls TEXT NOT NULL)")
    drop = "DELETE FROM session_digests WHERE session_id = {}.session_id;"
    for table, change, row in (("records", "INSERT", "NEW"), ("records", "UPDATE", "OLD"),
                               ("records", "DELETE", "OLD"), ("sources", "INSERT", "NEW"),
                               ("sources", "UPDATE", "OLD"), ("sources", "DELETE", "OLD")):
        also = drop.format("NEW") if row == "OLD" and change == "UPDATE" else ""
        db.execute(f"CREATE TRIGGER {table}_{change.lower()}_drops_digest AFTER {change} ON {table}"
                   f" BEGIN {drop.format(row)} {also} END")
    db.execute("CREATE TRIGGER sessions_delete_drops_digest AFTER DELETE ON sessions"
               " BEGIN DELETE FROM session_digests WHERE session_id = OLD.id; END")


@migration
def m048_forks(db: Database) -> None:
    # The session a session was forked from on this machine (`dh resume S --world local` of
    # a session that replicated to a world: a new session, S left as it is there), for the
    # list to show in one read. The fork's own `forked` event is what travels with it.
    db.execute("CREATE TABLE forks (session_id TEXT PRIMARY KEY, forked_from TEXT NOT NULL,"
               " at TEXT NOT NULL)")


def names() -> list[str]:
    return [fn.__name__ for fn in MIGRATIONS]


def migration_set() -> Migrations:
    """The migrations as sqlite_utils' `Migrations`, which applies them."""
    from sqlite_utils import Migrations

    built = Migrations(SET_NAME)
    for fn in MIGRATIONS:
        built()(fn)
    return built


def applied(conn: sqlite3.Connection) -> list[str]:
    """Names of the migrations this database has, in the order they were applied."""
    if not conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table'"
                        " AND name = '_sqlite_migrations'").fetchone():
        return []
    return [row[0] for row in conn.execute(
        "SELECT name FROM _sqlite_migrations WHERE migration_set = ? ORDER BY rowid", [SET_NAME])]


def pending(conn: sqlite3.Connection) -> list[str]:
    done = set(applied(conn))
    return [name for name in names() if name not in done]
