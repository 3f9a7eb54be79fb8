"""A session from elsewhere, as a world's pull would leave it: a killed session imported from a
fixture's harness home, its argv row set to what the other machine stored, resumed with a
stand-in harness that writes the argv it got (stand_ins.argv_harness)."""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

from tests.conftest import fixture_home
from tests.helpers.stand_ins import argv_harness, dh

HOME_ENV = {"claude-code": "CLAUDE_CONFIG_DIR", "codex": "CODEX_HOME", "pi": "PI_CODING_AGENT_DIR"}
BIN_ENV = {"claude-code": "DH_CLAUDE_BIN", "codex": "DH_CODEX_BIN", "pi": "DH_PI_BIN"}


def imported(tmp_path: Path, harness: str, argv: list[str]) -> tuple[str, dict]:
    """(session id, the environment that resumes it with the stand-in)."""
    home = fixture_home(harness, "killed", tmp_path)
    env = {**os.environ, HOME_ENV[harness]: str(home), BIN_ENV[harness]: str(argv_harness(tmp_path))}
    done = dh("import", harness, "--all", "--home", str(home), env=env)
    assert done.returncode == 0, done.stderr
    db = sqlite3.connect(Path(os.environ["DH_HOME"]) / "dh.db")
    with db:
        db.execute("UPDATE sessions SET argv = ?", [json.dumps(argv)])
    (sid,) = [row[0] for row in db.execute("SELECT id FROM sessions")]
    db.close()
    return sid, env


def grant_here(harness: str, flags: list[str]) -> None:
    """This machine's dh config: `local_flags` for the harness."""
    config = Path(os.environ["XDG_CONFIG_HOME"]) / "dh" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(f"[local_flags]\n{harness} = {json.dumps(flags)}\n")
