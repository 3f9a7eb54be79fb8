"""One soak case over a real harness CLI: `dh run` (headless, or its TUI in a pty), each planned
kill made at its moment, the session taken on again the way a person would (dh relaunches a
killed harness itself; after dh is killed, `dh resume S`), and at the end the invariants
checked (checks.py). Whatever goes wrong comes back as a violation, never as an exception,
so one bad case does not end a soak."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from tests.e2e.conftest import make_real_rig
from tests.helpers.real_runs import RUN_TIMEOUT, launched_pid
from tests.rig import HEADLESS_ARGS

from . import checks, state
from .plan import Case, Kill
from .tui_driver import TuiSession

PROMPT = "Create the files."
FINAL = "All done."
MOMENT_TIMEOUT = 120.0


def script(delays: list[float]) -> dict:
    """Nine replies: four shell steps (one slow), two writes, two reads, the final text. The
    shell steps are `never` tools: each appends its own line, which must be there at most
    once."""
    steps = [{"text": "Step one.", "shell": "echo soak0 >> steps.log"},
             {"write": {"path": "a.txt", "content": "alpha\n"}},
             {"text": "A slow step.", "shell": "sleep 1; echo soak2 >> steps.log"},
             {"read": {"path": "a.txt"}},
             {"text": "Step four.", "shell": "echo soak4 >> steps.log"},
             {"write": {"path": "b.txt", "content": "beta\n"}},
             {"shell": "echo soak6 >> steps.log"},
             {"read": {"path": "b.txt"}},
             {"text": FINAL}]
    return {"replies": [dict(step, delay_s=delay) for step, delay in zip(steps, delays)]}


EXPECTED_LINES = ["soak0", "soak2", "soak4", "soak6"]
WRITTEN = {"a.txt": "alpha\n", "b.txt": "beta\n"}


@dataclass
class Outcome:
    case: Case
    kills_made: int = 0
    cuts: int = 0  # kills made while the harness ran (one ending its turn leaves no crash)
    # of those, kills after the harness had written the turn's final answer: the turn was
    # over, so dh may mark them or not (it marks none when its log held the whole turn)
    late: int = 0
    violations: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def to_dict(self) -> dict:
        return {"case": self.case.name, **self.case.to_dict(), "kills_made": self.kills_made,
                "cuts": self.cuts, "late": self.late, "violations": self.violations, "seconds": round(self.seconds, 1)}


class Runner:
    """Runs one case in `tmp` over the installed harnesses."""

    def __init__(self, case: Case, installed, tmp: Path):
        self.case, self.tmp = case, tmp
        self.rig = make_real_rig(tmp, script(case.delays), installed)
        self.harness = case.harness
        self.snapshots: list[state.Snapshot] = []
        self.proc: subprocess.Popen | None = None
        self.tui: TuiSession | None = None
        self.attempt_requests = 0  # main requests the server had seen when this attempt began

    # running ----------------------------------------------------------------------------
    def run(self) -> Outcome:
        outcome = Outcome(self.case)
        started = time.monotonic()
        try:
            self._start()
            for kill in self.case.kills:
                if not self._wait_for_moment(kill):
                    break  # the turn ended before the moment came: no kill
                cut = self._kill(kill)
                if cut is None:
                    break  # the harness had ended its turn and exited: nothing to kill
                outcome.kills_made += 1
                outcome.cuts += cut
                outcome.late += cut and state.REPLIES - 1 in self.snapshots[-1].kept
            outcome.violations += self._finish()
            outcome.violations += checks.check_all(self.rig, self.harness, self.snapshots,
                                                   (outcome.cuts, outcome.late), EXPECTED_LINES,
                                                   WRITTEN, FINAL)
        except Exception:  # noqa: BLE001 - a soak reports every failure as a violation
            outcome.violations.append("error: " + traceback.format_exc(limit=6)[-1500:])
        finally:
            self._close()
        outcome.seconds = time.monotonic() - started
        if outcome.violations:
            self._keep_evidence(outcome)
        return outcome

    def _keep_evidence(self, outcome: Outcome) -> None:
        """What a failing case's reader needs: the violations, the kills' snapshots and the
        model server's log (of each request body, only the text of its last user turn)."""
        log = [{k: v for k, v in e.items() if k != "body"}
               | ({"last_user": checks.last_user_text(e["body"])[:2000]} if "body" in e else {})
               for e in self.rig.server.log]
        (self.tmp / "soak-case.json").write_text(json.dumps({
            **outcome.to_dict(), "snapshots": [vars(s) | {"kept": sorted(s.kept), "in_flight": sorted(s.in_flight)}
                          for s in self.snapshots],
            "server_log": log}, indent=1, default=str))

    def _start(self) -> None:
        if self.case.mode == "tui":
            self.tui = TuiSession(self.rig, self.harness, self.case.version_set)
            self.tui.start_and_type(PROMPT)
        else:
            out = open(self.tmp / "dh-stdout.txt", "ab")
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "dh_cli", "run", self.harness, "--",
                 *HEADLESS_ARGS[self.harness](PROMPT)],
                cwd=self.rig.proj, env=self.rig.env, stdin=subprocess.DEVNULL, stdout=out,
                stderr=open(self.tmp / "dh-stderr.txt", "ab"))
        self.attempt_requests = 0

    def _dh_pid(self) -> int:
        return self.tui.pid if self.tui else self.proc.pid

    def _dh_alive(self) -> bool:
        return self.tui.alive() if self.tui else self.proc.poll() is None

    def _wait_for_moment(self, kill: Kill) -> bool:
        """Wait for the kill's moment; False if dh ended (the turn is done) before it."""
        deadline = time.monotonic() + MOMENT_TIMEOUT
        wanted = self.attempt_requests + kill.after_requests
        while len(self.rig.server.main_requests()) < wanted or not self._harness_pid():
            if self._turn_done():
                return False
            if time.monotonic() > deadline:
                raise AssertionError(f"no harness running, or no model request, in "
                                     f"{MOMENT_TIMEOUT:.0f} s, while dh still ran")
            self._idle(0.02)
        end = time.monotonic() + kill.offset_s
        while time.monotonic() < end:
            if self._turn_done():
                return False
            self._idle(0.02)
        return not self._turn_done()

    def _turn_done(self) -> bool:
        if not self._dh_alive():
            return True
        return bool(self.tui) and self.tui.final_shown(FINAL)

    def _idle(self, seconds: float) -> None:
        if self.tui:
            self.tui.idle(seconds)
        else:
            time.sleep(seconds)

    def _harness_pid(self) -> int | None:
        """The current attempt's harness pid once dh has launched it, else None."""
        try:
            pid = launched_pid(self.rig, timeout=0.01)
        except Exception:  # noqa: BLE001 - not launched yet
            return None
        try:
            return pid if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE else None
        except psutil.Error:
            return None

    # killing ----------------------------------------------------------------------------
    def _kill(self, kill: Kill) -> bool | None:
        """Make the kill; whether it cut a running harness (None: there was none to kill)."""
        pgid = self._harness_pid()
        if kill.target == "harness":
            if not pgid:
                return None
            _killpg(pgid)
            self.snapshots.append(state.native(self.rig, self.harness, self.rig.server))
            self._wait_relaunched(pgid)
            return True
        os.kill(self._dh_pid(), signal.SIGKILL)
        if kill.target in ("both", "home"):
            _killpg(pgid)
        self._reap_dh()
        _wait_group_gone(pgid)
        if kill.target == "home":
            state.lose_the_home(self.rig, self.harness)
            self.snapshots.append(state.logged(self.rig, self.harness, self.rig.server))
        else:
            self.snapshots.append(state.native(self.rig, self.harness, self.rig.server))
        self._resume()
        return pgid is not None

    def _wait_relaunched(self, old_pid: int | None) -> None:
        """dh relaunches the harness; the next kill counts requests from here."""
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and self._dh_alive():
            pid = self._harness_pid()
            if pid and pid != old_pid:
                break
            self._idle(0.05)
        self.attempt_requests = len(self.rig.server.main_requests())

    def _reap_dh(self) -> None:
        if self.tui:
            self.tui.reap()
        else:
            self.proc.wait(timeout=30)

    def _resume(self) -> None:
        session = checks.session_id(self.rig)
        self.attempt_requests = len(self.rig.server.main_requests())
        if self.tui:
            self.tui = self.tui.resume(session)
            return
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "dh_cli", "resume", session], cwd=self.rig.proj,
            env=self.rig.env, stdin=subprocess.DEVNULL,
            stdout=open(self.tmp / "dh-stdout.txt", "ab"),
            stderr=open(self.tmp / "dh-stderr.txt", "ab"))

    # ending -----------------------------------------------------------------------------
    def _finish(self) -> list[str]:
        if self.tui:
            return self.tui.finish(FINAL)
        try:
            code = self.proc.wait(timeout=RUN_TIMEOUT)
        except subprocess.TimeoutExpired:
            return [f"dh did not finish in {RUN_TIMEOUT} s"]
        err = (self.tmp / "dh-stderr.txt").read_text(errors="replace")
        return [] if code == 0 else [f"dh exited {code}: {err[-800:]}"]

    def _close(self) -> None:
        if self.tui:
            self.tui.close()
        elif self.proc and self.proc.poll() is None:
            self.proc.kill()
        for proc in psutil.process_iter(["cmdline", "cwd"]):
            try:
                if str(self.tmp) in " ".join(proc.info["cmdline"] or []) + (proc.info["cwd"] or ""):
                    proc.kill()
            except psutil.Error:
                continue
        self.rig.server.stop()


def _killpg(pgid: int | None) -> None:
    if pgid:
        try:
            os.killpg(pgid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _wait_group_gone(pgid: int | None, timeout: float = 30) -> None:
    """The killed harness's group is gone (dh's guardian ends it when dh dies)."""
    deadline = time.monotonic() + timeout
    while pgid and time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)


def run_case(case: Case, installed, root: Path, keep: bool = False) -> Outcome:
    tmp = root / case.name
    tmp.mkdir(parents=True, exist_ok=True)
    outcome = Runner(case, installed, tmp).run()
    if not outcome.violations and not keep:
        shutil.rmtree(tmp, ignore_errors=True)
    return outcome
