"""Live world benchmarks (issues 15, 27), for each registered team world in the same run,
against private servers (tests/helpers/team_worlds.py: SERVERS starts them).

  lag       replication lag, local commit -> visible in the world (read by a second
            connection polling every 5 ms), at 50 and 500 records/s, through the same live
            mirror and shipper `dh run --world W` uses. Printed next to the local mirror's own
            lag (append -> committed in SQLite) measured on the same records, and as a ratio
            of each world to the first registered one. Goal p99 <= 250 ms at 500 records/s.
  takeover  from SIGKILL of machine A's dh and harness (a model reply stalled) to B's claim
            (the lease's epoch moved) and to the first model request of the harness B's
            `dh worker` resumed. Goal <= TTL + 2 s; baseline: the TTL itself.
  idle      `dh worker`'s CPU while nothing is orphaned, over 30 s (10 ms ticks).
            Goal <= 0.2 % of a core.
Run: python bench/bench_live_world.py [lag|takeover|idle ...] [--seconds S] [--runs N]"""

from __future__ import annotations

import os
import shutil
import signal
import statistics
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
from dh_cli.team import names, open_world  # noqa: E402
from dh_cli.team.shipper import Shipper  # noqa: E402
from dh_cli.team.tenure import acquire  # noqa: E402
from tests.helpers.team_worlds import server_of  # noqa: E402

TTL = 3
WORLDS = names()
SECONDS, RUNS = 10.0, 3  # per lag rate; takeovers per world (--seconds, --runs)


def fresh_url(name: str) -> str:
    return server_of(name).fresh_url()


def _stamp(raw: bytes) -> float | None:
    if b'"text": "' not in raw:
        return None
    return float(raw.split(b'"text": "')[1].split(b" ")[0])


def _watch_world(name: str, url: str, sid: str, stop: threading.Event, seen: list) -> None:
    world, last = open_world(name, url, migrate=False), {}
    while not stop.is_set():
        for source in world.sources(sid):
            records = world.read_records(sid, source.relpath, after=last.get(source.relpath))
            now = time.time()
            for record in records:
                if (stamp := _stamp(record.raw)) is not None:
                    seen.append(now - stamp)
            if records:
                last[source.relpath] = (records[-1].generation, records[-1].offset)
        time.sleep(0.005)
    world.close()


def lag_at(name: str, rate: int, seconds: float) -> tuple[list, list]:
    """(lags to the world, lags of the local mirror), in seconds, one per record."""
    url = fresh_url(name)
    work, session_file, world, session = pi_session("dh-live-lag-")
    remote = open_world(name, url)
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
    shipper = Shipper(world.path, name, url, session.id, lambda: epoch, print).start()
    watcher = threading.Thread(target=_watch_world, args=(name, url, session.id, stop, world_lags),
                               daemon=True)
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
    remote.close()
    shutil.rmtree(work)
    return world_lags, local_lags


def _ms(values, q) -> float:
    return pct(values, q) * 1000


def bench_lag(seconds: float = SECONDS) -> None:
    for rate in (50, 500):
        got = {}
        for name in WORLDS:
            world_lags, local_lags = got[name] = lag_at(name, rate, seconds)
            print(f"replication lag to {name} at {rate} records/s over {seconds:g} s: "
                  f"{len(world_lags)} records, world p50 {_ms(world_lags, .5):.0f} ms, p99 "
                  f"{_ms(world_lags, .99):.0f} ms (goal p99 <= 250 ms at 500/s); local mirror "
                  f"(baseline, same records) p50 {_ms(local_lags, .5):.1f} ms, p99 "
                  f"{_ms(local_lags, .99):.1f} ms")
        base = got[WORLDS[0]][0]
        for name in WORLDS[1:]:
            lags = got[name][0]
            print(f"  {name} / {WORLDS[0]} at {rate}/s: p50 {_ms(lags, .5) / _ms(base, .5):.2f}x,"
                  f" p99 {_ms(lags, .99) / _ms(base, .99):.2f}x")


