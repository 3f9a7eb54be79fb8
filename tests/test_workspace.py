"""Workspace snapshots: content addressing, git rules, secrets and large files, restore,
diff, and push/pull through a real PostgreSQL world."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from dh_cli.worlds.local import LocalWorld
from dh_cli.workspace import copy_workspace, restore_workspace
from dh_cli.workspace.restore import UnsafePath, checked_path, diff, flat_dir, flat_tree, pick, restore_into
from dh_cli.workspace.scan import Rules
from dh_cli.workspace.snapshot import Snapshotter

from .pg import pg_url  # noqa: F401  (fixture)

SECRET = b"AKIA-very-secret-value-4242"
BIG = b"L" * 3000 + b"large-file-marker-9191"


def git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(cwd), "-c", "user.name=t", "-c", "user.email=t@t", *args],
                   check=True, capture_output=True)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    cwd = tmp_path / "repo"
    (cwd / "src").mkdir(parents=True)
    (cwd / "src" / "app.py").write_text("print('hi')\n")
    (cwd / "README").write_text("readme\n")
    (cwd / ".gitignore").write_text("build/\n*.log\n")
    (cwd / "build").mkdir()
    (cwd / "build" / "out.bin").write_bytes(b"ignored")
    (cwd / "debug.log").write_text("ignored too")
    (cwd / ".env").write_bytes(SECRET)
    (cwd / "id_rsa").write_bytes(SECRET)
    (cwd / "big.dat").write_bytes(BIG)
    os.symlink("README", cwd / "link")
    git(cwd, "init", "-q", "-b", "main")
    git(cwd, "add", "src", "README", ".gitignore")
    git(cwd, "commit", "-qm", "one")
    return cwd


@pytest.fixture
def world(tmp_path: Path):
    w = LocalWorld(tmp_path / "dh.db")
    yield w
    w.close()


def snapper(world, cwd: Path) -> tuple[Snapshotter, str]:
    session = world.create_session("claude-code", cwd=str(cwd), state="running")
    return Snapshotter(world, session.id, str(cwd), Rules(max_size=2048)), session.id


def test_snapshot_lists_git_files_and_keeps_secrets_and_large_files_out(world, repo):
    snap, sid = snapper(world, repo)
    taken = snap.take("tool", 1, "call-1")
    files = flat_tree(world, taken.root)
    assert sorted(files) == [".env", ".gitignore", "README", "big.dat", "id_rsa", "link", "src/app.py"]
    assert files[".env"].note == files["id_rsa"].note == "secret" and files[".env"].hash is None
    assert files["big.dat"].note == "large" and files["big.dat"].size == len(BIG)
    assert files["link"].kind == "l"
    assert taken.branch == "main" and len(taken.head) == 40 and taken.skipped == 3
    head = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True)
    assert taken.head == head.stdout.strip()
    blobs = [bytes(r[0]) for r in world.conn.execute("SELECT data FROM ws_objects")]
    assert b"readme\n" in blobs and b"print('hi')\n" in blobs  # small files stay uncompressed
    assert not any(SECRET in b or b"large-file-marker" in b or b"ignored" in b for b in blobs)
    log = b"".join(p.read_bytes() for p in world.path.parent.glob("dh.db*"))
    assert SECRET not in log and b"large-file-marker" not in log


def age(cwd: Path, seconds: float = 10) -> None:
    """Files written this instant are read again by the next snapshot (their mtime tick may
    not be over yet): make them older, as a checkout's files are."""
    then = time.time() - seconds
    for path in cwd.rglob("*"):
        if path.is_file() and not path.is_symlink() and ".git" not in path.parts:
            os.utime(path, (then, then))


