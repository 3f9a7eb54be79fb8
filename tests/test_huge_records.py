"""A record far larger than the rest (a 48 MB tool result) costs about itself in memory, not
a multiple of every such record: each operation runs in a child process that reports how
much its peak resident size grew (tests/helpers/huge_records.py) and checks its output."""

from __future__ import annotations

import json

from tests.helpers.huge_records import grown_mb, imported, write_huge_transcript

LINE_MB = 48

OPEN = """
from pathlib import Path
from dh_cli.worlds.local import LocalWorld
world = LocalWorld()
session = world.get_session(sys.argv[1])
"""


def _home_and_id(tmp_path, compressible=3, incompressible=1):
    home = tmp_path / "claude"
    path = write_huge_transcript(home, LINE_MB, compressible, incompressible)
    return path, imported(tmp_path, home)


REBUILD = "import sys" + OPEN + "from dh_cli.resume.rebuild import rebuild_session"


def test_a_rebuild_holds_one_huge_record_at_a_time_and_is_byte_exact(tmp_path):
    path, session_id = _home_and_id(tmp_path)
    out = tmp_path / "rebuilt"
    work = "print(rebuild_session(world, session, Path(sys.argv[2]))[0].status)"
    written = grown_mb(tmp_path, REBUILD, work, session_id, str(out))
    assert (out / path.relative_to(tmp_path / "claude")).read_bytes() == path.read_bytes()
    unchanged = grown_mb(tmp_path, REBUILD, work, session_id, str(out))  # compared, not written
    assert (written[1], unchanged[1]) == ("written\n", "unchanged\n")
    # 4 records of 48 MB: one record, as SQLite hands it and as Python holds it (100 MB
    # seen), where every record of a batch was decoded at once (244 MB; 580 MB to compare)
    assert written[0] < 3 * LINE_MB and unchanged[0] < 3 * LINE_MB, (written, unchanged)


CLI = "import sys\nfrom dh_cli.cli import main\n"
RUN_CLI = "sys.argv = ['dh'] + sys.argv[1:]\ntry:\n    main()\nexcept SystemExit:\n    pass\n"


def test_show_and_export_parse_a_bounded_view_of_each_huge_record(tmp_path):
    path, session_id = _home_and_id(tmp_path)
    text = grown_mb(tmp_path, CLI, RUN_CLI, "log", "show", session_id, "--no-pager")
    as_json = grown_mb(tmp_path, CLI, RUN_CLI, "log", "show", session_id, "--json")
    md = tmp_path / "session.md"
    export = grown_mb(tmp_path, CLI, RUN_CLI, "log", "export", session_id, "--format", "md", "-o", str(md))
    # 4 records of 48 MB: about one record as stored, decoded and clipped (125 MB seen;
    # 376 MB to show and 429 MB to export when each line was parsed whole)
    assert max(text[0], as_json[0], export[0]) < 3 * LINE_MB, (text[0], as_json[0], export[0])
    # every turn shown, the huge results summed up as any other
    assert text[1].count("tool Bash [ok]") == 5 and "[turn 5]" in text[1], text[1]
    items = json.loads(as_json[1])["items"]
    results = [item["result"] for item in items if item["type"] == "tool_call"]
    assert len(results) == 5 and results[0].startswith("build step 0: compiled module"), results
    # an export shows the first MiB of each huge text, and says the rest was left out
    exported = md.read_text()
    assert exported.count("more bytes not shown: the native record has them]") == 4
    assert md.stat().st_size < 8 << 20 and "build step 2: compiled module" in exported


def test_the_native_records_stream_out_one_at_a_time_byte_exact(tmp_path):
    path, session_id = _home_and_id(tmp_path)
    exported = tmp_path / "session.jsonl"
    raw = grown_mb(tmp_path, CLI, RUN_CLI, "log", "show", session_id, "--raw", "--show-secrets")
    export = grown_mb(tmp_path, CLI, RUN_CLI, "log", "export", session_id, "--format", "jsonl",
                      "-o", str(exported), "--show-secrets")
    # one record at a time (about 100 MB seen), where the export joined them all, and
    # each record was still held while the next was read
    assert raw[0] < 3 * LINE_MB and export[0] < 3 * LINE_MB, (raw[0], export[0])
    assert raw[1].encode() == exported.read_bytes() == path.read_bytes()


