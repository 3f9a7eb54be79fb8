"""The local places and the workspace (m013-m037): where a session lives on this machine, the
workspace snapshots, one token vocabulary, records kept as text and the views again.
Shipped migrations: never edited (migrations.py holds their one ordered list)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .migrations_first import _utf8_text

if TYPE_CHECKING:
    from sqlite_utils import Database


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


def m025_workspace_objects(db: Database) -> None:
    # Workspace snapshots (dh_cli/workspace/): content-addressed blobs and per-folder trees,
    # named by their sha256, so a file shared by a hundred snapshots is stored once.
    db.execute("CREATE TABLE ws_objects (hash TEXT PRIMARY KEY, kind TEXT NOT NULL,"
               " size INTEGER NOT NULL, codec INTEGER NOT NULL, data BLOB NOT NULL) WITHOUT ROWID")


def m026_workspace_snapshots(db: Database) -> None:
    # One row per snapshot of a session's cwd: after a tool call that may write, at a turn's
    # end. `root` names the top tree in ws_objects; seq orders a session's snapshots.
    db.execute("CREATE TABLE ws_snapshots (session_id TEXT NOT NULL REFERENCES sessions (id),"
               " seq INTEGER NOT NULL, at TEXT NOT NULL, turn INTEGER, step TEXT,"
               " reason TEXT NOT NULL, root TEXT NOT NULL, head TEXT, branch TEXT,"
               " files INTEGER, bytes INTEGER, skipped INTEGER, PRIMARY KEY (session_id, seq))")



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
