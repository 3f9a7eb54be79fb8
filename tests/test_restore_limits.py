"""A restore writes plain files only, and nothing a world sends expands without bound (issue
30): no setuid, setgid or sticky bit survives; a symlink restored stays in the target; every
workspace object's bytes must match its hash when read and when pulled (a mismatch never
enters the local store); a tree's listed sizes must match the bytes; a tree that holds itself,
or that lists more entries than a snapshot may, is refused; and one object, one record and one
restore are capped."""

from __future__ import annotations

import os
import stat
import zlib

import lz4.block
import pytest

from dh_cli.errors import LogDbError, NativeStateError
from dh_cli.workspace.objects import (BLOB, DEFLATE, DIR, FILE, LINK, TREE, BadObject, TreeEntry,
                                      blob_hash, decode, tree_bytes, tree_hash)
from dh_cli.workspace.restore import flat_tree, pick, restore_into
from dh_cli.workspace.store import Snapshot, store_for
from dh_cli.workspace.sync import copy_workspace
from dh_cli.worlds.local import LocalWorld
from dh_cli.worlds.rows import LZ4, decode_raw

from .helpers.crafted_snapshots import PAYLOAD, crafted, file, session, written_files  # noqa: F401


def restored(world, sid, target, **kw):
    return restore_into(world, pick(world, sid), str(target), **kw)


def test_setuid_setgid_and_sticky_bits_are_never_restored(session, tmp_path):
    world, sid = session
    crafted(world, sid, [TreeEntry("tool", FILE, 0o7755, blob_hash(PAYLOAD), len(PAYLOAD))])
    restored(world, sid, tmp_path / "t")
    assert stat.S_IMODE(os.stat(tmp_path / "t" / "tool").st_mode) == 0o755


@pytest.mark.parametrize("text", [b"/etc/passwd", b"../outside", b"sub/../../x", b"a/../.."])
def test_a_symlink_that_leaves_the_target_is_refused(session, tmp_path, text):
    world, sid = session
    store_for(world).put([(blob_hash(text), BLOB, len(text), 0, text)], [])
    crafted(world, sid, [file("a.txt"), TreeEntry("link", LINK, 0o777, blob_hash(text), len(text))])
    with pytest.raises(NativeStateError, match="symlink"):
        restored(world, sid, tmp_path / "box" / "t")
    assert written_files(tmp_path / "box") == []  # refused before anything was written


def test_a_symlink_inside_the_target_is_restored(session, tmp_path):
    world, sid = session
    text = b"a.txt"
    store_for(world).put([(blob_hash(text), BLOB, len(text), 0, text)], [])
    crafted(world, sid, [file("a.txt"), TreeEntry("link", LINK, 0o777, blob_hash(text), len(text))])
    restored(world, sid, tmp_path / "t")
    assert os.readlink(tmp_path / "t" / "link") == "a.txt"


def test_an_object_whose_bytes_are_not_its_hash_is_refused_when_read(session, tmp_path):
    """An object stored under the hash of an empty file, holding other bytes."""
    world, sid = session
    empty = blob_hash(b"")
    store_for(world).put([(empty, BLOB, 9, 0, b"rm -rf ~\n")], [])
    crafted(world, sid, [TreeEntry("empty.txt", FILE, 0o644, empty, 0)])
    with pytest.raises(NativeStateError, match="does not match its hash"):
        restored(world, sid, tmp_path / "t")
    assert not (tmp_path / "t" / "empty.txt").exists()


def test_an_object_whose_bytes_are_not_its_hash_never_enters_the_local_store(tmp_path):
    remote = LocalWorld(tmp_path / "remote" / "dh.db")
    sid = remote.create_session("pi", cwd="/nowhere", state="exited").id
    empty = blob_hash(b"")
    store_for(remote).put([(empty, BLOB, 9, 0, b"rm -rf ~\n")], [])
    crafted(remote, sid, [TreeEntry("empty.txt", FILE, 0o644, empty, 0)])
    local = LocalWorld()
    local.put_session(remote.get_session(sid))
    with pytest.raises(NativeStateError, match="does not match its hash"):
        copy_workspace(remote, local, sid)
    assert local.conn.execute("SELECT count(*) FROM ws_objects").fetchone()[0] == 0
    assert store_for(local).snapshots(sid) == []


def test_a_listed_size_that_is_not_the_content_s_is_refused(session, tmp_path):
    world, sid = session
    crafted(world, sid, [TreeEntry("a.txt", FILE, 0o644, blob_hash(PAYLOAD), 1)])
    with pytest.raises(NativeStateError, match="lists 1 bytes"):
        restored(world, sid, tmp_path / "t")


def test_a_tree_that_names_itself_is_refused(session):
    """Stored under a name of its own choosing (its hash cannot be its own child's): refused
    at once instead of listed forever."""
    world, sid = session
    name = "ab" * 32
    data = tree_bytes([TreeEntry("loop", DIR, 0o755, name, 0)])
    store = store_for(world)
    store.put([(name, TREE, len(data), 0, data)],
              [Snapshot(sid, 1, "2026-12-01T00:00:00Z", 1, None, "tool", name)])
    with pytest.raises(NativeStateError):
        flat_tree(world, name)


def test_a_subtree_named_many_times_expands_no_further_than_a_snapshot_lists(session):
    world, sid = session
    leaf = tree_bytes([file(f"f{i}") for i in range(10)])
    objects = [(blob_hash(PAYLOAD), BLOB, len(PAYLOAD), 0, PAYLOAD), (tree_hash(leaf), TREE, len(leaf), 0, leaf)]
    level = tree_hash(leaf)
    for depth in range(4):  # each level names the one below ten times: 10^5 files
        data = tree_bytes([TreeEntry(f"d{i}", DIR, 0o755, level, 0) for i in range(10)])
        objects.append((tree_hash(data), TREE, len(data), 0, data))
        level = tree_hash(data)
    store_for(world).put(objects, [])
    with pytest.raises(NativeStateError, match="lists more than 1000 entries"):
        flat_tree(world, level, max_files=1000)


def test_an_object_is_refused_once_it_inflates_past_the_cap():
    bomb = zlib.compress(b"\0" * (4 << 20), 9)  # 4 KiB that inflate to 4 MiB
    assert len(bomb) < 8192
    with pytest.raises(BadObject, match="more than"):
        decode(bomb, DEFLATE, cap=1 << 20)


def test_one_restore_writes_no_more_than_its_cap(session, tmp_path):
    world, sid = session
    crafted(world, sid, [file("a.txt"), file("b.txt")])
    with pytest.raises(NativeStateError, match="max_restore_size"):
        restored(world, sid, tmp_path / "box" / "t", max_bytes=len(PAYLOAD))
    assert written_files(tmp_path / "box") == []


def test_an_lz4_record_is_refused_on_the_size_it_declares(monkeypatch):
    """A 1 GiB declared size in a few bytes: refused before anything is expanded."""
    block = (1 << 30).to_bytes(4, "little") + lz4.block.compress(b"x" * 100, store_size=False)
    with pytest.raises(LogDbError, match="more than the 256 MB"):
        decode_raw(block, LZ4)
    monkeypatch.setenv("DH_MAX_RECORD_MB", "1")
    small = lz4.block.compress(b"y" * (2 << 20))
    with pytest.raises(LogDbError, match="more than the 1 MB"):
        decode_raw(small, LZ4)
    assert decode_raw(lz4.block.compress(b"z" * 1000), LZ4) == b"z" * 1000
