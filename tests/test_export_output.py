"""Issue 14, finding 6: `dh log export -o` writes only regular files. A character device, a
FIFO, a symlink or a folder at the path is refused with one `Error:` line and left as it
was; no temporary file is left; a missing folder is created (0700) and said so. (The device
is made with mknod in a temp folder: never point a test at the real /dev/null.)"""

from __future__ import annotations

import os
import stat

import pytest

from dh_cli.worlds.local import LocalWorld

from .conftest import fixture_home
from .helpers.cli import one_error
from .rig import dh


@pytest.fixture
def session(tmp_path):
    home = fixture_home("pi", "basic", tmp_path)
    assert dh("import", "pi", "--all", "--home", str(home)).returncode == 0
    return LocalWorld().sessions()[0].id


def leftovers(folder):
    return [p.name for p in folder.iterdir() if ".dh-tmp-" in p.name]


def test_a_character_device_is_refused_and_kept(tmp_path, session):
    device = tmp_path / "null"
    try:
        os.mknod(device, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    except PermissionError:
        pytest.skip("mknod needs root")
    one_error(dh("log", "export", session, "-o", str(device)), 1, "it is a character device")
    assert stat.S_ISCHR(os.lstat(device).st_mode) and leftovers(tmp_path) == []


def test_a_fifo_a_symlink_and_a_folder_are_refused(tmp_path, session):
    fifo, target, link, folder = (tmp_path / n for n in ("fifo", "target.md", "link.md", "folder"))
    os.mkfifo(fifo)
    target.write_text("mine\n")
    link.symlink_to(target)
    folder.mkdir()
    for path, what in ((fifo, "a FIFO"), (link, "a symlink"), (folder, "a folder")):
        one_error(dh("log", "export", session, "-o", str(path)), 1, f"it is {what}")
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode) and target.read_text() == "mine\n"
    assert link.is_symlink() and list(folder.iterdir()) == [] and leftovers(tmp_path) == []


def test_a_regular_file_is_replaced_and_a_missing_folder_is_said(tmp_path, session):
    existing = tmp_path / "s.md"
    existing.write_text("old\n")
    done = dh("log", "export", session, "-o", str(existing))
    assert done.returncode == 0 and existing.read_text() != "old\n"
    deep = tmp_path / "new" / "s.html"
    made = dh("log", "export", session, "--format", "html", "-o", str(deep))
    assert made.returncode == 0 and deep.is_file()
    assert f"dh: created folder {deep.parent} (0700)" in made.stderr
    assert stat.S_IMODE(deep.parent.stat().st_mode) == 0o700 and leftovers(tmp_path) == []


def test_a_file_in_place_of_the_folder_is_one_error(tmp_path, session):
    (tmp_path / "plain").write_text("x")
    one_error(dh("log", "export", session, "-o", str(tmp_path / "plain" / "s.md")), 1, "not a folder")
