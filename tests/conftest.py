"""Shared test set-up: every test gets its own DH_HOME, and the real captured fixtures are
reachable by harness and scenario."""

import json
import shutil
import sqlite3
import sys
from pathlib import Path

import pytest

from .helpers import timing

FIXTURES = Path(__file__).parent / "fixtures" / "real"
HOME_DIRS = {"claude-code": "claude-config", "codex": "codex-home", "pi": "pi-agent"}


def pytest_configure(config):
    """The dh processes the tests start run from cached bytecode, as dh does where people
    install it (pip compiles it). This sandbox sets PYTHONDONTWRITEBYTECODE, so each of them
    compiled its ~300 modules again: about 1 s of the 5.6 s from a kill to the first model
    request of a takeover here (4.6 s with the cache), which went past test_live_world's
    TTL + 3 s in 2 of 3 full runs. The cache is kept out of the checkout."""
    import os
    import tempfile

    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    os.environ.setdefault("PYTHONPYCACHEPREFIX",
                          str(Path(tempfile.gettempdir()) / f"dh-test-pycache-{os.getuid()}"))


def pytest_collection_modifyitems(config, items):
    timing.leave_out(config, items)


def pytest_sessionfinish(session, exitstatus):
    timing.worker_done(session.config)
    timing.run_apart(session)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    timing.node_down(node.config, node)


def pytest_report_header(config):
    import sqlite_utils
    import typer

    return (f"sqlite {sqlite3.sqlite_version}, sqlite-utils {sqlite_utils.__version__ if hasattr(sqlite_utils, '__version__') else '?'}, "
            f"typer {typer.__version__}, python {sys.version.split()[0]}")


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args):
    """pytest-playwright's one browser for the run, the system Chromium. Every browser test takes
    its `browser` or `page`: that plugin keeps a sync Playwright open in the worker for the
    whole session, and a second sync_playwright() in the same process is refused."""
    from .helpers.serve import CHROMIUM, CHROMIUM_ARGS
    return {**browser_type_launch_args, "executable_path": CHROMIUM, "headless": True,
            "args": CHROMIUM_ARGS}


@pytest.fixture(autouse=True)
def dh_home(tmp_path, monkeypatch):
    home = tmp_path / "dh-home"
    monkeypatch.setenv("DH_HOME", str(home))
    monkeypatch.setenv("DH_RAISE_ERRORS", "")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg-config"))
    return home


def scenarios(harness: str) -> list[str]:
    return sorted(p.name for p in (FIXTURES / harness).iterdir() if p.is_dir())


def fixture_home(harness: str, scenario: str, tmp_path: Path) -> Path:
    """A writable copy of a fixture's harness home (or, for OpenCode, a real database built
    from the captured schema and rows)."""
    src = FIXTURES / harness / scenario
    if harness == "opencode":
        return build_opencode_db(src, tmp_path / f"{scenario}.db")
    dest = tmp_path / f"{harness}-{scenario}"
    shutil.copytree(src / HOME_DIRS[harness], dest)
    return dest


def build_opencode_db(src: Path, db: Path) -> Path:
    conn = sqlite3.connect(db)
    conn.executescript((src / "db" / "opencode.db.schema.sql").read_text())
    conn.execute("PRAGMA foreign_keys=OFF")
    for line in (src / "db" / "rows.jsonl").read_text().splitlines():
        row = json.loads(line)
        table = row.pop("table")
        cols = ", ".join(f'"{c}"' for c in row)
        conn.execute(f'INSERT INTO "{table}" ({cols}) VALUES ({", ".join("?" * len(row))})',
                     list(row.values()))
    conn.commit()
    conn.close()
    return db


def native_files(home: Path) -> dict[str, bytes]:
    """Every session file under a harness home, keyed by relative path."""
    patterns = ["projects/**/*.jsonl", "projects/**/*.meta.json", "sessions/**/*.jsonl",
                "tasks/*/*.json"]  # Claude Code TaskCreate state
    found = {}
    for pattern in patterns:
        for path in home.glob(pattern):
            found[str(path.relative_to(home))] = path.read_bytes()
    return found


@pytest.fixture
def run_dh():
    """Run the CLI in-process; returns (exit code, stdout, stderr)."""
    from typer.testing import CliRunner

    from dh_cli.cli import app, report_error

    def run(*args, input=None):
        result = CliRunner().invoke(app, list(args), input=input, catch_exceptions=True)
        if result.exception is not None and not isinstance(result.exception, SystemExit):
            # What main() does at the edge: one Error line and the mapped exit code.
            result.exit_code = report_error(result.exception)
        return result

    return run


@pytest.fixture
def tail(tmp_path):
    """A Pi session whose native file is tmp/s.jsonl: (path, sync, world, session)."""
    from dh_cli import wrappers
    from dh_cli.mirror.session import SessionMirror
    from dh_cli.worlds.local import LocalWorld

    world = LocalWorld()
    path = tmp_path / "s.jsonl"
    session = world.create_session("pi", home=str(tmp_path), harness_session_id="s1")
    world.add_source(session.id, "jsonl", "s.jsonl", str(path))
    return path, SessionMirror(world, wrappers.get("pi"), session).sync, world, session