def test_unchanged_files_are_not_read_and_blobs_are_stored_once(world, repo, monkeypatch):
    age(repo)
    snap, sid = snapper(world, repo)
    first = snap.take("tool", 1, "a")
    assert snap.take("tool", 1, "b") is None  # nothing changed: no new snapshot
    read = []
    import dh_cli.workspace.snapshot as module

    real = module._read_file
    monkeypatch.setattr(module, "_read_file", lambda p: read.append(p) or real(p))
    (repo / "src" / "app.py").write_text("print('changed')\n")
    (repo / "src" / "copy.py").write_text("readme\n")  # same content as README
    second = snap.take("tool", 1, "c")
    assert sorted(Path(p).name for p in read) == ["app.py", "copy.py"]
    read.clear()
    time.sleep(module.RACY_NS / 1e9 + 0.05)
    assert snap.take("tool", 1, "d", always=True).root == second.root
    assert sorted(Path(p).name for p in read) == ["app.py", "copy.py"]  # racy last time: read again
    read.clear()
    snap.take("tool", 1, "e", always=True)
    assert read == []  # now settled: nothing is read
    assert second.seq == first.seq + 1 and second.root != first.root
    count = world.conn.execute("SELECT count(*) FROM ws_objects WHERE kind = 'blob'").fetchone()[0]
    assert count == 5  # .gitignore, README(=copy.py), link target, app.py twice
    assert flat_tree(world, first.root)["src/app.py"].hash != flat_tree(world, second.root)["src/app.py"].hash


def test_a_file_written_while_it_is_read_is_read_again_once_it_holds_still(world, tmp_path, monkeypatch):
    """A command still writing a file when the snapshot reads it (`yes | head -c 11MB >
    big.dat`): what that read got is no state of the file, and its head must not be stored
    when the file ends past the size limit. Read again once it holds still, the file is over
    the limit and listed without content; one that never holds still is stored as last read."""
    import dh_cli.workspace.snapshot as module

    cwd = tmp_path / "plain"
    cwd.mkdir()
    (cwd / "big.dat").write_bytes(b"Q\n" * 512)  # 1 KiB so far: under the 2 KiB limit
    (cwd / "log.txt").write_bytes(b"line\n")
    real, reads = module._read_file, []

    def read_while_written(path):
        reads.append(Path(path).name)
        if path.endswith("big.dat") or path.endswith("log.txt"):
            with open(path, "ab") as f:  # the command writes on after the listing's lstat
                f.write(b"Q\n" * 2048 if path.endswith("big.dat") else b"more\n")
        return real(path)

    monkeypatch.setattr(module, "_read_file", read_while_written)
    snap, _ = snapper(world, cwd)
    taken = snap.take("tool", 1, "call-1")
    files = flat_tree(world, taken.root)
    assert files["big.dat"].note == "large" and files["big.dat"].hash is None
    assert reads.count("big.dat") == 1 and reads.count("log.txt") == module.SETTLE_TRIES
    blobs = [bytes(r[0]) for r in world.conn.execute("SELECT data FROM ws_objects WHERE kind = 'blob'")]
    assert not any(b"Q\nQ\n" in b for b in blobs), "the head read mid-write was stored"
    # never still: stored as last read, listed with the size of what was stored (a restore
    # refuses a file whose bytes differ from its listed size)
    assert files["log.txt"].hash is not None
    assert files["log.txt"].size == (cwd / "log.txt").stat().st_size
    target = tmp_path / "restored"
    restore_into(world, taken, str(target))
    assert (target / "log.txt").read_bytes() == b"line\n" + b"more\n" * module.SETTLE_TRIES


def test_files_dh_holds_open_are_never_opened_by_a_snapshot(world, tmp_path):
    """The log's own SQLite files inside the cwd (DH_HOME under the project): opening and
    closing one drops the process's POSIX locks on it, SQLite's included, so neither a
    snapshot nor the folder compare may list them; the other files are listed."""
    (tmp_path / "notes.txt").write_text("mine\n")
    snap, _ = snapper(world, tmp_path)
    files = flat_tree(world, snap.take("tool", 1, "call-1").root)
    held = {p for p in files if p.startswith("dh.db")}
    assert "notes.txt" in files and held == set(), sorted(files)
    assert not {p for p in flat_dir(str(tmp_path), Rules()) if p.startswith("dh.db")}
    assert (tmp_path / "dh.db").exists()  # the log is there, and open (the control)


def test_plain_folder_is_walked_without_git(world, tmp_path):
    cwd = tmp_path / "plain"
    (cwd / "a" / ".git").mkdir(parents=True)
    (cwd / "a" / ".git" / "config").write_text("x")
    (cwd / "a" / "f.txt").write_text("f")
    (cwd / "server.pem").write_bytes(SECRET)
    snap, _ = snapper(world, cwd)
    taken = snap.take("turn_end", 1)
    files = flat_tree(world, taken.root)
    assert sorted(files) == ["a/f.txt", "server.pem"] and files["server.pem"].note == "secret"
    assert taken.head is None


