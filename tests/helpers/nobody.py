"""Running dh as a user who may not write (uid 65534, "nobody"), for the tests of a log or a
native file dh can read but not write: the tests run as root, which may write anything."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

from tests.conftest import FIXTURES


NOBODY = 65534


@pytest.fixture
def nobody_dir():
    """A folder outside pytest's private tmp tree, owned by uid 65534."""
    folder = Path(__import__("tempfile").mkdtemp(prefix="dh-nobody-", dir="/tmp"))
    folder.chmod(0o755)
    os.chown(folder, NOBODY, NOBODY)
    yield folder
    for root, dirs, _ in os.walk(folder):
        for name in dirs:
            os.chmod(os.path.join(root, name), 0o755)
    shutil.rmtree(folder, ignore_errors=True)


def as_nobody(fn, *args) -> tuple[int, str]:
    """Run fn(*args) in a forked child that has dropped root (uid/gid 65534): what it returns
    is the exit code, what it prints is returned. The interpreter is installed where uid
    65534 cannot read (under /root), so everything dh needs is imported here first."""
    _warm_up()

    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 70
        try:
            os.close(read)
            os.dup2(write, 1)
            os.dup2(write, 2)
            sys.stdout = open(1, "w", closefd=False)
            sys.stderr = open(2, "w", closefd=False)
            os.setgroups([])
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            code = fn(*args) or 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        except BaseException:  # noqa: BLE001
            import traceback

            traceback.print_exc()
            code = 99
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    os.close(write)
    chunks = []
    while chunk := os.read(read, 65536):
        chunks.append(chunk)
    os.close(read)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status), b"".join(chunks).decode(errors="replace")


def _warm_up() -> None:
    """Run the commands the child runs, successes and errors, once here: every module they
    import lazily is then loaded before the fork."""
    import tempfile

    saved = os.environ.get("DH_HOME")
    with tempfile.TemporaryDirectory() as scratch:
        os.environ["DH_HOME"] = scratch
        home = FIXTURES / "pi" / "basic" / "pi-agent"
        for argv in (["log", "list"], ["log", "list", "--json"], ["import", "pi", "/nonexistent/x.jsonl"],
                     ["import", "pi", "--all", "--home", str(home)]):
            subprocess_free_cli(*argv)
    os.environ["DH_HOME"] = saved or ""


def cli(*argv: str) -> int:
    """`dh …` in this process, as `python -m dh_cli` runs it (for the non-root child)."""
    from dh_cli import cli as dh_cli

    sys.argv = ["dh", *argv]
    dh_cli.main()
    return 0


def subprocess_free_cli(*argv: str) -> list:
    """Run `dh …` in this (non-root) process, capturing its exit code and output."""
    import io

    out, err = io.StringIO(), io.StringIO()
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = out, err
    try:
        code = cli(*argv)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    finally:
        sys.stdout, sys.stderr = saved
    return [code, out.getvalue(), err.getvalue()]