def takeover_once(name: str, script: dict) -> tuple[float, float]:
    """(kill -> B's claim, kill -> B's first model request), in seconds."""
    from tests.fakes.model_server import FakeModelServer
    from tests.rig import HEADLESS_ARGS, Rig

    work, url = Path(tempfile.mkdtemp(prefix="dh-takeover-")), fresh_url(name)
    model = FakeModelServer(script).start()
    (work / "A").mkdir(), (work / "B").mkdir()
    a, b = Rig(work / "A", model), Rig(work / "B", model)
    worker = _dh(b, "worker", "--world", name, "--url", url, "--lease-ttl", str(TTL))
    run = _dh(a, "run", "pi", "--world", name, "--url", url, "--lease-ttl", str(TTL),
              "--", *HEADLESS_ARGS["pi"]("Go."))
    _until(lambda: any(r["reply_index"] == 1 for r in model.main_requests()), 60)
    time.sleep(1.0)  # the shipper has it all (its lag is well under this)
    sid = a.world().list_sessions()[0]["id"]
    pid = [e for e in a.world().events(sid) if e.type == "launched"][-1].details["pid"]
    before, world = len(model.main_requests()), open_world(name, url)
    for group in (run.pid, pid):
        os.killpg(os.getpgid(group), signal.SIGKILL)
    killed = time.monotonic()
    _until(lambda: world.leases(sid)[sid].epoch == 2, 60, step=0.01)
    claimed = time.monotonic() - killed
    _until(lambda: len(model.main_requests()) > before, 60)
    first = time.monotonic() - killed
    world.close()
    worker.send_signal(signal.SIGTERM)
    worker.wait(timeout=60)
    model.stop()
    shutil.rmtree(work, ignore_errors=True)
    return claimed, first


def bench_takeover(runs: int = RUNS) -> None:
    from tests.rig import SCRIPT

    script = {"replies": [SCRIPT["replies"][0], dict(SCRIPT["replies"][1], delay_s=60, delay_times=1),
                          *SCRIPT["replies"][2:]]}
    medians = {}
    for name in WORLDS:
        times = [takeover_once(name, script) for _ in range(runs)]
        medians[name] = statistics.median(t[1] for t in times)
        print(f"takeover on {name}, TTL {TTL} s, {runs} runs: kill -> claim "
              f"{', '.join(f'{t[0]:.1f}' for t in times)} s; kill -> first model request on B "
              f"{', '.join(f'{t[1]:.1f}' for t in times)} s (goal <= TTL + 2 = {TTL + 2} s; "
              f"baseline: the TTL itself, {TTL} s)")
    for name in WORLDS[1:]:
        print(f"  {name} / {WORLDS[0]}, median kill -> first request: "
              f"{medians[name] / medians[WORLDS[0]]:.2f}x")


def bench_idle(seconds: float = 30) -> None:
    for name in WORLDS:
        idle_on(name, seconds)


def idle_on(name: str, seconds: float) -> None:
    work, url = Path(tempfile.mkdtemp(prefix="dh-worker-idle-")), fresh_url(name)
    env = {**os.environ, "DH_HOME": str(work / "dh-home"), "PYTHONPATH": str(ROOT)}
    worker = subprocess.Popen([sys.executable, "-m", "dh_cli", "worker", "--world", name, "--url", url],
                              env=env, stderr=subprocess.DEVNULL)
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
    print(f"dh worker on {name} idle over {seconds:g} s: CPU {cpu:.2f} % of a core (goal <= 0.2 %)")
    shutil.rmtree(work, ignore_errors=True)


def _dh(rig, *args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "dh_cli", *args], cwd=rig.proj,
                            env={**rig.env, "PYTHONPATH": str(ROOT)}, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)


def _until(predicate, timeout: float, step: float = 0.02) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise SystemExit("timed out")
        time.sleep(step)


def main(argv: list[str]) -> None:
    global SECONDS, RUNS
    names = []
    while argv:
        arg = argv.pop(0)
        if arg == "--seconds":
            SECONDS = float(argv.pop(0))
        elif arg == "--runs":
            RUNS = int(argv.pop(0))
        else:
            names.append(arg)
    benches = {"lag": lambda: bench_lag(SECONDS), "takeover": lambda: bench_takeover(RUNS),
               "idle": bench_idle}
    for name in names or ["lag", "takeover", "idle"]:
        benches[name]()


if __name__ == "__main__":
    main(sys.argv[1:])