def test_restore_writes_byte_for_byte_and_only_under_the_target(world, repo, tmp_path):
    snap, sid = snapper(world, repo)
    (repo / "src" / "bin.dat").write_bytes(bytes(range(256)) * 4)
    os.chmod(repo / "src" / "app.py", 0o755)
    snap.take("tool", 1, "call-x")
    target = tmp_path / "elsewhere" / "new"
    outcome = restore_workspace(world, sid, str(target))
    assert outcome.action == "restored"
    assert (target / "src" / "bin.dat").read_bytes() == bytes(range(256)) * 4
    assert os.stat(target / "src" / "app.py").st_mode & 0o777 == 0o755
    assert os.readlink(target / "link") == "README"
    assert not (target / ".env").exists() and not (target / "big.dat").exists()
    assert {p for p, _ in outcome.restored.not_stored} == {".env", "id_rsa", "big.dat"}


def test_restore_into_a_differing_folder_keeps_or_restores(world, repo, tmp_path):
    snap, sid = snapper(world, repo)
    snap.take("tool", 1, "s1")
    (repo / "README").write_text("edited by hand\n")
    told = []
    kept = restore_workspace(world, sid, str(repo), mode="ask", confirm=None, notice=told.append)
    assert kept.action == "kept" and [c.path for c in kept.changes] == ["README"]
    assert "no terminal" in told[-1] and (repo / "README").read_text() == "edited by hand\n"
    done = restore_workspace(world, sid, str(repo), mode="restore")
    assert done.action == "restored" and (repo / "README").read_text() == "readme\n"
    assert restore_workspace(world, sid, str(repo), mode="restore").action == "none"


def test_unsafe_paths_from_the_log_are_refused(world, tmp_path):
    for bad in ("/etc/passwd", "../x", "a/../../x", "a//b", ""):
        with pytest.raises(UnsafePath):
            checked_path(bad)
    cwd = tmp_path / "w"
    (cwd / "d").mkdir(parents=True)
    (cwd / "d" / "f").write_text("f")
    snap, sid = snapper(world, cwd)
    taken = snap.take("tool", 1, "x")
    target = tmp_path / "t"
    target.mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    os.symlink(outside, target / "d")  # a symlinked parent in the target
    with pytest.raises(UnsafePath):
        restore_into(world, taken, str(target))
    assert list(outside.iterdir()) == []


def test_pick_by_turn_and_step_and_diff(world, repo):
    snap, sid = snapper(world, repo)
    snap.take("tool", 1, "call-a")
    (repo / "new.txt").write_text("n")
    snap.take("turn_end", 1)
    (repo / "README").write_text("two\n")
    snap.take("tool", 2, "call-b")
    assert pick(world, sid, step="call-a").seq == 1 and pick(world, sid, turn=1).seq == 2
    changes = diff(flat_tree(world, pick(world, sid, turn=1).root), flat_tree(world, pick(world, sid).root))
    assert [(c.status, c.path) for c in changes] == [("modified", "README")]
    assert diff(flat_dir(str(repo), Rules(max_size=2048)), flat_tree(world, pick(world, sid).root)) == []


def test_push_and_pull_through_postgres_dedupes_objects(world, repo, tmp_path, pg_url):
    from dh_cli.team.postgres import PostgresWorld
    from dh_cli.team.sync import pull, push

    snap, sid = snapper(world, repo)
    snap.take("tool", 1, "a")
    (repo / "README").write_text("second\n")
    snap.take("tool", 1, "b")
    remote = PostgresWorld(pg_url)
    report = push(world, remote, [sid])
    assert report.sessions[0].snapshots == 2
    rows = remote._rows("SELECT hash, data FROM dh.ws_objects")
    local = world.conn.execute("SELECT count(*) FROM ws_objects").fetchone()[0]
    assert len(rows) == local
    assert not any(SECRET in bytes(d) or b"large-file-marker" in bytes(d) for _, d in rows)
    assert copy_workspace(world, remote, sid) == 0  # pushing again sends nothing
    other = LocalWorld(tmp_path / "other.db")
    pull(remote, other, [sid])
    target = tmp_path / "machine-b"
    restore_workspace(other, sid, str(target))
    assert (target / "README").read_text() == "second\n"
    assert (target / "src" / "app.py").read_text() == "print('hi')\n"
    other.close()
    remote.close()


