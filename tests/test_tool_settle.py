"""How dh settles a tool command cut off by the harness's death, one outcome per process group.

Seen with the real Codex CLI: its shell commands run as `bash -c …` in a session of their own
with a parent-death signal, so when Codex is SIGKILLed the shell dies of SIGTERM at once while a
child like `sleep` runs on. dh used to see only the orphaned `sleep` finish and told the model
"its effect has happened" although the command's effect (the `echo` after the sleep) never ran."""

import json
import signal
import subprocess
import sys
import textwrap

import pytest

from dh_cli.events_text import summary
from dh_cli.wrappers.replay import repair_text

DRIVER = textwrap.dedent("""
    import ctypes, json, os, signal, subprocess, sys, time
    import psutil
    from dh_cli.procs import become_subreaper
    from dh_cli.supervisor.tools import ToolTracker

    pdeathsig, effect = int(sys.argv[1]), sys.argv[2]
    become_subreaper()
    # the "harness": starts the tool in a session of its own, as every real harness does
    harness = subprocess.Popen([sys.executable, "-c", '''
    import ctypes, subprocess, sys, time
    def child_setup():
        if %d:
            ctypes.CDLL(None).prctl(1, %d, 0, 0, 0)  # PR_SET_PDEATHSIG
    subprocess.Popen(["bash", "-c", "sleep 1; echo once >> %s"], start_new_session=True,
                     preexec_fn=child_setup)
    time.sleep(60)
    ''' % (pdeathsig, pdeathsig, effect)], start_new_session=True)
    tracker = ToolTracker(harness.pid)
    deadline = time.monotonic() + 10
    while sys.argv[4] == "1" and time.monotonic() < deadline and \
            not any(c.startswith("bash") for _, c in tracker.seen.values()):
        tracker.snapshot()  # dh snapshots every second; a child seen before its exec is refreshed
        time.sleep(0.05)
    # the shell has started (unseen by dh when it does not look): a loaded machine can take
    # longer than any fixed pause to start the harness's interpreter
    shell = None
    while shell is None and time.monotonic() < deadline:
        shell = next((c for c in psutil.Process(harness.pid).children()
                      if c.name() == "bash" and "sleep" in " ".join(c.cmdline())), None)
        time.sleep(0.05)
    time.sleep(0.3)
    os.killpg(harness.pid, signal.SIGKILL)
    harness.wait()
    if sys.argv[4] == "0":
        time.sleep(0.3)  # dh looks only after the shell died of its parent-death signal
    while sys.argv[4] == "late" and shell is not None and time.monotonic() < deadline + 10:
        try:  # ... and after the sleep inside it ended too: its group is empty
            os.killpg(shell.pid, 0)
            time.sleep(0.05)
        except ProcessLookupError:
            break
    print(json.dumps([o.to_dict() for o in tracker.settle(float(sys.argv[3]))]))
""")


