"""After `dh restore`, the harness's OWN list shows the session again, the harness started
without dh (issue 39): Claude Code's `claude --resume` picker, Codex's `codex resume` picker
and Pi's `pi --resume` picker (TUIs, their screens read through tmux), OpenCode's `opencode
session list`. Each list is read three times: the session is listed; lost the way its harness
loses it, it is not (so the reading can fail); after `dh restore --lost --yes` it is listed
again. Codex lists from its `threads` rows, which `codex delete` drops: there the restore has
Codex's app-server rescan the rollouts (wrappers/codex_index.py). A session Claude Code's
picker hides (started with `-p`) is listed after `dh restore --unhide`."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from dh_cli.wrappers import codex_index

from tests.helpers.real_runs import RUN_TIMEOUT, goes_on_whole, lose_as_harness_does, newest_session
from tests.helpers.tmux import screen_of
from tests.rig import HARNESSES

pytest.importorskip("pexpect")
pytest.importorskip("pyte")
from .tui import TUI, Tui, seed_claude_tui, trust_codex_project  # noqa: E402

pytestmark = pytest.mark.e2e

FIRST, SECOND, GO_ON = "Count the steps.", "Something else.", "Go on."
SCRIPT = {"replies": [{"text": "Running a command.", "shell": "echo step-one | tee -a steps.log"},
                      {"text": "All done."}]}
BIN_VARS = {"claude-code": "DH_CLAUDE_BIN", "codex": "DH_CODEX_BIN", "opencode": "DH_OPENCODE_BIN",
            "pi": "DH_PI_BIN"}
# harness -> (its own picker's arguments, text on screen once the picker is drawn); Codex's
# picker leaves out `codex exec` threads unless asked (`dh log list` says so: picker_hides)
PICKERS = {
    "claude-code": (["--resume"], "Resume session"),
    "codex": (["resume", "--include-non-interactive"], "Resume a previous session"),
    "pi": (["--resume"], "Resume Session"),
}


def harness_argv(rig, harness: str, *args: str) -> list[str]:
    return [*rig.env[BIN_VARS[harness]].split(), *args]


def run_session(rig, harness: str, prompt: str, typed: bool = False) -> tuple[dict, Path]:
    """A session under `dh run`; `typed` into the harness's TUI (Claude Code's picker hides
    `-p` sessions)."""
    if typed:
        typed_session(rig, harness, prompt)
    else:
        done = rig.run(harness, prompt, timeout=RUN_TIMEOUT)
        assert done.returncode == 0, done.stderr.decode(errors="replace")[-2000:]
    return newest_session(rig)


def typed_session(rig, harness: str, prompt: str) -> None:
    args, ready, quit_keys = TUI[harness]
    tui = Tui(rig, harness, args)
    asked = len(rig.server.main_requests())
    try:
        tui.until(lambda: tui.on_screen(ready), what="the editor")
        tui.quiet()
        tui.submit(prompt, lambda: len(rig.server.main_requests()) > asked)
        tui.until(lambda: tui.on_screen("All done."), what="the final answer")
        tui.quit(quit_keys)
    finally:
        tui.close()


def own_list(rig, harness: str) -> str:
    """What the harness's own list shows, without dh: OpenCode's session ids, or the
    picker's screen."""
    if harness == "opencode":
        listing = subprocess.run(harness_argv(rig, harness, "session", "list", "--format", "json"),
                                 cwd=rig.proj, env=rig.env, check=True, capture_output=True,
                                 stdin=subprocess.DEVNULL, timeout=120)
        return "\n".join(s["id"] for s in json.loads(listing.stdout or b"[]"))
    args, drawn = PICKERS[harness]
    return screen_of(harness_argv(rig, harness, *args), rig.env, rig.proj, drawn, rig.tmp)


def shows(harness: str, seen: str, native_id: str) -> bool:
    return (native_id if harness == "opencode" else FIRST) in seen


@pytest.mark.parametrize("harness", HARNESSES)
def test_the_harness_own_list_shows_the_restored_session(real_rig, installed, harness):
    rig = real_rig(SCRIPT)
    if harness == "claude-code":
        seed_claude_tui(rig, installed.versions()[harness])
    if harness == "codex":
        trust_codex_project(rig)
    session, main = run_session(rig, harness, FIRST, typed=harness == "claude-code")
    run_session(rig, harness, SECOND)  # kept: Codex rescans the rollouts of an empty list
    native_id = session["harness_session_id"]
    seen = own_list(rig, harness)
    assert shows(harness, seen, native_id), seen
    lose_as_harness_does(rig, harness, session, main)
    assert not main.exists() or harness == "opencode"
    seen = own_list(rig, harness)
    assert not shows(harness, seen, native_id), seen
    assert SECOND in seen or harness not in ("codex", "pi"), seen  # the list was drawn

    done = rig.dh("restore", "--lost", "--yes", "--json", timeout=RUN_TIMEOUT)
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-2000:]
    restored = json.loads(done.stdout)
    assert [(r["session"], r["status"]) for r in restored] == [(session["id"], "restored")]
    seen = own_list(rig, harness)
    assert shows(harness, seen, native_id), seen
    if harness == "codex":
        assert restored[0]["listed"] == {"via": "codex app-server thread/list", "listed": True,
                                         "left": codex_index.UNNAMED}  # its name, said lost


def test_a_session_the_picker_hides_is_listed_after_unhide_and_goes_on_whole(real_rig, installed):
    """Claude Code's picker hides a `-p` session although its transcript is there; `dh
    restore` alone leaves it so, `dh restore --unhide` makes the picker list it, and
    `claude --resume` still goes on with its whole conversation."""
    rig = real_rig(SCRIPT)
    seed_claude_tui(rig, installed.versions()["claude-code"])
    hidden, main = run_session(rig, "claude-code", FIRST)  # -p: `entrypoint: sdk-cli`
    run_session(rig, "claude-code", SECOND, typed=True)  # listed: the picker draws a list
    seen = own_list(rig, "claude-code")
    assert SECOND in seen and FIRST not in seen, seen
    original = main.read_bytes()
    plain = rig.dh("restore", hidden["id"], "--json", timeout=RUN_TIMEOUT)
    assert json.loads(plain.stdout)[0]["hidden"]["from"] == "sdk-cli"
    assert main.read_bytes() == original  # no opt-in: nothing changes

    done = rig.dh("restore", "--unhide", hidden["id"], "--json", timeout=RUN_TIMEOUT)
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-2000:]
    (unhidden,) = json.loads(done.stdout)
    assert unhidden["status"] == "unhidden" and Path(unhidden["change"]["kept"]).read_bytes() == original
    seen = own_list(rig, "claude-code")
    assert FIRST in seen and SECOND in seen, seen

    goes_on_whole(rig, harness_argv(rig, "claude-code", "-p", GO_ON, "--resume",
                                    hidden["harness_session_id"], "--output-format", "json",
                                    "--dangerously-skip-permissions"), FIRST, GO_ON, SECOND)