def test_a_folder_with_too_many_files_is_not_snapshotted(world, tmp_path):
    from dh_cli.workspace.snapshot import TooManyFiles

    cwd = tmp_path / "many"
    cwd.mkdir()
    for i in range(5):
        (cwd / f"f{i}").write_text("x")
    session = world.create_session("claude-code", cwd=str(cwd), state="running")
    snap = Snapshotter(world, session.id, str(cwd), Rules(max_files=4))
    with pytest.raises(TooManyFiles):
        snap.take("tool", 1, "x")
    assert world.conn.execute("SELECT count(*) FROM ws_objects").fetchone()[0] == 0


def test_after_the_first_listing_git_status_finds_the_changes(world, repo, monkeypatch):
    """Each snapshot equals a fresh full listing of the folder (ls-files -co, every file
    hashed) through edits git reports, a file put back to its index content and old mtime
    (not reported any more: looked at because it was reported last time), untracked files
    added, ignored and removed, a tracked file deleted and brought back, a commit (the index
    changed: full listing) and an assume-unchanged file (git status does not look at it:
    full listings from then on)."""
    import dh_cli.workspace.snapshot as module

    fulls = []
    real_full = module.Snapshotter._full_listing
    monkeypatch.setattr(module.Snapshotter, "_full_listing",
                        lambda self, objects: fulls.append(1) or real_full(self, objects))
    rules = Rules(max_size=2048)
    snap = Snapshotter(world, world.create_session("claude-code", cwd=str(repo)).id, str(repo), rules)
    step = iter(range(100))

    def check(full_listings: int) -> None:
        taken = snap.take("tool", 1, f"s{next(step)}", always=True)
        assert flat_tree(world, taken.root) == flat_dir(str(repo), rules)
        assert len(fulls) == full_listings

    def old(path: Path, seconds: float = 20) -> None:
        os.utime(path, (time.time() - seconds, time.time() - seconds))

    age(repo, 30)
    check(1)
    app, readme = repo / "src" / "app.py", repo / "README"
    stamp = app.stat().st_mtime_ns
    app.write_text("print('ho')\n")  # same size, another content
    old(app)
    check(1)
    app.write_text("print('hi')\n")  # back to the index content, with its old mtime
    os.utime(app, ns=(stamp, stamp))
    check(1)
    (repo / "new.txt").write_text("new\n")
    (repo / "more.log").write_text("ignored\n")
    old(repo / "new.txt")
    check(1)
    (repo / ".gitignore").write_text("build/\n*.log\nnew.txt\n")
    old(repo / ".gitignore")
    check(1)
    readme.unlink()
    check(1)
    readme.write_text("readme\n")
    old(readme)
    check(1)
    git(repo, "add", "new.txt", "-f")
    git(repo, "commit", "-qm", "two")
    check(2)
    check(2)  # and git status is trusted again
    git(repo, "update-index", "--assume-unchanged", "src/app.py")
    check(3)
    app.write_text("print('assumed unchanged')\n")
    old(app)
    check(4)


def test_a_full_listing_is_taken_at_least_once_a_minute(world, repo, monkeypatch):
    import dh_cli.workspace.snapshot as module

    snap, _ = snapper(world, repo)
    snap.take("tool", 1, "a")
    assert snap.known is not None
    since = snap.known.since
    snap.take("tool", 1, "b", always=True)
    assert snap.known.since == since  # from git status
    monkeypatch.setattr(module, "FULL_EVERY", 0.0)
    snap.take("tool", 1, "c", always=True)
    assert snap.known.since > since  # a full listing again