def settle(tmp_path, pdeathsig: int, grace: float, snapshot: bool | str = True) -> list[dict]:
    """snapshot: True, dh saw the shell run; False, it looks once the shell died; "late", once
    the whole command had ended."""
    effect = tmp_path / "effect.log"
    look = snapshot if isinstance(snapshot, str) else "1" if snapshot else "0"
    done = subprocess.run([sys.executable, "-c", DRIVER, str(pdeathsig), str(effect), str(grace), look],
                          capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_a_shell_killed_with_the_harness_is_not_reported_as_finished(tmp_path):
    (outcome,) = settle(tmp_path, signal.SIGTERM, grace=3)
    assert outcome["command"].startswith("bash -c sleep 1")
    assert outcome["killed_by"] == signal.SIGTERM and not outcome["finished"]
    assert not (tmp_path / "effect.log").exists()  # the orphaned sleep ran on; the echo never did
    text = repair_text("never", outcome)
    assert "stopped with it (SIGTERM)" in text and "may already have taken effect" in text
    assert "its effect has happened" not in text
    shown = summary("exited", {"code": -9, "signal": 9, "ran_for": 1.0, "tools": [outcome]})
    assert "stopped with the harness (SIGTERM)" in shown  # `dh log show`


@pytest.mark.parametrize("grace", [3.0, 0.3])
def test_an_orphaned_shell_finishes_or_is_ended(tmp_path, grace):
    (outcome,) = settle(tmp_path, 0, grace=grace)
    assert outcome["command"].startswith("bash -c sleep 1")
    if grace > 1:
        assert outcome["finished"] and outcome["exit_code"] == 0
        assert (tmp_path / "effect.log").read_text() == "once\n"
        assert "went on to finish on its own (exit code 0)" in repair_text("never", outcome)
    else:
        assert outcome["ended_by_dh"] and not outcome["finished"]
        assert not (tmp_path / "effect.log").exists()
        assert "dh ended the command" in repair_text("never", outcome)


def test_a_shell_that_died_unseen_is_named_by_what_ran_on_in_its_group(tmp_path):
    """The harness was killed before dh's next look at its children: the dead shell's
    command line is gone, so the outcome names it with the orphan of its group."""
    (outcome,) = settle(tmp_path, signal.SIGTERM, grace=3, snapshot=False)
    assert outcome["command"] == "bash (sleep 1)"
    assert outcome["killed_by"] == signal.SIGTERM


def test_a_command_that_ended_unseen_is_named_by_its_processes_names(tmp_path):
    """dh looked only once the shell (killed with the harness) and the sleep inside it had
    both ended: no command line is left to read, their names are (in CI, Codex's command
    was reported as plain "bash")."""
    (outcome,) = settle(tmp_path, signal.SIGTERM, grace=3, snapshot="late")
    assert outcome["command"] == "bash (sleep)"
    assert outcome["killed_by"] == signal.SIGTERM


PART_DRIVER = textwrap.dedent("""
    import json, os, signal, subprocess, sys, time
    from dh_cli.procs import become_subreaper
    from dh_cli.supervisor.tools import ToolTracker

    effect, cue = sys.argv[1], sys.argv[2]
    become_subreaper()
    # the "harness" starts a part of its own (as Codex's TUI starts its app-server daemon) in
    # a session of its own; the part runs the tool command and, the moment it ends, acts on
    # it (as the daemon records the result and asks the model for the next reply)
    part = '''
    import subprocess, sys
    tool = subprocess.Popen(["bash", "-c", "sleep 1; echo once >> %s; exit 3"], start_new_session=True)
    tool.wait()
    open(%r, "w").write("asked for the next reply")
    ''' % (effect, cue)
    harness = subprocess.Popen([sys.executable, "-c", '''
    import subprocess, sys, time
    subprocess.Popen([sys.executable, "-c", %r, "HARNESS-PART"], start_new_session=True)
    time.sleep(60)
    ''' % part], start_new_session=True)
    tracker = ToolTracker(harness.pid, is_part=lambda command: command.endswith("HARNESS-PART"))
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not any(c.startswith("bash") for _, c in tracker.seen.values()):
        tracker.snapshot()
        time.sleep(0.05)
    os.killpg(harness.pid, signal.SIGKILL)
    harness.wait()
    outcomes = [o.to_dict() for o in tracker.settle(3.0)]
    print(json.dumps({"outcomes": outcomes, "ended_parts": len(tracker.ended_parts)}))
""")


def test_a_harness_part_is_frozen_while_its_command_finishes(tmp_path):
    """The part does nothing after the harness's death (it never acts on the command's end),
    the command still finishes, and its exit code is read although the part was its parent."""
    effect, cue = tmp_path / "effect.log", tmp_path / "cue"
    done = subprocess.run([sys.executable, "-c", PART_DRIVER, str(effect), str(cue)],
                          capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    (outcome,) = result["outcomes"]
    assert outcome["command"].startswith("bash -c sleep 1")
    assert outcome["finished"] and outcome["exit_code"] == 3
    assert effect.read_text() == "once\n" and result["ended_parts"] == 1
    assert not cue.exists()


def test_claude_codes_wrapped_bash_command_is_named_by_the_command_it_evals():
    from dh_cli import wrappers

    claude = wrappers.get("claude-code")
    home = "/home/someone/a/rather/long/project/folder/that/users/really/have/" * 3
    script = (f"source {home}.claude/shell-snapshots/snapshot-bash-1795938940287-7u12cm.sh "
              "2>/dev/null || true && shopt -u extglob 2>/dev/null || true && "
              "eval 'sleep 3; echo '\\''once'\\'' >> effect.log' < /dev/null && "
              f"pwd -P >| {home}tmp/claude-9582-cwd")
    assert claude.tool_command(["/bin/bash", "-c", script]) == "sleep 3; echo 'once' >> effect.log"
    assert claude.tool_command(["/bin/bash", "-c", "ls -la"]) == "/bin/bash -c ls -la"
    assert claude.tool_command(["/bin/bash", "-c", "eval 'unclosed"]) == "/bin/bash -c eval 'unclosed"
    assert wrappers.get("pi").tool_command(["bash", "-c", script]).startswith("bash -c source")
