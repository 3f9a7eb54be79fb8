"""Live world benchmarks (issue 15), against a private PostgreSQL (tests/pg.py starts one).

  lag       replication lag, local commit -> visible in the world (read by a second
            connection polling every 5 ms), at 50 and 500 records/s, through the same live
            mirror and shipper `dh run --world postgres` uses. Printed next to the local
            mirror's own lag (append -> committed in SQLite) measured on the same records.
            Goal p99 <= 250 ms at 500 records/s.
  takeover  from SIGKILL of machine A's dh and harness (a model reply stalled) to the first
            model request of the harness B's `dh worker` resumed. Goal <= TTL + 2 s.
  idle      `dh worker`'s CPU while nothing is orphaned, over 30 s (10 ms ticks).
            Goal <= 0.2 % of a core.
Run: python bench/bench_live_world.py [lag|takeover|idle ...]"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.bench_supervisor import pct, pi_session  # noqa: E402
from dh_cli import wrappers  # noqa: E402
from dh_cli.mirror.live import LiveMirror  # noqa: E402
from dh_cli.worlds.local import LocalWorld  # noqa: E402
from dh_cli.worlds.postgres import PostgresWorld  # noqa: E402
from dh_cli.worlds.shipper import Shipper  # noqa: E402
from dh_cli.worlds.tenure import acquire  # noqa: E402
from tests import pg  # noqa: E402

TTL = 3


def _stamp(raw: bytes) -> float | None:
    if b'"text": "' not in raw:
        return None
    return float(raw.split(b'"text": "')[1].split(b" ")[0])


def _watch_world(url: str, stop: threading.Event, seen: list) -> None:
    world = PostgresWorld(url, migrate=False)
    last = (-1, -1)
    while not stop.is_set():
        rows = world._rows('SELECT generation, "offset", raw, codec FROM dh.records'
                           ' WHERE (generation, "offset") > (%s, %s) ORDER BY 1, 2', list(last))
        now = time.time()
        for generation, offset, raw, codec in rows:
            from dh_cli.worlds.local import decode_raw

            stamp = _stamp(decode_raw(raw, codec))
            if stamp is not None:
                seen.append(now - stamp)
            last = (generation, offset)
        time.sleep(0.005)
    world.close()


def lag_at(url: str, rate: int, seconds: float) -> None:
    work, session_file, world, session = pi_session("dh-live-lag-")
    remote = PostgresWorld(url)
    epoch = acquire(remote, session.id, 15)
    local_lags, world_lags, stop = [], [], threading.Event()
    original = LocalWorld.commit

    def timed_commit(self, source, records, events=()):
        added = original(self, source, records, events)
        now = time.time()
        for row in records:
            stamp = _stamp(row[3] if isinstance(row, tuple) else row.raw)
            if stamp is not None:
                local_lags.append(now - stamp)
        return added

    LocalWorld.commit = timed_commit
    live = LiveMirror(world.path, wrappers.get("pi"), session.id, session_file.parent).start()
    shipper = Shipper(world.path, url, session.id, lambda: epoch, print).start()
    watcher = threading.Thread(target=_watch_world, args=(url, stop, world_lags), daemon=True)
    watcher.start()
    time.sleep(0.5)
    subprocess.run([sys.executable, str(ROOT / "bench" / "bench_supervisor.py"), "_writer",
                    str(session_file), str(rate), str(seconds)], check=True)
    time.sleep(1.0)
    live.stop()
    shipper.stop()
    stop.set()
    watcher.join()
    LocalWorld.commit = original
    remote._rows("DELETE FROM dh.records RETURNING 1")
    remote.close()
    print(f"replication lag at {rate} records/s over {seconds:g} s: {len(world_lags)} records, "
          f"world p50 {pct(world_lags, .5) * 1000:.0f} ms, p99 {pct(world_lags, .99) * 1000:.0f} ms "
          f"(goal p99 <= 250 ms at 500/s); local mirror (baseline, same records) "
          f"p50 {pct(local_lags, .5) * 1000:.1f} ms, p99 {pct(local_lags, .99) * 1000:.1f} ms")
    shutil.rmtree(work)


def bench_lag() -> None:
    url = pg.fresh_db()
    for rate in (50, 500):
        lag_at(url, rate, 10)


def bench_takeover(runs: int = 3) -> None:
    from tests.fakes.model_server import FakeModelServer
    from tests.rig import HEADLESS_ARGS, SCRIPT, Rig

    script = {"replies": [SCRIPT["replies"][0], dict(SCRIPT["replies"][1], delay_s=60, delay_times=1),
                          *SCRIPT["replies"][2:]]}
    times = []
    for _ in range(runs):
        work, url = Path(tempfile.mkdtemp(prefix="dh-takeover-")), pg.fresh_db()
        model = FakeModelServer(script).start()
        (work / "A").mkdir(), (work / "B").mkdir()
        a, b = Rig(work / "A", model), Rig(work / "B", model)
        worker = _dh(b, "worker", "--url", url, "--lease-ttl", str(TTL))
        run = _dh(a, "run", "pi", "--world", "postgres", "--url", url, "--lease-ttl", str(TTL),
                  "--", *HEADLESS_ARGS["pi"]("Go."))
        _until(lambda: any(r["reply_index"] == 1 for r in model.main_requests()), 60)
        time.sleep(1.0)  # the shipper has it all (its lag is well under this)
        pid = [e for e in a.world().events(a.world().list_sessions()[0]["id"])
               if e.type == "launched"][-1].details["pid"]
        before = len(model.main_requests())
        for group in (run.pid, pid):
            os.killpg(os.getpgid(group), signal.SIGKILL)
        killed = time.monotonic()
        _until(lambda: len(model.main_requests()) > before, 60)
        times.append(time.monotonic() - killed)
        worker.send_signal(signal.SIGTERM)
        worker.wait(timeout=60)
        model.stop()
        shutil.rmtree(work, ignore_errors=True)
    print(f"takeover, kill -> first model request on B, TTL {TTL} s, {runs} runs: "
          f"{', '.join(f'{t:.1f}' for t in times)} s (goal <= TTL + 2 = {TTL + 2} s); "
          f"baseline: the TTL itself, {TTL} s")


def bench_idle(seconds: float = 30) -> None:
    work, url = Path(tempfile.mkdtemp(prefix="dh-worker-idle-")), pg.fresh_db()
    env = {**os.environ, "DH_HOME": str(work / "dh-home"), "PYTHONPATH": str(ROOT)}
    worker = subprocess.Popen([sys.executable, "-m", "dh_cli", "worker", "--url", url], env=env,
                              stderr=subprocess.DEVNULL)
    time.sleep(3)
    proc = psutil.Process(worker.pid)
    before, start = proc.cpu_times(), time.perf_counter()
    time.sleep(seconds)
    after, wall = proc.cpu_times(), time.perf_counter() - start
    if worker.poll() is not None:
        raise SystemExit(f"dh worker exited with code {worker.returncode} before the end")
    cpu = max(0.0, after.user + after.system - before.user - before.system) / wall * 100
    worker.terminate()
    worker.wait()
    print(f"dh worker idle over {seconds:g} s: CPU {cpu:.2f} % of a core (goal <= 0.2 %)")
    shutil.rmtree(work, ignore_errors=True)


def _dh(rig, *args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "dh_cli", *args], cwd=rig.proj,
                            env={**rig.env, "PYTHONPATH": str(ROOT)}, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)


def _until(predicate, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise SystemExit("timed out")
        time.sleep(0.02)


if __name__ == "__main__":
    for name in sys.argv[1:] or ["lag", "takeover", "idle"]:
        {"lag": bench_lag, "takeover": bench_takeover, "idle": bench_idle}[name]()