def test_a_cwd_below_the_top_of_its_work_tree(world, repo):
    """git status names paths from the work tree's top: a session started in repo/src sees
    its own files only, by their paths under src."""
    rules = Rules(max_size=2048)
    cwd = repo / "src"
    snap = Snapshotter(world, world.create_session("claude-code", cwd=str(cwd)).id, str(cwd), rules)
    age(repo, 30)
    for change in (None, "edit", "untracked", "outside"):
        if change == "edit":
            (cwd / "app.py").write_text("print('below')\n")
        elif change == "untracked":
            (cwd / "sub").mkdir()
            (cwd / "sub" / "n.txt").write_text("n\n")
        elif change == "outside":
            (repo / "README").write_text("not in this cwd\n")
        taken = snap.take("tool", 1, f"s-{change}", always=True)
        assert flat_tree(world, taken.root) == flat_dir(str(cwd), rules)
    assert sorted(flat_tree(world, taken.root)) == ["app.py", "sub/n.txt"]
    assert snap.known is not None and snap.prefix == "src/"


def test_secret_and_large_files_are_in_neither_the_log_nor_the_world(world, repo, tmp_path, pg_url):
    """Greps the log's files and its decoded objects and records, and every row of the real
    PostgreSQL world (decoded too). The control: a compressible file under the size limit is
    found by the same grep (so a deflated copy would be), and a second log whose rules store
    everything shows the secret and the large file where this one has neither."""
    from dh_cli.team.postgres import PostgresWorld
    from dh_cli.team.sync import push

    from .workspace_stored import holds, log_bytes, world_bytes

    control = b"C" * 1500 + b"control-marker-7373"
    (repo / "src" / "long.txt").write_bytes(control)
    snap, sid = snapper(world, repo)
    files = flat_tree(world, snap.take("tool", 1, "call-1").root)
    assert files["src/long.txt"].note is None and files["big.dat"].note == "large"
    remote = PostgresWorld(pg_url)
    push(world, remote, [sid])
    for stored in (log_bytes(world), world_bytes(remote)):
        assert holds(stored, b"control-marker-7373") and holds(stored, b"print('hi')")
        assert not holds(stored, SECRET) and not holds(stored, b"large-file-marker-9191")
    remote.close()
    permissive = LocalWorld(tmp_path / "permissive" / "dh.db")
    session = permissive.create_session("claude-code", cwd=str(repo), state="running")
    Snapshotter(permissive, session.id, str(repo), Rules(max_size=1 << 30, secrets=())).take("tool")
    assert holds(log_bytes(permissive), SECRET) and holds(log_bytes(permissive), b"large-file-marker-9191")
    permissive.close()


def test_unrecorded_changes_name_what_the_folder_gained_lost_and_changed(tmp_path):
    """The relaunch of a cut turn compares the folder with the last snapshot taken while the
    harness ran; the one its attempt's end took (after the harness exited) never counts."""
    from dh_cli.workspace import unrecorded_changes

    world, cwd = LocalWorld(tmp_path / "dh.db"), tmp_path / "cwd"
    cwd.mkdir()
    (cwd / "kept.txt").write_text("same\n")
    (cwd / "edited.txt").write_text("one\n")
    (cwd / "gone.txt").write_text("bye\n")
    session = world.create_session("pi", home=str(tmp_path), harness_session_id="s")
    snap = Snapshotter(world, session.id, str(cwd))
    snap.take("start")
    (cwd / "edited.txt").write_text("two\n")
    (cwd / "gone.txt").unlink()
    (cwd / "made.txt").write_text("new\n")
    snap.take("attempt_end", 1)
    changes = {c["path"]: c["status"] for c in unrecorded_changes(world, session.id, str(cwd))}
    # restore.diff's view: "added" is what a restore would write back, "deleted" a new file
    assert changes == {"edited.txt": "modified", "gone.txt": "added", "made.txt": "deleted"}


def test_a_snapshot_that_cannot_be_read_leaves_the_relaunch_going_with_one_line(tmp_path):
    from dh_cli.resume.plan import _unrecorded
    from dh_cli.supervisor.spec import RunOptions

    world, cwd = LocalWorld(tmp_path / "dh.db"), tmp_path / "cwd"
    cwd.mkdir()
    (cwd / "a.txt").write_text("a\n")
    session = world.create_session("pi", home=str(tmp_path), harness_session_id="s")
    Snapshotter(world, session.id, str(cwd)).take("start")
    world.conn.execute("DELETE FROM ws_objects")
    world.conn.commit()
    notices: list[str] = []
    opts = RunOptions(cwd=str(cwd), env={}, notice=notices.append)
    assert _unrecorded(world, session, str(cwd), opts) == []
    assert len(notices) == 1 and notices[0].startswith(f"dh: could not compare {cwd} with")
