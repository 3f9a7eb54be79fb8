"""The tailer on bad input: nothing complete is lost, nothing crashes, each odd case is
flagged where `dh log show` can see it."""

import json
import os
from pathlib import Path

import pytest

from .helpers.nobody import NOBODY, as_nobody, nobody_dir  # noqa: F401 - nobody_dir is a fixture

from dh_cli.logviews.logview import build_view
from dh_cli.resume.rebuild import source_bytes

LINE = b'{"type":"message","id":"a1","parentId":null,"message":{"role":"user","content":"hi"}}\n'


def logged(world, session) -> bytes:
    (source,) = world.sources(session.id)
    return source_bytes(world, source)


def test_torn_last_line_waits_for_its_newline(tail):
    path, sync, world, session = tail
    path.write_bytes(LINE + LINE[:30])
    assert sync().pending == 30
    assert logged(world, session) == LINE
    with open(path, "ab") as f:
        f.write(LINE[30:])
    result = sync()
    assert (result.added, result.pending) == (1, 0)
    assert logged(world, session) == LINE * 2


def test_torn_line_in_the_middle_is_kept_and_flagged(tail):
    path, sync, world, session = tail
    path.write_bytes(LINE + b'{"type":"mess\n' + LINE)
    assert sync().added == 3
    assert logged(world, session) == path.read_bytes()
    flags = [r.flags for r in world.records(session.id)]
    assert flags == [None, "bad_json", None]
    assert any(i["type"] == "flagged" for i in build_view(world, session).items)


@pytest.mark.parametrize("bad,flag", [(b'{"x":"\xff\xfe"}\n', "bad_utf8"),
                                      (b'{"x":"a\x00b"}\n', "nul")])
def test_bad_bytes_are_kept_exactly(tail, bad, flag):
    path, sync, world, session = tail
    path.write_bytes(LINE + bad + LINE)
    sync()
    assert logged(world, session) == path.read_bytes()
    assert flag in [r.flags for r in world.records(session.id)][1]


def test_a_line_of_tens_of_megabytes(tail):
    path, sync, world, session = tail
    huge = b'{"type":"custom","data":"' + b"x" * (30 << 20) + b'"}\n'
    path.write_bytes(LINE + huge + LINE)
    assert sync().added == 3
    assert logged(world, session) == path.read_bytes()


def test_shrunk_file_is_a_new_generation_and_keeps_the_old(tail):
    path, sync, world, session = tail
    path.write_bytes(LINE * 3)
    sync()
    path.write_bytes(LINE)
    assert sync().rewritten
    gens = sorted({r.generation for r in world.records(session.id)})
    assert gens == [0, 1]
    assert logged(world, session) == LINE
    assert [e.type for e in world.events(session.id)] == ["source_rewritten"]
    assert build_view(world, session).sources[0]["generations"] == 2


def test_changed_prefix_is_a_rewrite(tail):
    path, sync, world, session = tail
    path.write_bytes(LINE * 2)
    sync()
    path.write_bytes(LINE.replace(b"hi", b"ho") + LINE * 2)
    assert sync().rewritten
    assert logged(world, session) == path.read_bytes()
    assert world.events(session.id)[0].details["reason"] == "prefix_changed"


def test_replaced_by_identical_bytes_is_not_a_rewrite(tail):
    path, sync, world, session = tail
    path.write_bytes(LINE * 2)
    sync()
    tmp = path.with_name("new")
    tmp.write_bytes(LINE * 2 + LINE)
    os.replace(tmp, path)  # a new inode, as after dh's own atomic rebuild
    result = sync()
    assert (result.added, result.rewritten) == (1, False)


def test_deleted_file_keeps_the_log_and_is_flagged(tail):
    path, sync, world, session = tail
    path.write_bytes(LINE * 2)
    sync()
    path.unlink()
    assert sync().missing
    assert logged(world, session) == LINE * 2
    assert world.events(session.id)[-1].type == "source_deleted"
    path.write_bytes(LINE * 3)
    assert sync().added == 1
    assert world.events(session.id)[-1].type == "source_back"


def test_empty_file_and_repeated_syncs_add_nothing(tail):
    path, sync, world, session = tail
    path.write_bytes(b"")
    assert sync().added == 0
    path.write_bytes(LINE)
    assert sync().added == 1
    assert sync().added == 0
    assert world.record_count(session.id) == 1


def test_a_directory_in_place_of_the_file(tail):
    path, sync, world, session = tail
    path.mkdir()
    assert sync().missing
    assert world.events(session.id)[-1].type == "source_unreadable"


def _sync_unreadable(folder: Path) -> int:
    """In the unprivileged child: tail a file of mode 0 (root would read it anyway)."""
    from dh_cli import wrappers
    from dh_cli.mirror.session import SessionMirror
    from dh_cli.worlds.local import LocalWorld

    os.environ["DH_HOME"] = str(folder / "dh")
    world = LocalWorld()
    session = world.create_session("pi", home=str(folder), harness_session_id="s1")
    world.add_source(session.id, "jsonl", "s.jsonl", str(folder / "s.jsonl"))
    result = SessionMirror(world, wrappers.get("pi"), session).sync()
    print(json.dumps({"missing": result.missing, "event": world.events(session.id)[-1].type,
                      "error": world.events(session.id)[-1].details.get("error")}))
    return 0


def test_unreadable_file(nobody_dir):
    path = nobody_dir / "s.jsonl"
    path.write_bytes(LINE)
    os.chown(path, NOBODY, NOBODY)
    path.chmod(0)
    code, out = as_nobody(_sync_unreadable, nobody_dir)
    assert code == 0, out
    seen = json.loads(out.strip().splitlines()[-1])
    assert seen["missing"] and seen["event"] == "source_unreadable" and seen["error"], seen


def test_the_fingerprint_of_live_syncs_is_the_one_read_from_scratch(tail):
    # live syncs read neither end again once the head is SPAN bytes (the reader hands over
    # the tail): what they log must still be the file's own ends, before and after the head
    # fills, so that a restart sees no rewrite
    from dh_cli.stores.tailer import SPAN

    path, sync, world, session = tail
    path.write_bytes(b"")
    for _ in range(3 * SPAN // len(LINE) + 2):
        with open(path, "ab") as f:
            f.write(LINE)
        assert sync().added == 1
        assert_fingerprint_is_the_files(world, session, path)
    # many lines at once (more than SPAN), then a torn one: the tail is cut from what was read
    with open(path, "ab") as f:
        f.write(LINE * (2 * SPAN // len(LINE)) + LINE[:20])
    assert sync().pending == 20
    assert_fingerprint_is_the_files(world, session, path)
    with open(path, "ab") as f:
        f.write(LINE[20:] + LINE)
    assert sync().added == 2
    assert_fingerprint_is_the_files(world, session, path)
    assert world.sources(session.id)[0].offset > 4 * SPAN
    assert logged(world, session) == path.read_bytes()


def assert_fingerprint_is_the_files(world, session, path: Path) -> None:
    from dh_cli.stores.tailer import fingerprint

    (source,) = world.sources(session.id)
    fd = os.open(path, os.O_RDONLY)
    try:
        assert (source.head_hash, source.tail_hash) == fingerprint(fd, source.offset)
    finally:
        os.close(fd)
