"""`dh restore` over the real programs (issue 39): a session run under `dh run` is lost the
way its harness loses it (its file deleted, as Claude Code's cleanup and a user do; Codex's
own `codex delete`; OpenCode's own `opencode session delete`), `dh restore --lost --dry-run
--json` names it and writes nothing, `dh restore --lost --yes` brings it back, and then the
harness ALONE, without dh, goes on with it: its first model request carries the earlier
turn's prompt and the earlier tool's result. A second session the harness still had is left
byte- and mtime-exact."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.helpers.real_runs import RUN_TIMEOUT, goes_on_whole, lose_as_harness_does, newest_session
from tests.rig import HARNESSES

pytestmark = pytest.mark.e2e

FIRST, SECOND, GO_ON = "Count the steps.", "Something else.", "Go on."
SCRIPT = {"replies": [{"text": "Running a command.", "shell": "echo step-one | tee -a steps.log"},
                      {"text": "All done."}]}


def native_continue(rig, harness: str, native_id: str) -> list[str]:
    """The harness's own headless resume of the session, nothing of dh in it."""
    binary = rig.env[{"claude-code": "DH_CLAUDE_BIN", "codex": "DH_CODEX_BIN",
                      "opencode": "DH_OPENCODE_BIN", "pi": "DH_PI_BIN"}[harness]].split()
    return binary + {
        "claude-code": ["-p", GO_ON, "--resume", native_id, "--output-format", "json",
                        "--dangerously-skip-permissions"],
        "codex": ["exec", "--json", "--skip-git-repo-check",
                  "--dangerously-bypass-approvals-and-sandbox", "resume", native_id, GO_ON],
        "opencode": ["run", "--format", "json", "--session", native_id, GO_ON],
        "pi": ["-p", "--mode", "json", "--provider", "mock", "--model", "mock-claude",
               "--session", native_id, GO_ON],
    }[harness]


def run_session(rig, harness: str, prompt: str) -> tuple[dict, Path]:
    done = rig.run(harness, prompt, timeout=RUN_TIMEOUT)
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-2000:]
    return newest_session(rig)


def harness_id(harness: str, session: dict, main: Path) -> str:
    """The id the harness resumes by: Pi's is its file header's (its own listing finds it)."""
    if harness == "pi":
        return json.loads(main.read_text().splitlines()[0])["id"]
    return session["harness_session_id"]


def native_state(harness: str, main: Path, native_id: str) -> object:
    """What the harness holds of a session: its file's bytes and mtime, or its rows."""
    if harness == "opencode":
        import sqlite3

        conn = sqlite3.connect(f"file:{main}?mode=ro", uri=True)
        try:
            return [conn.execute(f"SELECT * FROM {t} WHERE session_id = ? ORDER BY id",
                                 [native_id]).fetchall() for t in ("message", "part")]
        finally:
            conn.close()
    return main.read_bytes(), main.stat().st_mtime_ns


def restore(rig, *args: str) -> list[dict]:
    done = rig.dh("restore", *args, "--json", timeout=RUN_TIMEOUT)
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-2000:]
    return json.loads(done.stdout)


@pytest.mark.parametrize("harness", HARNESSES)
def test_a_lost_session_comes_back_and_the_harness_alone_goes_on_with_it(real_rig, harness):
    rig = real_rig(SCRIPT)
    lost, lost_main = run_session(rig, harness, FIRST)
    kept, kept_main = run_session(rig, harness, SECOND)
    lost_id, kept_id = harness_id(harness, lost, lost_main), harness_id(harness, kept, kept_main)
    kept_before = native_state(harness, kept_main, kept_id)
    lose_as_harness_does(rig, harness, lost, lost_main)
    lost_before = native_state(harness, lost_main, lost_id) if harness == "opencode" else None

    listed = restore(rig, "--lost", "--dry-run")
    assert [(r["session"], r["status"]) for r in listed] == [(lost["id"], "would restore")]
    if harness == "opencode":
        assert native_state(harness, lost_main, lost_id) == lost_before == [[], []]
    else:
        assert not lost_main.exists()  # the dry run wrote nothing

    done = restore(rig, "--lost", "--yes")
    assert [(r["session"], r["status"]) for r in done] == [(lost["id"], "restored")]
    assert native_state(harness, kept_main, kept_id) == kept_before  # never touched
    assert restore(rig, "--lost", "--yes") == []  # twice: nothing left to do

    goes_on_whole(rig, native_continue(rig, harness, lost_id), FIRST, GO_ON, SECOND)
    if harness == "opencode":  # its own list shows it again
        listing = subprocess.run([*rig.env["DH_OPENCODE_BIN"].split(), "session", "list",
                                  "--format", "json"], cwd=rig.proj, env=rig.env, check=True,
                                 capture_output=True, stdin=subprocess.DEVNULL, timeout=120)
        assert lost_id in {s["id"] for s in json.loads(listing.stdout)}