IMPORT = """
from pathlib import Path
from dh_cli import wrappers
from dh_cli.mirror.importer import import_sessions
from dh_cli.worlds.local import LocalWorld
world = LocalWorld()
"""
COLUMNS = ("SELECT kind, tool_name, tool_call_id, status, turn_start, tokens_out, length(tool_input)"
           ' FROM records ORDER BY "offset"')


def test_an_import_parses_a_bounded_view_and_stores_each_line_whole(tmp_path, monkeypatch):
    monkeypatch.setenv("DH_PARSE_POOL_MB", "100000")  # parsed in the process measured
    home = tmp_path / "claude"
    path = write_huge_transcript(home, LINE_MB, 3, 1)
    work = ("report = import_sessions(world, wrappers.get('claude'), Path(sys.argv[1]), all_=True)\n"
            f"print(report.sessions[0]['id'])\nimport json\nprint(json.dumps(world.conn.execute({COLUMNS!r}).fetchall()))")
    grown, out = grown_mb(tmp_path, "import sys" + IMPORT, work, str(home))
    session_id, columns = out.splitlines()
    # 4 records of 48 MB: about 4 of them (194 MB seen: the line as read, copied out, packed
    # and bound), where each line was parsed whole and its search text joined (474 MB)
    assert grown < 6 * LINE_MB, grown
    # the huge results' calls are as any other: name, id, status; every turn opened
    rows = json.loads(columns)
    results = [row for row in rows if row[3] is not None]
    assert len(results) == 5 and {row[3] for row in results} == {"ok"}, rows
    assert sum(1 for row in rows if row[4]) == 5 and all(row[2] for row in results), rows
    out = tmp_path / "rebuilt"  # and the log holds each line's every byte
    rebuilt = grown_mb(tmp_path, REBUILD, "print(rebuild_session(world, session, Path(sys.argv[2]))[0].status)",
                       session_id, str(out))
    assert rebuilt[1] == "written\n"
    assert (out / path.relative_to(home)).read_bytes() == path.read_bytes()


LIVE = """
import json, random, sys
from pathlib import Path
from dh_cli import wrappers
from dh_cli.mirror.importer import log_session_for, native_for_path
from dh_cli.mirror.session import SessionMirror
from dh_cli.worlds.local import LocalWorld
from tests.fakes.transcripts import turn_rows
from tests.helpers.huge_records import write_huge_transcript, MB
path = write_huge_transcript(Path(sys.argv[1]), 1, 0, 0)  # one normal turn
wrapper, world = wrappers.get("claude"), LocalWorld()
native = native_for_path(wrapper, path)
mirror = SessionMirror(world, wrapper, log_session_for(world, wrapper, native))
mirror.track(native)
mirror.sync()
rows = turn_rows(random.Random(5), 500, None)
text = "build step: compiled module without warnings\\n" * (int(sys.argv[2]) * MB // 2 // 47)
rows[-1]["message"]["content"][0]["content"] = rows[-1]["toolUseResult"]["stdout"] = text
pieces = b"".join(json.dumps(row).encode() + b"\\n" for row in rows)
pieces = [pieces[at:at + 8 * MB] for at in range(0, len(pieces), 8 * MB)]
del rows, text
open("/proc/self/clear_refs", "w").write("5")  # the peak from here on
"""
APPEND = """
with open(path, "ab") as handle:
    for piece in pieces:
        handle.write(piece)
        handle.flush()
        mirror.sync()
print(world.get_session(mirror.session.id).id)
"""


def test_a_huge_line_written_in_pieces_is_mirrored_from_one_copy_of_it(tmp_path):
    home = tmp_path / "claude"
    grown, out = grown_mb(tmp_path, LIVE, APPEND, str(home), str(LINE_MB))
    # a line of 48 MB, synced as each 8 MB of it is written: the line read once and parsed
    # bounded (57 MB seen), where the read buffer and the line copied out of it were both
    # held (103 MB seen), and where it was parsed whole too (189 MB)
    assert grown < 1.75 * LINE_MB, grown
    out_dir = tmp_path / "rebuilt"
    rebuilt = grown_mb(tmp_path, REBUILD, "print(rebuild_session(world, session, Path(sys.argv[2]))[0].status)",
                       out.strip(), str(out_dir))
    native = next(home.rglob("*.jsonl"))
    assert rebuilt[1] == "written\n"
    assert (out_dir / native.relative_to(home)).read_bytes() == native.read_bytes()
