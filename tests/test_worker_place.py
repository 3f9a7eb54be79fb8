"""Where `dh worker` may run a session whose cwd a world chose (issue 30): never `/` or a
system folder (a root worker launched harnesses in `/`, `/etc`, `/dev/shm`); with `--root`,
only under a root or in a cwd the session was started in here; a worker running as root must
be told which user to run harnesses as, and its children then run as that user."""

from __future__ import annotations

import os
import pwd
import subprocess

import pytest

from dh_cli.errors import UsageError
from dh_cli.team import worker_place
from dh_cli.team.takeover import Claim
from dh_cli.team.worker import Worker, WorkerOptions, refusal
from dh_cli.team.worker_place import current_user, run_as

SID = "1m8v0abcdeQXYZ"


def claim_in(cwd: str) -> Claim:
    return Claim(SID, "pi", cwd, "host-a", 1, 2)


@pytest.mark.parametrize("cwd", ["/", "/etc", "/dev/shm", "/usr/lib", "/proc/self"])
def test_a_system_folder_is_refused_whoever_owns_it(cwd):
    reason = refusal(None, claim_in(cwd))
    assert reason and ("system folder" in reason or "root folder" in reason), reason


def test_with_roots_only_a_cwd_under_one_is_run(tmp_path):
    root, elsewhere = tmp_path / "root", tmp_path / "elsewhere"
    (root / "proj").mkdir(parents=True)
    elsewhere.mkdir()
    who = run_as(current_user().name, [str(root)])
    assert refusal(None, claim_in(str(root / "proj")), who) is None
    reason = refusal(None, claim_in(str(elsewhere)), who)
    assert reason and "under none of this worker's roots" in reason


def test_a_cwd_the_session_was_started_in_here_is_run_without_a_root(tmp_path):
    from dh_cli.worlds.local import LocalWorld

    (tmp_path / "proj").mkdir()
    (tmp_path / "root").mkdir()
    world = LocalWorld()
    world.create_session("pi", id=SID, home=str(tmp_path / "home"), cwd=str(tmp_path / "proj"))
    world.close()
    who = run_as(current_user().name, [str(tmp_path / "root")])
    assert refusal(None, claim_in(str(tmp_path / "proj")), who) is None


@pytest.mark.parametrize("root", ["/", "/etc", "/usr"])
def test_a_system_folder_is_never_a_root(root):
    with pytest.raises(UsageError):
        run_as(current_user().name, [root])


def test_a_root_worker_refuses_to_start_without_its_user(monkeypatch):
    monkeypatch.setattr(worker_place.os, "getuid", lambda: 0)
    with pytest.raises(UsageError, match="without the user to run harnesses as"):
        run_as(None, None)


def test_a_root_worker_s_children_run_as_its_user(tmp_path, monkeypatch):
    if os.getuid() != 0:
        pytest.skip("needs root: only root may run harnesses as another user")
    nobody = pwd.getpwnam("nobody")
    who = run_as("nobody", None)
    seen = {}

    class Child:
        pid = os.getpid()

        def __init__(self, argv, **kw):
            seen.update(kw)

    monkeypatch.setattr(subprocess, "Popen", Child)
    Worker(WorkerOptions("postgres", "postgresql://dh@db/dh", notice=lambda _l: None, run_as=who))._start(
        claim_in(str(tmp_path)))
    assert (seen["user"], seen["group"]) == (nobody.pw_uid, nobody.pw_gid)
    assert seen["env"]["HOME"] == nobody.pw_dir and "DH_HOME" not in seen["env"]


def test_the_command_refuses_as_root_without_a_user(tmp_path):
    if os.getuid() != 0:
        pytest.skip("the refusal of a worker running as root")
    from . import rig

    env = {k: v for k, v in os.environ.items() if k != "DH_WORKER_USER"}
    done = rig.dh("worker", "--url", "postgresql://dh@127.0.0.1:9/dh", env=env, inherit=False)
    assert done.returncode == 2 and "without the user to run harnesses as" in done.stderr
