"""Snapshot lag after a completed step, quiet and under load, over the real Claude Code CLI
headless and the scripted model on loopback.

A sampler looks at the harness's transcript every 2 ms and keeps when each tool result was
first on disk; another looks at dh's log every 2 ms and keeps when the snapshot of each
step (a `ws_snapshots` row whose step is that call) was first committed. A step's lag is
the time between the two. The model's next answer waits 0.3 s, so each step gets its own
snapshot when dh keeps up. Printed: median and max lag quiet (the baseline, in the same run)
and with one busy loop per core (--load N: N busy processes, default the core count),
and the steps with no snapshot of their own.

Run: python bench/bench_snapshot_lag.py [--steps 8] [--load N]"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.e2e import install  # noqa: E402
from tests.e2e.conftest import make_real_rig  # noqa: E402
from tests.rig import HEADLESS_ARGS  # noqa: E402


def script(steps: int) -> dict:
    return {"replies": [*({"text": f"Step {i}.", "shell": f"echo s{i} >> steps.log",
                           "delay_s": 0.3} for i in range(steps)), {"text": "All done."}]}


class Looker(threading.Thread):
    """First sight of each tool result on disk and of each step's snapshot in the log."""

    def __init__(self, rig, every: float = 0.002):
        super().__init__(daemon=True)
        self.rig, self.every, self.stop_event = rig, every, threading.Event()
        self.on_disk: dict[str, float] = {}
        self.snapped: dict[str, float] = {}
        self.logged: dict[str, float] = {}  # the tool result's record committed

    def run(self) -> None:
        world = None
        while not self.stop_event.is_set():
            now = time.monotonic()
            self._disk(now)
            try:
                world = world or self.rig.world()
                for (step,) in world.conn.execute("SELECT step FROM ws_snapshots WHERE step IS NOT NULL"):
                    self.snapped.setdefault(step, now)
                self._log(world, now)
            except Exception:  # noqa: BLE001 - the log is being created
                world = None
            time.sleep(self.every)

    def _log(self, world, now: float) -> None:
        for session in world.list_sessions():
            for record in world.records(session["id"]):
                for call in self.on_disk:
                    if call not in self.logged and call.encode() in bytes(record.raw):
                        if b'"tool_result"' in bytes(record.raw):
                            self.logged[call] = now

    def _disk(self, now: float) -> None:
        for path in (self.rig.tmp / ".claude" / "projects").glob("*/*.jsonl"):
            for line in path.read_bytes().splitlines():
                if b'"tool_result"' not in line:
                    continue
                for part in json.loads(line).get("message", {}).get("content", []):
                    if isinstance(part, dict) and part.get("type") == "tool_result":
                        self.on_disk.setdefault(part["tool_use_id"], now)


def burn() -> None:
    while True:
        pass


def measure(installed, steps: int, load: int) -> tuple[list[float], list[float], int]:
    burners = [multiprocessing.Process(target=burn, daemon=True) for _ in range(load)]
    for proc in burners:
        proc.start()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            rig = make_real_rig(Path(tmp), script(steps), installed)
            looker = Looker(rig)
            looker.start()
            try:
                subprocess.run([sys.executable, "-m", "dh_cli", "run", "claude-code", "--",
                                *HEADLESS_ARGS["claude-code"]("Run the steps.")], cwd=rig.proj,
                               env=rig.env, stdin=subprocess.DEVNULL, capture_output=True, timeout=600)
                time.sleep(0.3)
            finally:
                looker.stop_event.set()
                looker.join(timeout=10)
                rig.server.stop()
    finally:
        for proc in burners:
            proc.terminate()
    lags = [(looker.snapped[s] - t) * 1000 for s, t in looker.on_disk.items() if s in looker.snapped]
    mirror = [(looker.logged[s] - t) * 1000 for s, t in looker.on_disk.items() if s in looker.logged]
    return lags, mirror, len(looker.on_disk) - len(lags)


def show(values: list[float]) -> str:
    if not values:
        return "n/a"
    return f"median {statistics.median(values):7.1f} ms  max {max(values):7.1f} ms  (n={len(values)})"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--load", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--runs", type=int, default=2)
    args = parser.parse_args()
    installed = install.ensure()
    print(f"snapshot lag after a completed step ({args.steps} steps a run, {args.runs} runs)")
    for label, load in (("quiet", 0), (f"load {args.load}", args.load)):
        lags, mirror, unsnapped = [], [], 0
        for _ in range(args.runs):
            got, logged, missed = measure(installed, args.steps, load)
            lags, mirror, unsnapped = lags + got, mirror + logged, unsnapped + missed
        print(f"{label:8} snapshot {show(lags)}  steps with no snapshot of their own: {unsnapped}")
        print(f"{'':8} record   {show(mirror)}")


if __name__ == "__main__":
    main()
