"""The live mirror's wake-up path (mirror/live.py): one thread sleeps on the inotify
descriptor and a wake pipe and syncs, with no watcher thread handing wake-ups over; a wake-up
sent after the mirror let go of its pipe goes nowhere. Counted, not timed."""

import os
import select
import threading

from dh_cli import wrappers
from dh_cli.mirror.live import LiveMirror, Wake
from dh_cli.worlds.local import LocalWorld
from tests.helpers.wait import wait_until

HEADER = b'{"type":"session","version":3,"id":"s1","timestamp":"2026-12-01T09:00:00.000Z","cwd":"/"}\n'


def _line(n: int) -> bytes:
    return (b'{"type":"custom","customType":"load","id":"%08x","parentId":null,'
            b'"timestamp":"2026-12-01T09:00:00.000Z","data":{"n":%d}}\n' % (n + 2, n))


def test_a_wake_is_seen_by_select_and_drained():
    wake = Wake()
    wake.set()
    wake.set()
    assert select.select([wake.read_fd], [], [], 5)[0] == [wake.read_fd]
    wake.drain()
    assert select.select([wake.read_fd], [], [], 0)[0] == []
    wake.close()


def test_a_wake_after_close_writes_to_no_other_file(tmp_path):
    wake = Wake()
    wake.close()
    reused = os.open(tmp_path / "other", os.O_RDWR | os.O_CREAT)  # may take the pipe's number
    try:
        wake.set()
        assert os.path.getsize(tmp_path / "other") == 0
    finally:
        os.close(reused)


def test_one_thread_mirrors_appends_and_stops(tmp_path):
    native = tmp_path / "sessions" / "s.jsonl"
    native.parent.mkdir()
    native.write_bytes(HEADER)
    world = LocalWorld(tmp_path / "dh.db")
    session = world.create_session("pi", harness_session_id="s1", home=str(tmp_path),
                                   native_path=str(native), cwd="/")
    before = {t.ident for t in threading.enumerate()}
    live = LiveMirror(world.path, wrappers.get("pi"), session.id, native.parent,
                      notice=lambda text: None).start()
    try:
        started = [t.name for t in threading.enumerate() if t.ident not in before]
        assert sorted(started) == ["dh-checkpoint", "dh-mirror"]  # no watcher thread
        with open(native, "ab", buffering=0) as handle:
            for n in range(50):
                handle.write(_line(n))
        wait_until(lambda: world.record_count(session.id) == 51, "51 records logged",
                   explain=lambda: f"(logged: {world.record_count(session.id)})")
    finally:
        live.stop()
    assert live.done.is_set() and live.error is None
    assert live.wake.closed
    live.wake.set()  # the supervisor's output pump may still call it: harmless
    world.close()


WARM_PROBE = """
import sys, time
from pathlib import Path
from dh_cli import wrappers
from dh_cli.mirror.live import LiveMirror
from dh_cli.worlds.local import LocalWorld

tmp = Path(sys.argv[1])
world = LocalWorld(tmp / "dh.db")
session = world.create_session("opencode", home=str(tmp / "opencode"), cwd=str(tmp))
live = LiveMirror(world.path, wrappers.get("opencode"), session.id, tmp / "opencode",
                  notice=lambda text: None).start()
deadline = time.monotonic() + 20
while "dh_cli.stores.opencode_tail" not in sys.modules and time.monotonic() < deadline:
    time.sleep(0.02)
live.stop()
print("warm" if "dh_cli.stores.opencode_tail" in sys.modules else "cold")
"""


def test_the_store_is_imported_before_the_harness_writes(tmp_path):
    """The live mirror imports its store's tailer while the harness starts, not when the
    session first appears: that import had delayed OpenCode's first rows 27-114 ms (stores/
    __init__.warm). Here no database ever appears, so only the warm-up can import it."""
    import subprocess
    import sys

    (tmp_path / "opencode").mkdir()
    probe = subprocess.run([sys.executable, "-c", WARM_PROBE, str(tmp_path)],
                           capture_output=True, text=True, timeout=120)
    assert probe.returncode == 0, probe.stderr
    assert probe.stdout.strip() == "warm"
