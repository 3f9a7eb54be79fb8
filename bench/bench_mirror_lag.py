"""Mirror lag from the first record of a new session (issue 20), per harness, over the real
programs (tests/e2e/install.py) and the scripted model on loopback.

A sampler looks at the harness's native files (OpenCode: its rows) every 2 ms, another at
dh's log; a record's lag is the time from its first sight on disk to its first sight in the
log. Printed: median and max lag of the session's first 20 records, beside the same for its
later records (the baseline, measured in the same run): the first records must reach the log
as fast as the later ones (ratio ~1). Before the fix Codex's first records waited for the
5 s poll (2 of 16 logged 0.5 s after they were written).

Run: python bench/bench_mirror_lag.py [claude-code codex opencode pi]"""

from __future__ import annotations

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
from tests.e2e.native_sampler import Sampler  # noqa: E402
from tests.e2e.test_mirror_lag import HOMES, LAG_SCRIPT  # noqa: E402
from tests.rig import HARNESSES, HEADLESS_ARGS  # noqa: E402

FIRST = 20


class LogSampler(threading.Thread):
    """First sight of each record in dh's log, keyed like the native sampler's records."""

    def __init__(self, rig, every: float = 0.002):
        super().__init__(daemon=True)
        self.rig, self.every, self.seen, self.stop_event = rig, every, {}, threading.Event()

    def run(self) -> None:
        world = None
        while not self.stop_event.is_set():
            try:
                world = world or self.rig.world()
                self._look(world)
            except Exception:  # noqa: BLE001 - the log is being created
                world = None
            time.sleep(self.every)

    def _look(self, world) -> None:
        import json

        from dh_cli.wrappers.opencode_rows import row_key

        now = time.monotonic()
        for session in world.list_sessions():
            for source in world.sources(session["id"]):
                for i, record in enumerate(world.records(session["id"], source.id)):
                    raw = bytes(record.raw)
                    key = (row_key(json.loads(raw)), 0) if source.kind == "opencode" else (source.relpath, i)
                    self.seen.setdefault((key, raw), now)


def measure(harness: str, installed) -> tuple[list[float], list[float]]:
    with tempfile.TemporaryDirectory() as tmp:
        rig = make_real_rig(Path(tmp), LAG_SCRIPT, installed)
        disk = Sampler(harness, Path(tmp) / HOMES[harness], every=0.002).start()
        log = LogSampler(rig)
        log.start()
        try:
            subprocess.run([sys.executable, "-m", "dh_cli", "run", harness, "--",
                            *HEADLESS_ARGS[harness]("Create the files.")], cwd=rig.proj, env=rig.env,
                           stdin=subprocess.DEVNULL, capture_output=True, timeout=240)
            time.sleep(0.3)
        finally:
            disk.stop()
            log.stop_event.set()
            log.join(timeout=10)
            rig.server.stop()
        order = sorted(disk.first_seen.items(), key=lambda item: item[1])
        lags = [(log.seen[record] - when) * 1000 for record, when in order if record in log.seen]
        return lags[:FIRST], lags[FIRST:]


def show(values: list[float]) -> str:
    if not values:
        return "n/a"
    return f"median {statistics.median(values):7.1f} ms  max {max(values):7.1f} ms  (n={len(values)})"


def main(names: list[str]) -> None:
    installed = install.ensure()
    print(f"mirror lag, first {FIRST} records vs later ones (sampled every 2 ms on both sides)")
    for harness in names or HARNESSES:
        first, later = measure(harness, installed)
        ratio = (statistics.median(first) / statistics.median(later)) if first and later and statistics.median(later) > 0 else float("nan")
        print(f"{harness:12} first: {show(first)}")
        print(f"{'':12} later: {show(later)}   first/later median ratio {ratio:.2f}")


if __name__ == "__main__":
    main(sys.argv[1:])
