"""What `dh worker` puts on its children's command lines and names after a world's rows
(issue 30): never the world's password (every local user reads `ps`), never a session id a
world chose unless it is a dh id (it names the child's log file and is an argv word)."""

from __future__ import annotations

import os
import subprocess

import pytest

from dh_cli.team import worker as worker_module
from dh_cli.team.takeover import Claim
from dh_cli.team.worker import Worker, WorkerOptions, refusal

URL = "postgresql://dh:S3CRET-pw@db.internal:5432/dh"


class Recorded:
    """subprocess.Popen's stand-in: records how the child would have been started."""

    calls: list[dict] = []

    def __init__(self, argv, **kw):
        Recorded.calls.append({"argv": list(argv), **kw})
        self.pid = os.getpid()

    def poll(self):
        return None


def test_the_worlds_url_reaches_the_child_through_its_environment(tmp_path, monkeypatch):
    monkeypatch.setattr(subprocess, "Popen", Recorded)
    Recorded.calls = []
    worker = Worker(WorkerOptions("postgres", URL, notice=lambda _line: None))
    worker._start(Claim("1m8v0abcdeQXYZ", "pi", str(tmp_path), "host-a", 1, 2))
    (call,) = Recorded.calls
    assert not any("S3CRET" in word for word in call["argv"]), call["argv"]
    assert call["env"]["DH_POSTGRES_URL"] == URL
    assert call["argv"][-2:] == ["--", "1m8v0abcdeQXYZ"]  # after `--`: never read as an option


@pytest.mark.parametrize("sid", ["--help", "../../etc/x", "a/b", "", "x" * 200, "-v"])
def test_a_session_id_that_is_not_a_dh_id_is_refused_before_any_argv_or_path(tmp_path, sid):
    reason = refusal(None, Claim(sid, "pi", str(tmp_path), "host-a", 1, 2))
    assert reason and "is not a dh session id" in reason


def test_the_check_is_the_worker_s(monkeypatch):
    """refusal() is what the worker's claim asks (a refused session is never claimed)."""
    seen = []
    monkeypatch.setattr(worker_module, "claim", lambda world, ttl, harnesses, accept, skip: seen.append(
        accept(Claim("--help", "pi", "/", "h", 1, 2))))
    Worker(WorkerOptions("postgres", URL, max_sessions=1, notice=lambda _line: None))._claim_all(None)
    assert seen and "not a dh session id" in seen[0]


REASONS = [
    ("1m8v0abcdeQXYZ", None, "it names no working directory"),
    ("1m8v0abcdeQXYZ", "", "it names no working directory"),
    ("1m8v0abcdeQXYZ", "rel/x'y", "its working directory (rel/x'y) is not a plain absolute path"),
    ("1m8v0abcdeQXYZ", "/a/\x1b]0;t\x07/../b",
     "its working directory (/a/\\x1b]0;t\\x07/../b) is not a plain absolute path"),
    ("it's\nbad", "/tmp", "its session id (it's\\x0abad) is not a dh session id"),
    (None, "/tmp", "its session id (empty) is not a dh session id"),
]


@pytest.mark.parametrize(("sid", "cwd", "reason"), REASONS)
def test_a_refusal_reason_is_words_never_python_text(sid, cwd, reason):
    """What a world's row holds is quoted in words people read (the reason goes to the
    world, `dh world status` and the worker's line): no None, no repr quotes or escapes,
    control characters visible."""
    assert refusal(None, Claim(sid, "pi", cwd, "host-a", 1, 2)) == reason
