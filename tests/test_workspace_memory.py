"""The workspace's memory stays bounded by one file, not by the folder: a snapshot of many
new large files writes its blobs as it goes, and a restore into a folder holding an unrelated
large file hashes it in pieces. Each runs in a child process that reports how much its peak
resident size grew (VmHWM) over the work."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MB = 1 << 20

CHILD = """
import json, sys
from dh_cli.worlds.local import LocalWorld
from dh_cli.workspace import snapshot
from dh_cli.workspace.restore import restore_into
from dh_cli.workspace.scan import Rules
from dh_cli.workspace.snapshot import Snapshotter

def peak_kib():  # VmHWM: this process's own peak (ru_maxrss carries the parent's over a fork)
    line = next(l for l in open("/proc/self/status") if l.startswith("VmHWM:"))
    return int(line.split()[1])

args = json.loads(sys.argv[1])
snapshot.SPILL_BYTES = args["spill"]
world = LocalWorld(args["log"])
session = world.create_session("claude", harness_session_id="mem", home="/", cwd=args["cwd"])
shot = Snapshotter(world, session.id, args["cwd"], Rules(max_size=1 << 40))
before = peak_kib()
taken = shot.take("start")
if args.get("target"):
    restore_into(world, taken, args["target"])
grown = peak_kib() - before
stored = world.conn.execute("SELECT COUNT(*), SUM(size) FROM ws_objects WHERE kind = 'blob'").fetchone()
print(json.dumps({"grown_kib": grown, "blobs": stored[0], "bytes": stored[1], "files": taken.files}))
"""


def _run(tmp_path: Path, **args) -> dict:
    out = subprocess.run([sys.executable, "-c", CHILD, json.dumps({"log": str(tmp_path / "dh.db"), **args})],
                         cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT), "DH_HOME": str(tmp_path)},
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def test_a_first_snapshot_of_many_large_new_files_holds_about_one_spill_of_them(tmp_path):
    cwd = tmp_path / "work"
    cwd.mkdir()
    for n in range(16):  # 128 MB that does not compress
        (cwd / f"data{n}.bin").write_bytes(os.urandom(8 * MB))
    got = _run(tmp_path, cwd=str(cwd), spill=8 * MB)
    assert (got["files"], got["blobs"], got["bytes"]) == (16, 16, 128 * MB)  # every one stored
    # a spill, a file, its deflate and SQLite's cache (50 MB seen, 24 files as 16), not 128 MB
    assert got["grown_kib"] < 80 * 1024, got


def test_a_restore_hashes_an_unrelated_large_file_in_pieces(tmp_path):
    cwd, target = tmp_path / "work", tmp_path / "target"
    cwd.mkdir()
    target.mkdir()
    (cwd / "notes.txt").write_text("kept\n")
    with open(target / "unrelated.bin", "wb") as handle:  # sparse: 512 MB read, none written
        handle.truncate(512 * MB)
    got = _run(tmp_path, cwd=str(cwd), spill=64 * MB, target=str(target))
    assert (target / "notes.txt").read_text() == "kept\n"
    assert got["grown_kib"] < 64 * 1024, got  # not the 512 MB of the file
