"""The WAL stays bounded under steady writes (worlds/checkpoint.py), and the checkpoint thread
sleeps while the WAL is small. Sizes are counted, not timed: the writes are made in a loop
and the thread is waited for, so the machine's speed decides nothing."""

import os
import sqlite3
import time

import pytest

from dh_cli.errors import ConfigError
from dh_cli.worlds.checkpoint import SOFT, Checkpointer, wal_limit
from dh_cli.worlds.local import RECORD_COLUMNS, LocalWorld


def _world_with_source(tmp_path):
    world = LocalWorld(tmp_path / "dh.db")
    session = world.create_session("pi", harness_session_id="s", home=str(tmp_path), cwd="/")
    return world, world.add_source(session.id, "jsonl", "s.jsonl", str(tmp_path / "s.jsonl"))


def _commit_lines(world, source, count, start=0):
    for n in range(start, start + count):
        line = b'{"n":%d,"pad":"%s"}\n' % (n, b"x" * 300)
        source.offset += len(line)
        row = (source.id, 0, source.offset, line, None)
        world.commit(source, [row + (None,) * (len(RECORD_COLUMNS) - len(row))])


def _wait_idle(checkpointer, before, seconds=30.0):
    """Until the thread has run at least one more checkpoint (generous: a loaded machine)."""
    deadline = time.monotonic() + seconds
    while checkpointer.checkpoints <= before and time.monotonic() < deadline:
        time.sleep(0.01)


def test_a_small_wal_never_wakes_the_checkpoint_thread(tmp_path):
    world, source = _world_with_source(tmp_path)
    checkpointer = Checkpointer(world.path).start()
    world.checkpoint_elsewhere(checkpointer)
    _commit_lines(world, source, 20)  # a few pages per commit: far below SOFT
    assert os.path.getsize(f"{world.path}-wal") < SOFT
    assert not checkpointer.wanted.is_set() and checkpointer.checkpoints == 0
    checkpointer.stop()
    world.close()


def test_the_wal_is_cut_back_under_steady_writes(tmp_path, monkeypatch):
    monkeypatch.setenv("DH_WAL_LIMIT_MB", "8")
    world, source = _world_with_source(tmp_path)
    checkpointer = Checkpointer(world.path).start()
    world.checkpoint_elsewhere(checkpointer)
    reader = sqlite3.connect(world.path)  # another process's reader, as `dh log` would be
    biggest = 0
    for round_ in range(12):  # ~2 MB of WAL per round without checkpoints: 24 MB in all
        before = checkpointer.checkpoints
        _commit_lines(world, source, 40, start=round_ * 40)
        reader.execute("SELECT COUNT(*) FROM records").fetchone()
        size = os.path.getsize(f"{world.path}-wal")
        biggest = max(biggest, size)
        if size > SOFT:  # the thread was woken: let it work, as it would between commits
            _wait_idle(checkpointer, before)
    assert checkpointer.checkpoints > 0
    assert biggest <= 8 << 20
    assert world.record_count(source.session_id) == 480  # nothing lost on the way
    checkpointer.stop()
    reader.close()
    world.close()


def test_writers_past_the_limit_wait_for_the_wal_to_be_cut_back(tmp_path, monkeypatch):
    """The back-pressure alone (the checkpoint thread is not even started): a writer whose
    commit left the WAL past the limit empties it before it writes on."""
    monkeypatch.setenv("DH_WAL_LIMIT_MB", "8")
    world, source = _world_with_source(tmp_path)
    checkpointer = Checkpointer(world.path)
    world.checkpoint_elsewhere(checkpointer)
    reader = sqlite3.connect(world.path)
    biggest = 0
    for round_ in range(30):  # ~2 MB of WAL per round: 60 MB without the back-pressure
        _commit_lines(world, source, 40, start=round_ * 40)
        reader.execute("SELECT COUNT(*) FROM records").fetchone()
        biggest = max(biggest, os.path.getsize(f"{world.path}-wal"))
    assert checkpointer.held > 0 and checkpointer.truncations > 0
    assert biggest <= (8 << 20) + (1 << 20)  # the limit, plus what one commit adds past it
    assert world.record_count(source.session_id) == 1200
    checkpointer.stop()
    reader.close()
    world.close()


def test_a_bad_wal_limit_is_one_config_error(monkeypatch):
    monkeypatch.setenv("DH_WAL_LIMIT_MB", "lots")
    with pytest.raises(ConfigError, match="DH_WAL_LIMIT_MB"):
        wal_limit()
    monkeypatch.setenv("DH_WAL_LIMIT_MB", "2")
    with pytest.raises(ConfigError, match="at least 8"):
        wal_limit()


def test_the_one_writer_folds_the_wal_in_between_its_commits(tmp_path):
    """The shared mirror's way (fold_here): the thread stays asleep below a quarter of the
    limit, and the writer's own PASSIVE checkpoints between transactions keep the WAL near
    SOFT, because the commit after a full fold restarts the WAL and cuts the file back."""
    world, source = _world_with_source(tmp_path)
    checkpointer = Checkpointer(world.path).start()
    checkpointer.folds_in_writer()
    world.checkpoint_elsewhere(checkpointer)
    wal, folds, biggest = f"{world.path}-wal", 0, 0
    for round_ in range(60):  # ~0.5 MB of WAL a round: 30 MB without a fold
        _commit_lines(world, source, 10, start=round_ * 10)
        biggest = max(biggest, os.path.getsize(wal))
        folds += checkpointer.fold_here(world.conn)
    assert folds >= 2, "the WAL passed SOFT more than once"
    assert biggest < 2 * SOFT, biggest
    assert checkpointer.truncations == 0 and not checkpointer.wanted.is_set()
    checkpointer.stop()
    world.close()
