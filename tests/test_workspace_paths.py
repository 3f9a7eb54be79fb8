"""A restore writes only under its target, whatever the log's tree rows say: crafted rows (a
`..` name, a name with a slash, an absolute path, a backslash, a symlink written by the
snapshot itself then used as a folder, a symlinked folder already in the target) are refused
through confine.py's rules with one `Error:` line, and nothing is written outside."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from dh_cli.errors import NativeStateError
from dh_cli.workspace.objects import BLOB, LINK, TreeEntry, blob_hash
from dh_cli.workspace.store import store_for

from .helpers.crafted_snapshots import crafted, file, session, written_files  # noqa: F401  (session: a fixture)


def refused(_run_dh, *args) -> str:
    """`dh ARGS` in a real process: exit 4 (native state refused), one `Error:` line."""
    result = subprocess.run([sys.executable, "-m", "dh_cli", *args], capture_output=True,
                            text=True, timeout=120, stdin=subprocess.DEVNULL)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == NativeStateError.exit_code, (result.returncode, result.stderr)
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.stderr
    assert "Traceback" not in result.stderr + result.stdout
    return lines[0]


CASES = {
    "dotdot name": ([file("..")], {}),
    "slash in a name": ([file("../../escape.txt")], {}),
    "absolute name": ([file("/tmp/escape.txt")], {}),
    "dotdot folder": ([], {"..": [file("escape.txt")]}),
    "backslash": ([file("..\\escape.txt")], {}),
    "dot name": ([file(".")], {}),
    "empty name": ([file("")], {}),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_crafted_tree_rows_are_refused_with_one_error_line(case, session, run_dh, tmp_path):
    world, sid = session
    crafted(world, sid, *CASES[case])
    target = tmp_path / "box" / "target"
    line = refused(run_dh, "workspace", "restore", sid, "--to", str(target))
    assert "refusing" in line
    assert written_files(tmp_path / "box") == []  # nothing written, inside or out
    refused(run_dh, "workspace", "diff", sid)  # reading the tree is refused the same way


def test_a_symlinked_folder_in_the_target_is_never_written_through(session, run_dh, tmp_path):
    world, sid = session
    crafted(world, sid, [file("top.txt")], {"d": [file("f.txt")]})
    target, outside = tmp_path / "target", tmp_path / "outside"
    target.mkdir()
    outside.mkdir()
    os.symlink(outside, target / "d")
    line = refused(run_dh, "workspace", "restore", sid, "--to", str(target))
    assert "symlink" in line and os.listdir(outside) == []
    assert not (target / "top.txt").exists()  # refused before anything was written


def test_a_symlink_the_snapshot_itself_writes_is_not_a_way_out(session, run_dh, tmp_path):
    """The tree holds a link `d` -> outside and a folder `d` with a file: the link is restored
    as a link, the file is never written through it."""
    world, sid = session
    outside = tmp_path / "outside"
    outside.mkdir()
    link_target = os.fsencode(str(outside))
    link = TreeEntry("d", LINK, 0o777, blob_hash(link_target), len(link_target))
    store_for(world).put([(blob_hash(link_target), BLOB, len(link_target), 0, link_target)], [])
    crafted(world, sid, [link], {"d": [file("f.txt")]})
    target = tmp_path / "target"
    line = refused(run_dh, "workspace", "restore", sid, "--to", str(target))
    assert "symlink" in line and os.listdir(outside) == []


def test_the_resume_path_refuses_the_same_rows(session, tmp_path):
    """`dh resume`'s workspace step (and a worker's) calls restore_workspace: same rules."""
    from dh_cli.workspace import restore_workspace
    from dh_cli.workspace.restore import UnsafePath

    world, sid = session
    crafted(world, sid, [], {"..": [file("escape.txt")]})
    with pytest.raises(UnsafePath):
        restore_workspace(world, sid, str(tmp_path / "box" / "cwd"))
    assert not (tmp_path / "box" / "escape.txt").exists() and not (tmp_path / "escape.txt").exists()
