"""A provider's limit under `dh run`, with the REAL harness CLIs against the fake model server:
from the 2nd model request of the turn on, every request is refused with a limit for a
window of seconds, then answered normally (tests/fakes/model_server.py `limit_window`).

* The issue's window, 40 s, at dh's default spacing (one launch per minute), every harness
  of a version set at once (they mostly sleep out the window; one after the other they
  would add minutes). Each is told what makes it give up (below, ISSUE_GIVES_UP): dh waits,
  `dh log list --json` says `waiting`, and it goes on with the cut turn once, with no flag
  and no keystroke. Claude Code, Pi 0.73.1 and OpenCode 1.18.33 also run told the truth,
  which they sleep out by themselves: the turn completes in one launch, dh leaves them be,
  and their records hold nothing about the limit to show (wrappers/claude.py, pi.py,
  opencode.py).
* Codex told the plan's usage limit, reading the reset it prints, at a scaled spacing
  (DH_LIMIT_SPACING=SPACING): two launches never closer than SPACING seconds.
* The same window and spacing in the TUIs of Claude Code and Codex: each shows the error at
  its prompt; dh stops it, waits, and relaunches it in the same terminal with the turn going
  on, with no keystroke.
* `--on-limit stop`; dh SIGKILLed (or Ctrl-C'd) while waiting, then `dh resume`, at once
  or `--at-reset`; and what a resume re-cached. The slow cases run with one release set
  (`version_sets`).

Every reply the server delivered was requested once (a refusal is no delivery)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from tests.helpers.prices import input_price
from tests.rig import HEADLESS_ARGS, SCRIPT, dh

from . import install

pytestmark = pytest.mark.e2e

WINDOW = 12.0  # seconds the server refuses every request
SPACING = 4.0  # DH_LIMIT_SPACING: the least time between two launches while waiting
RUN_TIMEOUT = 240
# harness -> (limit answer, seconds it refuses, seconds to reset the answers claim: None, the truth)
GIVES_UP = {"codex": ("usage", WINDOW, None)}
ISSUE_WINDOW = 40.0
DEFAULT_SPACING = 60.0  # limit_spacing's default: one relaunch per minute
# harness -> (limit answer, seconds to reset it claims) that makes the harness give up within
# the issue's window: Claude Code sleeps a true 40 s `retry-after` out itself (told an hour,
# it gives up), Pi 0.73.1 and OpenCode too (told 1 s, their retries are outlasted: 12
# refusals in 22 s, 6 in 5 s); Codex (no retries configured) and Pi 1.6.0 (4 tries in 14 s,
# whatever it is told) give up on the truth
ISSUE_GIVES_UP = {"claude-code": ("anthropic", 3600.0), "codex": ("openai", None),
                  "pi": ("anthropic", 1.0), "opencode": ("openai", 1.0)}
# the releases that sleep a true `retry-after` of the issue's window out by themselves
WAITS_ITSELF = {("claude-code", "2.1.197"), ("claude-code", "2.1.332"), ("pi", "0.73.1"),
                ("opencode", "1.18.33")}
ISSUE_STYLES = {"claude-code": "anthropic", "codex": "openai", "pi": "anthropic", "opencode": "openai"}


def run_dh(rig, harness: str, *opts: str, spacing: float | None = SPACING) -> subprocess.Popen:
    """dh run over the harness; spacing None: dh's own default."""
    env = dict(rig.env, **({"DH_LIMIT_SPACING": str(spacing)} if spacing is not None else {}))
    return subprocess.Popen([sys.executable, "-m", "dh_cli", "run", harness, *opts, "--",
                             *HEADLESS_ARGS[harness]("Create the files.")],
                            cwd=rig.proj, env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def states_seen_until_exit(rig, proc: subprocess.Popen) -> set[str]:
    """Every session state `dh log list --json` showed while dh ran."""
    seen, deadline = set(), time.monotonic() + RUN_TIMEOUT
    while proc.poll() is None:
        assert time.monotonic() < deadline, "dh did not finish"
        listed = dh("log", "list", "--json", env=rig.env, inherit=False, cwd=rig.proj)
        if listed.returncode == 0 and listed.stdout.strip():
            seen.update(s["state"] for s in json.loads(listed.stdout))
        time.sleep(0.5)
    return seen


def epoch(at: str) -> float:
    from datetime import datetime, timezone

    when = datetime.fromisoformat(at)
    return (when if when.tzinfo else when.replace(tzinfo=timezone.utc)).timestamp()


def the_session(rig):
    world = rig.world()
    (session,) = world.list_sessions()
    return world, session


def check_turn_completed_once(rig) -> None:
    assert (rig.proj / "a.txt").read_text() == "alpha\n"
    assert rig.server.completed_counts() == {0: 1, 1: 1, 2: 1, 3: 1}  # each reply requested once


def launch_times(world, session) -> list[float]:
    return [epoch(e.at) for e in world.events(session["id"]) if e.type == "launched"]


def check_limit_shown(rig, session) -> None:
    """`dh log show`: the limit, the wait, the continuation and the turn's end."""
    shown = dh("log", "show", session["id"], env=rig.env, inherit=False, cwd=rig.proj).stdout
    assert "the service refused the turn" in shown and "-> WAITING" in shown, shown
    assert "WAITING -> STARTING" in shown and "All done." in shown, shown


@pytest.mark.parametrize("harness", list(GIVES_UP))
def test_a_limit_the_harness_gives_up_on_is_waited_out_and_the_turn_goes_on(real_rig, harness):
    rig = real_rig(SCRIPT)
    style, window, advertise = GIVES_UP[harness]
    rig.server.limit_window(style, window, from_request=2, advertise=advertise)
    proc = run_dh(rig, harness)
    seen = states_seen_until_exit(rig, proc)
    err = proc.stderr.read().decode(errors="replace")
    assert proc.returncode == 0, err
    check_turn_completed_once(rig)
    assert "waiting" in seen, seen
    assert rig.server.refused(), "the server never refused"
    world, session = the_session(rig)
    launches = launch_times(world, session)
    assert len(launches) >= 2
    assert all(b - a >= SPACING for a, b in zip(launches, launches[1:])), launches
    assert f"dh: {harness} hit its " in err and "· Ctrl-C stops" in err
    check_limit_shown(rig, session)
    assert session["state"] == "finished"


def issue_harnesses(version_set: str) -> list[str]:
    """The harnesses whose release in the set is not run in another set."""
    return [h for h in ISSUE_GIVES_UP if version_set == "pinned" or install.NEWEST[h] != install.PACKAGES[h]]


def states_seen_until_all_exit(runs: dict) -> dict[tuple, set[str]]:
    """case -> every session state its world showed while its dh ran; the first `waiting`
    is read again through `dh log list --json` (what it shows is what counts)."""
    seen = {case: set() for case in runs}
    deadline = time.monotonic() + RUN_TIMEOUT
    while any(proc.poll() is None for _, proc in runs.values()):
        assert time.monotonic() < deadline, "dh did not finish"
        for case, (rig, proc) in runs.items():
            states = {s["state"] for s in rig.world().list_sessions()} if proc.poll() is None else set()
            if "waiting" in states and "waiting" not in seen[case]:
                states = {s["state"] for s in listed(rig)}
            seen[case] |= states
        time.sleep(0.25)
    return seen


def test_the_issues_window_at_the_default_spacing_completes_each_turn_once(real_rig, installed):
    """40 s of refusals from the 2nd request on, dh's default spacing, no flag, every harness
    of the set at once: told what makes it give up (dh waits and goes on), and, where the
    release sleeps a true `retry-after` out by itself, told the truth (dh leaves it be).
    Each turn completes, each reply requested once, at most one relaunch per minute."""
    versions = installed.versions()
    runs = {}
    for harness in issue_harnesses(installed.version_set):
        told = {"gives up": ISSUE_GIVES_UP[harness]}
        if (harness, versions[harness]) in WAITS_ITSELF:
            told["waits"] = (ISSUE_STYLES[harness], None)
        for case, (style, advertise) in told.items():
            rig = real_rig(SCRIPT, sub=f"{harness}-{case.replace(' ', '-')}")
            rig.server.limit_window(style, ISSUE_WINDOW, from_request=2, advertise=advertise)
            runs[harness, case] = (rig, run_dh(rig, harness, spacing=None))
    seen = states_seen_until_all_exit(runs)
    for (harness, case), (rig, proc) in runs.items():
        err = proc.stderr.read().decode(errors="replace")
        assert proc.returncode == 0, (harness, case, err)
        check_turn_completed_once(rig)
        assert rig.server.refused(), (harness, case)
        world, session = the_session(rig)
        launches = launch_times(world, session)
        assert len(launches) - 1 <= max(1, -(-ISSUE_WINDOW // DEFAULT_SPACING)), (harness, case, launches)
        assert all(b - a >= DEFAULT_SPACING for a, b in zip(launches, launches[1:])), (harness, case, launches)
        if case == "waits":
            assert len(launches) == 1 and "waiting" not in seen[harness, case], (harness, seen[harness, case])
        else:
            assert len(launches) == 2 and "waiting" in seen[harness, case], (harness, launches, seen[harness, case])
            check_limit_shown(rig, session)
        assert session["state"] == "finished", (harness, case)


# harness -> (limit answer, seconds to reset it claims) that the harness gives up on at once
STOPS = {"codex": ("usage", None), "claude-code": ("anthropic", 3600.0)}


@pytest.mark.parametrize("harness", list(STOPS))
def test_on_limit_stop_exits_with_the_harness_code_and_names_the_limit(real_rig, harness):
    """dh's only word is one `dh:` line naming the limit, and its code is the harness's own,
    as dh's `exited` event for the attempt recorded it."""
    rig = real_rig(SCRIPT)
    style, advertise = STOPS[harness]
    rig.server.limit_window(style, 3600, from_request=2, advertise=advertise)
    proc = run_dh(rig, harness, "--on-limit", "stop")
    _, err = proc.communicate(timeout=RUN_TIMEOUT)
    text = err.decode(errors="replace")
    world, session = the_session(rig)
    events = world.events(session["id"])
    (exited,) = [e for e in events if e.type == "exited"]
    assert exited.details["code"] not in (None, 0), exited.details
    assert proc.returncode == exited.details["code"], text
    lines = [line for line in text.splitlines() if line.startswith("dh:")]
    assert len(lines) == 1, text
    (limit,) = [e for e in events if e.type == "limit"]
    label = limit.details["label"]  # "rate", "usage", or a plan's window: "5-hour", "weekly"
    named = f"{label} limit" if label in ("rate", "usage") else f"limit ({label})"
    assert lines[0].startswith(f"dh: {harness} hit its ") and named in lines[0], (text, limit.details)
    assert "--on-limit stop" in lines[0], text
    assert [e.type for e in events].count("launched") == 1
    assert session["state"] == "limited"


@pytest.mark.parametrize(("stop", "resume"), [("SIGKILL", "at once"), ("SIGKILL", "--at-reset"),
                                              ("SIGINT", "--at-reset")])
@pytest.mark.harnesses("claude-code")
def test_dh_killed_while_waiting_then_resumed_completes_the_turn(real_rig, stop, resume):
    """SIGKILL: dh gone with no word to the log; SIGINT: the user's Ctrl-C, which cancels
    the wait. Either way the session is left resumable and `dh resume` finishes the turn:
    plain, it goes on at once, before the reset dh recorded (should the window still be
    open, the resumed dh waits out what is left of it); with --at-reset, only after it."""
    rig = real_rig(SCRIPT)
    rig.server.limit_window("anthropic", WINDOW, from_request=2, advertise=3600.0)
    proc = run_dh(rig, "claude-code", spacing=WINDOW + 10)  # the recorded reset is still ahead at the resume
    deadline = time.monotonic() + RUN_TIMEOUT
    while not any(s["state"] == "waiting" for s in listed(rig)):
        assert proc.poll() is None and time.monotonic() < deadline, "dh never waited"
        time.sleep(0.3)
    proc.send_signal(getattr(signal, stop))
    assert proc.wait(timeout=60) != 0
    (session,) = listed(rig)
    assert session["state"] == "interrupted", session  # its dh is gone: resumable
    world, _ = the_session(rig)
    (reset,) = [e.details["until"] for e in world.events(session["id"]) if e.details.get("to") == "WAITING"]
    refused_before = rig.server.refused()
    flags = ["--at-reset"] if resume == "--at-reset" else []
    resumed = dh("resume", session["id"], *flags, env=dict(rig.env, DH_LIMIT_SPACING=str(SPACING)),
                 inherit=False, cwd=rig.proj, timeout=RUN_TIMEOUT)
    assert resumed.returncode == 0, resumed.stderr
    check_turn_completed_once(rig)
    world, after = the_session(rig)
    assert after["state"] == "finished"
    first_relaunch = launch_times(world, after)[1]
    if resume == "--at-reset":
        assert first_relaunch >= reset
        assert "waiting for session" in resumed.stderr and "limit to reset" in resumed.stderr
        assert not rig.server.refused()[len(refused_before):]  # no probe before the reset
    else:
        assert first_relaunch < reset
        assert "waiting for session" not in resumed.stderr, resumed.stderr


def listed(rig) -> list[dict]:
    out = dh("log", "list", "--json", env=rig.env, inherit=False, cwd=rig.proj)
    return json.loads(out.stdout) if out.returncode == 0 and out.stdout.strip() else []


# What the server reports for the first call of each resumed attempt: the cache expired, so a
# cache write for the whole context (both TTLs in the first, 1-hour writes in the second).
CACHED = {2: {"input": 1200, "output": 7, "cache_write_5m": 40_000, "cache_write_1h": 2_500, "cache_read": 900},
          3: {"input": 800, "output": 7, "cache_write_5m": 0, "cache_write_1h": 61_000, "cache_read": 300}}


@pytest.mark.harnesses("claude-code")
@pytest.mark.version_sets("newest")
def test_what_a_resume_re_cached_is_shown_per_attempt_as_the_server_reported_it(real_rig):
    """Two crashes, two resumes by dh: attempt 2's first call is reply 1, attempt 3's reply 2.
    No real stall: the fake server reports cache writes whatever the time, so each of those
    replies is told (its `usage`, CACHED) to report the cache as expired, a write of the whole
    context, which stands for a stall past the cache's TTL. `dh log show --json` gives each
    split as the server reported it and its price at the published rates; the text view, the
    HTML export and `dh log list --json` show it, and the cost line sums the resumes."""
    r = SCRIPT["replies"]
    first = dict(r[0], usage={"input": 20_000, "output": 5})  # the cost line's total is more than the resumes'
    rig = real_rig({"replies": [first, dict(r[1], delay_s=60, delay_times=1, usage=CACHED[2]),
                                dict(r[2], delay_s=60, delay_times=1, usage=CACHED[3]), *r[3:]]})
    proc = run_dh(rig, "claude-code")
    crash_while_asking_for(rig, 1, b"tool_result")
    crash_while_asking_for(rig, 2, b"toolu_001")  # the Write's result
    _, err = proc.communicate(timeout=RUN_TIMEOUT)
    assert proc.returncode == 0, err
    world, session = the_session(rig)
    shown = json.loads(dh("log", "show", session["id"], "--json", env=rig.env, inherit=False,
                          cwd=rig.proj).stdout)
    resumes = shown["totals"]["resumes"]
    assert [r["attempt"] for r in resumes] == [2, 3]
    usd = {r["attempt"]: published_price(r["model"], CACHED[r["attempt"]]) for r in resumes}
    for r in resumes:
        reported = CACHED[r["attempt"]]
        assert {k: r[k] for k in ("cache_write_5m", "cache_write_1h", "cache_read")} == \
            {k: reported[k] for k in ("cache_write_5m", "cache_write_1h", "cache_read")}
        assert r["uncached"] == reported["input"]
        assert r["usd"] == pytest.approx(usd[r["attempt"]], rel=1e-6)
    assert shown["totals"]["cost"]["resume_usd"] == pytest.approx(usd[2] + usd[3], rel=1e-6)
    lines = {2: f"attempt 2: resume re-cached 42k tokens, ${usd[2]:.2f}",
             3: f"attempt 3: resume re-cached 61k tokens, ${usd[3]:.2f}"}
    text = dh("log", "show", session["id"], env=rig.env, inherit=False, cwd=rig.proj).stdout
    assert lines[2] in text and lines[3] in text, text
    (cost,) = [line for line in text.splitlines() if line.startswith("cost: ")]
    assert cost.startswith(f"cost: ${shown['totals']['cost']['usd']:.2f} ") and \
        f"(of it, resumes' first calls: ${usd[2] + usd[3]:.2f})" in cost, cost
    assert shown["totals"]["cost"]["usd"] > usd[2] + usd[3] + 0.01
    page = rig.tmp / "session.html"
    exported = dh("log", "export", session["id"], "--format", "html", "-o", str(page), env=rig.env,
                  inherit=False, cwd=rig.proj)
    assert exported.returncode == 0, exported.stderr
    html = page.read_text()
    assert lines[2] in html and lines[3] in html
    listed_one = [s for s in listed(rig) if s["id"] == session["id"]][0]
    assert listed_one["resume_cost"]["recached"] == 42_500 + 61_000
    assert listed_one["resume_cost"]["usd"] == pytest.approx(usd[2] + usd[3], rel=1e-6)


def published_price(model: str, reported: dict) -> float:
    """The input of a call the server reported, at the model's published rates."""
    split = {part: reported[key] for part, key in (("uncached", "input"), ("cache_read", "cache_read"),
             ("cache_write_5m", "cache_write_5m"), ("cache_write_1h", "cache_write_1h"))}
    return input_price("anthropic", model, split)


def crash_while_asking_for(rig, reply: int, logged: bytes) -> None:
    """SIGKILL the harness while the server holds back its first request for `reply`, once
    a record holding `logged` is in the log (the tool's result is logged before the kill, see
    test_real_harnesses)."""
    rig.server.wait_for(lambda log: any(e.get("reply_index") == reply for e in log), timeout=RUN_TIMEOUT)
    while not any(b"tool_result" in rec.raw and logged in rec.raw for rec in records_logged(rig)):
        time.sleep(0.1)
    world, session = the_session(rig)
    pid = [e for e in world.events(session["id"]) if e.type == "launched"][-1].details["pid"]
    os.killpg(pid, signal.SIGKILL)


def records_logged(rig) -> list:
    try:
        world = rig.world()
        return [rec for s in world.list_sessions() for rec in world.records(s["id"])]
    except Exception:  # noqa: BLE001 - the log may not exist yet
        return []


# harness -> (TUI args, text on screen once its editor is ready, keys that quit it), as test_tui.py
TUIS = {"claude-code": (["--dangerously-skip-permissions"], "bypass permissions", ["/exit", "\r"]),
        "codex": ([], "Ask Codex to do anything", ["/quit", "\r"])}
TUI_LIMITS = {"claude-code": ("anthropic", 3600.0), "codex": ("openai", 3600.0)}


@pytest.mark.harnesses(*TUIS)
def test_a_tui_at_a_limit_goes_on_in_the_same_terminal_without_a_keystroke(real_rig, installed):
    """The issue's window at dh's default spacing in the TUIs of the set, side by side (each
    on a thread of its own: one after the other they would add minutes)."""
    pytest.importorskip("pexpect")
    pytest.importorskip("pyte")
    from concurrent.futures import ThreadPoolExecutor

    harnesses = [h for h in TUIS if installed.version_set == "pinned" or install.NEWEST[h] != install.PACKAGES[h]]
    rigs = {h: real_rig(SCRIPT, sub=h) for h in harnesses}
    with ThreadPoolExecutor(len(harnesses)) as pool:
        seen = dict(zip(harnesses, pool.map(lambda h: drive_tui_through_a_limit(rigs[h], installed, h),
                                            harnesses)))
    for harness, rig in rigs.items():
        check_turn_completed_once(rig)
        assert rig.server.refused(), harness
        world, session = the_session(rig)
        launches = launch_times(world, session)
        assert len(launches) == 2, (harness, launches)  # the window is shorter than the spacing
        assert launches[1] - launches[0] >= DEFAULT_SPACING, (harness, launches)
        assert "waiting" in seen[harness], (harness, seen[harness])
        check_limit_shown(rig, session)


def drive_tui_through_a_limit(rig, installed, harness: str) -> set[str]:
    """The prompt typed once, then nothing but reading the screen until the final answer;
    the session states `dh log list --json` showed meanwhile."""
    from .tui import Tui, seed_claude_tui, trust_codex_project

    if harness == "claude-code":
        seed_claude_tui(rig, installed.versions()[harness])
    else:
        trust_codex_project(rig)
    # Codex: the API's 429 (no reset told: dh's backoff), where the headless case has the
    # plan's usage limit (a reset to the minute: up to a minute's wait)
    style, advertise = TUI_LIMITS[harness]
    rig.server.limit_window(style, ISSUE_WINDOW, from_request=2, advertise=advertise)
    args, ready, quit_keys = TUIS[harness]
    tui, seen, looked = Tui(rig, harness, args), set(), [0.0]

    def done() -> bool:
        if time.monotonic() - looked[0] > 1.0 and "waiting" not in seen:
            looked[0] = time.monotonic()
            seen.update(s["state"] for s in listed(rig))
        return tui.on_screen("All done.")

    try:
        tui.until(lambda: tui.on_screen(ready), what="the editor")
        tui.quiet()
        tui.submit("Create the files.", lambda: bool(rig.server.main_requests()))
        tui.until(done, timeout=RUN_TIMEOUT, what="the final answer")
        assert tui.quit(quit_keys) == 0, tui.text()
    finally:
        tui.close()
    return seen
